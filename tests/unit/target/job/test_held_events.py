"""A retried database re-reads its held events from the topic: an unfixed cause halts it again at the
same event, and no event id of it is passed without being applied or explicitly skipped."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from streamer.events.codec import encode_event
from streamer.events.model import Event, EventType, ProgressPayload
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.tables import target_table
from streamer.target.job.settings import (
    KafkaSettings,
    LayoutSettings,
    MetastoreSettings,
    TargetSettings,
    TrustSettings,
)
from streamer.target.job.streaming import BatchApplier
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b


class Topic:
    """An append-only log of encoded records, read by offset range as the job's replay reads Kafka."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes]] = []
        self.replayed: list[tuple[int, int]] = []

    def append(self, *events: Event) -> list[tuple[int, bytes]]:
        new = [(len(self.records) + i, encode_event(e)) for i, e in enumerate(events)]
        self.records.extend(new)
        return new

    def replay(self, start: int, end: int) -> Iterable[tuple[int, bytes]]:
        self.replayed.append((start, end))
        return [r for r in self.records if start <= r[0] < end]


def _job(
    tmp_path: Path, catalog: MemoryCatalog, topic: Topic, monkeypatch: pytest.MonkeyPatch,
    trust: TrustSettings | None = None,
) -> BatchApplier:
    """The job as every caller builds it (the demo passes no replay): it reads its own topic."""
    monkeypatch.setattr("streamer.target.job.streaming.kafka_replay", lambda settings: topic.replay)
    settings = TargetSettings(
        source_id=b.SOURCE_ID,
        kafka=KafkaSettings(bootstrap_servers="unused:9092", topic="t"),
        metastore=MetastoreSettings(uri="thrift://unused"),
        layout=LayoutSettings(warehouse_root=str(tmp_path / "wh"), state_dir=str(tmp_path / "state"),
                              checkpoint_dir=str(tmp_path / "ckpt"), watermark_db=""),
        trust=trust or TrustSettings(),
    )
    return BatchApplier(settings, catalog)


def test_retry_without_a_fix_halts_again_and_passes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, topic = MemoryCatalog(), Topic()
    job = _job(tmp_path, catalog, topic, monkeypatch)
    t = b.table("a", "t")
    # event 2 alters a table the target does not have: the database halts there
    job.process(topic.append(b.create_db(1, "a"), b.alter_table(2, t, b.replace(t, parameters={"k": "v"}))))
    job.process(topic.append(b.create_table(3, b.table("a", "u"))))  # held behind the halt
    assert job.state.halts()["a"].event_id == 2

    assert TargetState(tmp_path / "state").retry("a") is not None  # the operator, in another process
    job.process(topic.append(b.create_db(4, "other")))
    assert topic.replayed, "the released database's held events were not re-read"
    assert job.state.halts()["a"].event_id == 2  # the cause remains: halted again, at the same event
    assert job.applier.progress["a"] == 1
    assert catalog.get_table("a", "u") is None  # nothing after the halted event was passed

    catalog.create_table(target_table(job.applier, t, None)[0])  # the fix: the table as replication makes it
    TargetState(tmp_path / "state").retry("a")
    job.process(topic.append(b.create_db(5, "more")))
    assert "a" not in job.state.halts()
    assert job.applier.progress["a"] == 3
    assert catalog.get_table("a", "u") is not None



def test_a_retry_during_a_batch_that_halts_another_database_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27.5: the operator retries a while the job's batch halts b; neither change is lost."""
    catalog, topic = MemoryCatalog(), Topic()
    job = _job(tmp_path, catalog, topic, monkeypatch)
    ta, tb = b.table("a", "t"), b.table("b", "t")
    job.process(topic.append(b.create_db(1, "a"), b.alter_table(2, ta, b.replace(ta, parameters={"k": "v"})),
                             b.create_db(3, "b")))
    assert set(job.state.halts()) == {"a"}

    run = job.runner.run

    def retry_meanwhile(*args: object, **kwargs: object) -> object:
        TargetState(tmp_path / "state").retry("a")  # `streamer target retry --db a`, mid-batch
        return run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(job.runner, "run", retry_meanwhile)
    job.process(topic.append(b.alter_table(4, tb, b.replace(tb, parameters={"k": "v"}))))  # b halts
    after = TargetState(tmp_path / "state")
    assert set(after.halts()) == {"b"}, "the operator's retry of a was undone"
    assert "a" in after.pending_replays()  # a's held events are re-read on the next batch


def test_a_retry_re_reads_the_halted_event_not_the_progress_record_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent follows an event with a PROGRESS record of the same id: the halt's offset must be the
    event's, or a retry re-reads from after it and passes it unapplied."""
    catalog, topic = MemoryCatalog(), Topic()
    job = _job(tmp_path, catalog, topic, monkeypatch)
    t = b.table("a", "t")
    altered = b.alter_table(2, t, b.replace(t, parameters={"k": "v"}))
    progress = b.event(2, EventType.PROGRESS, ProgressPayload(2, 2))
    job.process(topic.append(b.create_db(1, "a"), altered, progress))
    halt = job.state.halts()["a"]
    assert halt.event_id == 2 and halt.offset == 1  # the ALTER's offset, not the PROGRESS record's (2)
    catalog.create_table(target_table(job.applier, t, None)[0])  # the fix, then the operator's retry
    TargetState(tmp_path / "state").retry("a")
    job.process(topic.append(b.create_db(3, "other")))
    table = catalog.get_table("a", "t")
    assert "a" not in job.state.halts() and table is not None and table.parameters.get("k") == "v"
