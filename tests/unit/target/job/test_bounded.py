"""Bounded replication: the split at N (pure) and a straddling micro-batch on the BatchApplier."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.events.codec import encode_event
from streamer.events.model import Event, EventType, ProgressPayload, Source
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target.job.bounded import UntilReached, consumed_through, reached, split_at
from streamer.target.job.settings import (
    KafkaSettings,
    LayoutSettings,
    MetastoreSettings,
    TargetSettings,
)
from streamer.target.job.streaming import BatchApplier
from streamer.target.state.status import read_progress
from tests.unit.target import builders as b


def progress(last: int, head: int) -> Event:
    return Event(Source(b.SOURCE_ID, last, 1_700_000_000 + last), EventType.PROGRESS,
                 ProgressPayload(last, head))


def workload() -> list[Event]:
    """Ids 1..12 over two databases, a progress record after every three events."""
    t_a, t_b = b.table("a", "t"), b.table("bb", "u")
    events = [b.create_db(1, "a"), b.create_db(2, "bb"), b.create_table(3, t_a), b.create_table(4, t_b)]
    for i in range(5, 13):
        snap = t_a if i % 2 else t_b
        events.append(b.alter_table(i, snap, b.replace(snap, parameters={"v": str(i)})))
    out: list[Event] = []
    for e in events:
        out.append(e)
        if e.event_id % 3 == 0:
            out.append(progress(e.event_id, 12))
    return out


@given(st.lists(st.integers(1, 40), unique=True), st.integers(0, 45))
def test_split_keeps_order_and_loses_nothing(ids: list[int], until: int) -> None:
    events = [b.create_db(i, f"d{i}") for i in ids]
    got = split_at(events, until)
    assert [e.event_id for e in got.within] == [i for i in ids if i <= until]
    assert [e.event_id for e in got.beyond] == [i for i in ids if i > until]
    assert got.straddles == any(i > until for i in ids)
    assert consumed_through(got, max(ids, default=0), until) <= until or not got.straddles


def test_progress_records_past_the_bound_are_not_a_straddle() -> None:
    got = split_at([b.create_db(4, "a"), progress(9, 9)], 5)
    assert not got.straddles and len(got.within) == 2
    assert consumed_through(got, 9, 5) == 9  # 5..9 were filtered at the source: nothing is held
    assert reached(9, 5) and not reached(4, 5) and not reached(100, None)


def settings(tmp_path: Path, until: int | None) -> TargetSettings:
    return TargetSettings(
        source_id=b.SOURCE_ID,
        kafka=KafkaSettings(bootstrap_servers="unused:9092", topic="t", until_event=until),
        metastore=MetastoreSettings(uri="thrift://unused:1"),
        layout=LayoutSettings(
            warehouse_root=f"file://{tmp_path}/wh", state_dir=str(tmp_path / "state"),
            checkpoint_dir=str(tmp_path / "ckpt"),
        ),
    )


def records(events: list[Event]) -> list[tuple[int, bytes]]:
    return [(offset, encode_event(e)) for offset, e in enumerate(events)]


def last_ids(catalog: MemoryCatalog) -> dict[str, int]:
    out = {}
    for name in catalog.list_databases():
        snap = catalog.get_database(name)
        assert snap is not None
        if LAST_ID_PARAM in snap.parameters:  # not the watermark's own database
            out[name] = int(snap.parameters[LAST_ID_PARAM])
    return out


def test_a_straddling_batch_applies_its_prefix_and_a_later_run_continues_at_n_plus_1(tmp_path: Path) -> None:
    """One batch holds 1..12; the bound is 7. The prefix is applied, the batch raises (Spark then
    does not commit it), and the same batch replayed by an unbounded job applies exactly 8..12."""
    catalog = MemoryCatalog()
    batch = records(workload())
    bounded = BatchApplier(settings(tmp_path, 7), catalog)
    with pytest.raises(UntilReached) as stop:
        bounded.process(batch)
    assert stop.value.first_held == 8 and bounded.reached_until
    assert last_ids(catalog) == {"a": 7, "bb": 6}  # 7 is a's, 6 bb's newest event <= 7
    assert read_progress(tmp_path / "state")[1] == 7  # never counted past what was applied

    # restarted with the same bound: the re-run batch changes nothing and stops again
    again = BatchApplier(settings(tmp_path, 7), catalog)
    assert again.reached_until  # consumed 7 already: the job stops before reading anything
    with pytest.raises(UntilReached):
        again.process(batch)
    assert last_ids(catalog) == {"a": 7, "bb": 6}

    # without a bound the uncommitted batch is replayed: 1..7 skipped, 8..12 applied
    applied: list[int] = []
    free = BatchApplier(settings(tmp_path, None), catalog, on_applied=lambda e, _: applied.append(e.event_id))
    free.process(batch)
    assert applied == [8, 9, 10, 11, 12]
    assert last_ids(catalog) == {"a": 11, "bb": 12}
    assert not free.reached_until


def test_a_batch_ending_at_the_bound_commits_and_reaches_it(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    events = workload()
    upto_9 = [e for e in events if e.event_id <= 9]  # ends with progress(9)
    applier = BatchApplier(settings(tmp_path, 9), catalog)
    applier.process(records(upto_9))  # no raise: nothing past the bound in the batch
    assert applier.reached_until and applier.stopped_at_until is None
    assert max(last_ids(catalog).values()) == 9
