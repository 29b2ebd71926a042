"""Failback: the old source's changes after the cut, grouped per object (pure)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from streamer.hive.notification import NotificationRow
from streamer.target.dr.failback import describe, divergence
from streamer.target.dr.failover import Cut, DatabaseCut


def row(event_id: int, kind: str, db: str | None, table: str | None = None) -> NotificationRow:
    return NotificationRow(event_id, 0, kind, "{}", "json-0.2", db, table)


CUT = Cut(event_id=10, source_head_event_id=12, consumed_event_id=10,
          databases=(DatabaseCut("sales", 10, 10), DatabaseCut("hr", 8, 10)))


def test_changes_after_the_cut_are_listed_per_object() -> None:
    rows = [row(9, "INSERT", "sales", "orders"), row(11, "INSERT", "sales", "orders"),
            row(12, "ADD_PARTITION", "SALES", "orders"), row(13, "CREATE_TABLE", "hr", "people"),
            row(14, "OPEN_TXN", None), row(15, "CREATE_DATABASE", "scratch"), row(16, "ALTER_DATABASE", "hr")]
    div = divergence(rows, CUT)
    assert [(o.name, o.event_ids, o.event_types, o.published) for o in div.objects] == [
        ("hr", (16,), ("ALTER_DATABASE",), False),
        ("hr.people", (13,), ("CREATE_TABLE",), False),
        ("sales.orders", (11, 12), ("INSERT", "ADD_PARTITION"), True),
    ]
    assert div.other_events == (14, 15) and div.events == 4 and div.old_source_head == 16
    text = describe(div)
    assert "sales.orders: events 11-12 (INSERT, ADD_PARTITION; published, not applied)" in text
    assert "hr.people: events 13 (CREATE_TABLE; never published)" in text


def test_nothing_after_the_cut_is_no_divergence() -> None:
    div = divergence([row(3, "INSERT", "sales", "t"), row(10, "INSERT", "sales", "t")], CUT)
    assert not div.objects and "no changes" in describe(div)


@given(st.lists(st.tuples(st.integers(1, 30), st.sampled_from(["sales", "hr", "x", None]),
                          st.sampled_from(["t", "u", None])), unique_by=lambda r: r[0]))
def test_every_event_after_the_cut_is_reported_once(spec: list[tuple[int, str | None, str | None]]) -> None:
    rows = [row(i, "INSERT", db, t) for i, db, t in spec]
    div = divergence(rows, CUT)
    listed = [i for o in div.objects for i in o.event_ids] + list(div.other_events)
    assert sorted(listed) == sorted(i for i, _, _ in spec if i > CUT.event_id)


class _Client:
    """The two Thrift calls ``drop_old_databases`` makes."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.dropped: list[tuple[str, bool, bool]] = []

    def get_all_databases(self) -> list[str]:
        return list(self.names)

    def drop_database(self, name: str, delete_data: bool, cascade: bool) -> None:
        self.dropped.append((name, delete_data, cascade))


def test_rebase_drops_the_failed_over_databases_that_exist() -> None:
    from streamer.target.dr.failback import drop_old_databases

    client = _Client(["default", "sales", "finance"])
    assert drop_old_databases(client, ["Sales", "gone", "finance"]) == ["finance", "sales"]
    assert client.dropped == [("finance", True, True), ("sales", True, True)]


def test_rebase_needs_the_old_source_metastore(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from streamer.cli import cli

    result = CliRunner().invoke(cli, ["failback", "--state-dir", str(tmp_path), "--notification-db",
                                       "sqlite:///x.db", "--rebase"])
    assert result.exit_code != 0 and "--source-hms-uri" in str(result.exception or result.output)


def test_rebase_is_never_done_twice(tmp_path: Path) -> None:
    """After a rebase the old source may hold the new primary's replicas: --rebase changes nothing
    (it does not even connect to the old source)."""
    import json

    from click.testing import CliRunner

    from streamer.cli import cli
    from streamer.target.dr.failback import Divergence, record_failback
    from streamer.target.dr.failover import FailoverRecord, write_record

    write_record(tmp_path, FailoverRecord("done", "t0", "t1", CUT, ("sales",)))
    record_failback(tmp_path, Divergence(10, 12, ()), discarded=False, dropped=["sales"])
    result = CliRunner().invoke(cli, ["failback", "--state-dir", str(tmp_path), "--source-hms-uri",
                                      "thrift://127.0.0.1:1", "--rebase"])
    assert result.exit_code == 0, result.output
    assert "already rebased" in result.output and "dropped: sales" in result.output
    assert json.loads((tmp_path / "failback.json").read_text())["dropped"] == ["sales"]
