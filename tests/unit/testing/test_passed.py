"""The checker's "nothing passed unapplied" property: a database's ``repl.last.id`` may move past one
of its events only when the event's change shows, or an operator skipped it (issue 28)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streamer.testing import History, Sample, check, table_key
from streamer.testing.checker import PASSED, Report
from tests.unit.target import builders as b

ORDERS, OTHER = table_key("sales", "orders"), table_key("sales", "other")


def _history(tmp_path: Path) -> History:
    """sales: two tables; event 4 inserts into orders, event 5 into other (the halted-then-retried
    event 32 and the next event 33 of the issue)."""
    orders, other = b.table("sales", "orders"), b.table("sales", "other")
    return History.build([
        b.create_db(1, "sales"),
        b.create_table(2, orders),
        b.create_table(3, other),
        b.insert(4, orders, [b.write_source_file(tmp_path, "orders/000000_0", b"a")]),
        b.insert(5, other, [b.write_source_file(tmp_path, "other/000000_0", b"b")]),
    ])


def _sample(history: History, orders_at: int, other_at: int, applied: int) -> Sample:
    return Sample("r", 1_700_000_010.0, {"sales": applied}, {
        ORDERS: history.state_at(ORDERS, orders_at), OTHER: history.state_at(OTHER, other_at),
    })


def _passed(report: Report) -> list[str]:
    return [str(v) for v in report.violations if v.check == PASSED]


def test_progress_past_an_event_whose_change_is_missing_is_a_violation(tmp_path: Path) -> None:
    history = _history(tmp_path)
    lost = _sample(history, orders_at=3, other_at=5, applied=5)  # event 4 never applied, 5 was
    passed = _passed(check(history, [lost]))
    assert len(passed) == 1, passed
    assert "event 4 (INSERT) of sales was passed" in passed[0] and ORDERS in passed[0]
    # the same evidence in a database-scoped judgement (lanes)
    assert _passed(check(history, [lost], scope="database"))
    # a sample of orders alone, repl.last.id at 5: still passed (no other table needed)
    alone = dataclasses.replace(lost, tables={ORDERS: lost.tables[ORDERS]})
    assert _passed(check(history, [alone]))


def test_every_event_applied_or_not_yet_passed_satisfies_it(tmp_path: Path) -> None:
    history = _history(tmp_path)
    applied = _sample(history, orders_at=5, other_at=5, applied=5)
    assert check(history, [applied]).ok, check(history, [applied]).summary()
    behind = _sample(history, orders_at=3, other_at=3, applied=3)  # not passed yet: only stale
    assert check(history, [behind]).ok, check(history, [behind]).summary()


def test_an_operator_skip_excuses_exactly_the_skipped_event(tmp_path: Path) -> None:
    history = _history(tmp_path)
    lost = _sample(history, orders_at=3, other_at=5, applied=5)
    assert not _passed(check(history, [lost], skipped={"sales": [4]}))
    with pytest.raises(ValueError, match=r"\[5\] are not events of database other"):
        check(history, [lost], skipped={"other": [5]})


def test_history_records_each_events_database_and_type(tmp_path: Path) -> None:
    history = _history(tmp_path)
    assert history.events_of("SALES") == [1, 2, 3, 4, 5]
    info = history.event(4)
    assert info is not None and (info.db, info.event_type) == ("sales", "INSERT")
    assert history.event(99) is None
