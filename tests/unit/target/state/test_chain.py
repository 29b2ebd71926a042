"""The event chain: each record names the event id before it; a break is data loss, never skipped."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer import metrics
from streamer.errors import DataLossError, EventChainError
from streamer.events.codec import encode_event
from streamer.events.model import Event, EventType, ProgressPayload, Source
from streamer.metastore.catalog import Catalog
from streamer.metastore.memory import MemoryCatalog
from streamer.target.job.settings import (
    KafkaSettings,
    LayoutSettings,
    MetastoreSettings,
    TargetSettings,
)
from streamer.target.job.streaming import BatchApplier
from streamer.target.state.chain import Anchor, check_chain, read_anchor, reset_anchor, write_anchor
from tests.unit.target import builders as b

TOPIC = "streamer.src1.events"


def progress(event_id: int, prev: int | None) -> Event:
    return Event(Source(b.SOURCE_ID, event_id, 0), EventType.PROGRESS, ProgressPayload(event_id, event_id),
                 prev_event_id=prev)


def chained(events: list[Event], start_prev: int = 0, first_offset: int = 0) -> list[tuple[int, Event]]:
    """``events`` as a topic holds them: offsets with gaps (transaction markers), each naming its
    predecessor's event id."""
    out, prev, offset = [], start_prev, first_offset
    for event in events:
        out.append((offset, dataclasses.replace(event, prev_event_id=prev)))
        prev = event.event_id
        offset += 2
    return out


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=30), st.integers(1, 29))
def test_any_stream_passes_whole_or_split_into_batches_at_any_point(ids: list[int], cut: int) -> None:
    # ids need not be dense or even increasing (filtered events, bootstrap records share one id)
    records = chained([progress(i, None) for i in ids])
    whole = check_chain(TOPIC, records, None)
    assert whole.error is None and whole.intact == len(records)
    first = check_chain(TOPIC, records[:cut], None)
    second = check_chain(TOPIC, records[cut:], first.anchor)
    assert second.error is None and second.anchor == whole.anchor


@given(st.lists(st.integers(1, 1000), min_size=3, max_size=30), st.data())
def test_a_missing_record_is_found_at_the_first_record_after_it(ids: list[int], data: st.DataObject) -> None:
    records = chained([progress(i, None) for i in ids])
    lost = data.draw(st.integers(1, len(records) - 2))
    if records[lost - 1][1].event_id == records[lost][1].event_id:
        return  # losing one of two records with the same id loses nothing the chain can tell
    check = check_chain(TOPIC, records[:lost] + records[lost + 1 :], None)
    assert check.intact == lost and isinstance(check.error, EventChainError)
    assert check.error.expected_prev == records[lost - 1][1].event_id
    assert check.error.found_prev == records[lost][1].event_id
    assert check.anchor == Anchor(TOPIC, records[lost - 1][0], records[lost - 1][1].event_id)


def test_redelivered_records_pass_and_the_anchor_record_must_be_the_same() -> None:
    records = chained([progress(i, None) for i in (3, 5, 9, 12)])
    anchor = check_chain(TOPIC, records[:3], None).anchor
    assert anchor == Anchor(TOPIC, 4, 9)
    assert check_chain(TOPIC, records, anchor).error is None  # a batch delivered again, and more
    other = [(4, progress(10, 5))]  # another record at the anchor's offset: a recreated topic
    error = check_chain(TOPIC, other, anchor).error
    assert error is not None and "is event 10 STREAMER_PROGRESS, not event 9" in str(error)


def test_a_recreated_topic_refilled_past_the_offset_breaks_the_chain() -> None:
    before = chained([progress(i, None) for i in (1, 2, 3)])
    anchor = check_chain(TOPIC, before, None).anchor
    assert anchor is not None
    # the new topic continues after event 3 from offset 0; the target resumes at offset 6
    refill = chained([progress(i, None) for i in (4, 5, 6, 7)], start_prev=3)
    check = check_chain(TOPIC, [r for r in refill if r[0] > anchor.offset], anchor)
    assert check.intact == 0 and isinstance(check.error, DataLossError)
    message = str(check.error)
    assert "offset 6 (event 7 STREAMER_PROGRESS) follows event 6" in message
    assert "last record consumed (offset 4) was event 3" in message


def test_records_without_a_predecessor_and_another_topic_start_a_chain() -> None:
    anchor = Anchor(TOPIC, 10, 7)
    assert check_chain(TOPIC, [(12, progress(40, None))], anchor).error is None  # written by an older agent
    assert check_chain("other", [(12, progress(40, 1))], anchor).error is None


def test_anchor_file_round_trip_and_reset(tmp_path: Path) -> None:
    assert read_anchor(tmp_path) is None
    write_anchor(tmp_path, Anchor(TOPIC, 5, 9))
    assert read_anchor(tmp_path) == Anchor(TOPIC, 5, 9)
    assert reset_anchor(tmp_path) == Anchor(TOPIC, 5, 9)
    assert read_anchor(tmp_path) is None


def _no_topic(offset: int) -> bytes | None:
    raise AssertionError(f"the topic was read at offset {offset}")


def _batch_applier(
    tmp_path: Path, catalog: MemoryCatalog, record_at: Callable[[int], bytes | None] = _no_topic,
    catalogs: Callable[[], Catalog] | None = None,
) -> BatchApplier:
    settings = TargetSettings(
        source_id=b.SOURCE_ID,
        kafka=KafkaSettings(bootstrap_servers="unused:9092", topic=TOPIC),
        metastore=MetastoreSettings(uri="thrift://unused"),
        layout=LayoutSettings(
            warehouse_root=str(tmp_path / "wh"), state_dir=str(tmp_path / "state"),
            checkpoint_dir=str(tmp_path / "ckpt"),
        ),
    )
    return BatchApplier(settings, catalog, record_at=record_at, catalogs=catalogs)


def test_the_job_applies_up_to_the_break_then_stops_for_good(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    metrics.TARGET_DATA_LOSS.set(0)
    first = chained([b.create_db(1, "a"), progress(1, None), b.create_db(2, "b"), progress(2, None)])
    job = _batch_applier(tmp_path, catalog)
    job.process([(o, encode_event(e)) for o, e in first])
    assert {d.lower() for d in catalog.list_databases()} >= {"a", "b"}
    # a restarted job (new instance) reads the anchor back; the next batch lost event 3's records
    job = _batch_applier(tmp_path, catalog)
    later = chained([b.create_db(3, "c"), progress(3, None), b.create_db(4, "d"), progress(4, None)],
                    start_prev=2, first_offset=first[-1][0] + 2)
    # c arrives, then the chain jumps: the records between event 3 and "d" (naming 99) are gone
    d_record = (later[2][0] + 100, dataclasses.replace(later[2][1], prev_event_id=99))
    batch = [later[0], d_record, (later[3][0] + 100, later[3][1])]
    with pytest.raises(EventChainError) as broken:
        job.process([(o, encode_event(e)) for o, e in batch])
    assert broken.value.expected_prev == 3 and broken.value.found_prev == 99
    names = {d.lower() for d in catalog.list_databases()}
    assert "c" in names and "d" not in names  # before the break applied, nothing after it
    assert metrics.REGISTRY.get_sample_value("streamer_target_data_loss") == 1
    assert read_anchor(tmp_path / "state") == Anchor(TOPIC, later[0][0], 3)
    with pytest.raises(EventChainError):  # every later batch too: the job stops
        job.process([(o + 200, encode_event(e)) for o, e in chained([progress(5, None)], start_prev=4)])


def _encoded(records: list[tuple[int, Event]]) -> list[tuple[int, bytes]]:
    return [(o, encode_event(e)) for o, e in records]


def test_records_before_the_anchor_pass_again_once_its_record_is_seen(tmp_path: Path) -> None:
    """Spark's checkpoint trails what was applied (--batch-follow): the same topic's records come again
    and change nothing; a refilled topic's records at those offsets are another stream's: none applied."""
    catalog = MemoryCatalog()
    metrics.TARGET_DATA_LOSS.set(0)
    first = chained([b.create_db(1, "a"), b.create_db(2, "b"), b.create_db(3, "c")])
    _batch_applier(tmp_path, catalog).process(_encoded(first))
    anchor = read_anchor(tmp_path / "state")
    assert anchor == Anchor(TOPIC, first[-1][0], 3)

    # the same topic from the checkpoint on, with the anchor's own record in the batch: no read
    again = _batch_applier(tmp_path, catalog)
    more = chained([b.create_db(4, "d")], start_prev=3, first_offset=anchor.offset + 2)
    again.process(_encoded(first[1:] + more))
    assert "d" in {d.lower() for d in catalog.list_databases()}

    # a batch that stops before the anchor's offset: its record is read from the topic, once
    reads: list[int] = []
    by_offset = dict(_encoded(first + more))

    def record_at(offset: int) -> bytes | None:
        reads.append(offset)
        return by_offset.get(offset)

    third = _batch_applier(tmp_path, catalog, record_at)
    anchor = read_anchor(tmp_path / "state")
    assert anchor is not None
    third.process(_encoded(first[:2]))
    third.process(_encoded(first[1:2]))
    assert reads == [anchor.offset]
    assert metrics.REGISTRY.get_sample_value("streamer_target_data_loss") == 0


@pytest.mark.parametrize("at_anchor", ["another event", "no record"])
def test_a_refilled_topic_read_from_before_the_anchor_applies_nothing(tmp_path: Path, at_anchor: str) -> None:
    catalog = MemoryCatalog()
    metrics.TARGET_DATA_LOSS.set(0)
    first = chained([b.create_db(1, "a"), b.create_db(2, "b"), b.create_db(3, "c")])
    _batch_applier(tmp_path, catalog).process(_encoded(first))
    anchor = read_anchor(tmp_path / "state")
    assert anchor is not None
    # recreated and refilled after event 3 (a gap is possible: 7 follows 3 here), read from offset 0
    refill = chained([b.create_db(7, "x"), b.create_db(8, "y"), b.create_db(9, "z")], start_prev=3)
    batch = [r for r in refill if r[0] < anchor.offset]
    if at_anchor == "another event":
        batch = refill  # the refill holds event 9 where event 3 was consumed
    job = _batch_applier(tmp_path, catalog, lambda offset: None)
    with pytest.raises(EventChainError) as broken:
        job.process(_encoded(batch))
    assert not {"x", "y", "z"} & {d.lower() for d in catalog.list_databases()}
    error = broken.value
    assert (error.offset, error.last_offset, error.expected_prev) == (anchor.offset, anchor.offset, 3)
    expected = "holds no record" if at_anchor == "no record" else "is event 9 CREATE_DATABASE, not event 3"
    assert expected in str(error)
    assert metrics.REGISTRY.get_sample_value("streamer_target_data_loss") == 1
    assert read_anchor(tmp_path / "state") == anchor
