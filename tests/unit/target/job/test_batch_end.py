"""A batch's end (progress file, watermark, anchor) written while the next batch applies: in order,
the newest one only, settled before anything relies on it, and failures raised on the job's thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamer.events.codec import encode_event
from streamer.events.model import DatabaseSnapshot, Event
from streamer.metastore.memory import MemoryCatalog
from streamer.target.job.batch_end import BatchEndWriter
from streamer.target.job.batch_source import BatchSource
from streamer.target.job.streaming import BatchApplier, micro_batch
from streamer.target.job.watermark import default_watermark_db, from_parameters
from streamer.target.state.chain import read_anchor
from streamer.target.state.status import read_progress
from tests.unit.target import builders as b
from tests.unit.target.state.test_chain import TOPIC, _batch_applier, chained, progress


def test_ends_run_in_order_and_a_waiting_end_is_replaced_by_a_newer_one() -> None:
    writer, ran = BatchEndWriter(), []
    started, gate = threading.Event(), threading.Event()

    def first() -> None:
        started.set()
        gate.wait(5)
        ran.append(1)

    writer.submit(first)
    assert started.wait(5)
    for n in (2, 3, 4):  # while 1 is being written: only the newest waits
        writer.submit(lambda n=n: ran.append(n))  # type: ignore[misc]
    assert ran == []
    gate.set()
    writer.settle()
    assert ran == [1, 4]
    writer.close()


def test_a_failed_end_is_raised_on_the_callers_thread_once() -> None:
    writer, taken = BatchEndWriter(), threading.Event()

    def fail() -> None:
        taken.set()
        raise OSError("disk full")

    writer.submit(fail)
    with pytest.raises(OSError, match="disk full"):
        writer.settle()
    writer.settle()  # raised once: the writer goes on
    taken.clear()
    writer.submit(fail)
    assert taken.wait(5)  # being written: no later submit replaces it
    with pytest.raises(OSError, match="disk full"):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the next submit raises it once it has failed
            writer.submit(lambda: None)
    writer.close()


def test_close_writes_the_end_that_waits() -> None:
    writer, ran = BatchEndWriter(), []
    writer.submit(lambda: ran.append(1))
    writer.close()
    assert ran == [1]
    with pytest.raises(RuntimeError, match="closed"):
        writer.submit(lambda: None)


class _Gated(MemoryCatalog):
    """The watermark's own connection to ``shared``: its writes wait for ``gate``."""

    def __init__(self, shared: MemoryCatalog) -> None:
        super().__init__()
        self.databases = shared.databases
        self.gate = threading.Event()
        self.closed = False

    def create_database(self, db: DatabaseSnapshot) -> None:
        assert self.gate.wait(5)
        super().create_database(db)

    def alter_database(self, name: str, db: DatabaseSnapshot, *, exists: bool = False) -> None:
        assert self.gate.wait(5)
        super().alter_database(name, db, exists=exists)

    def close(self) -> None:
        self.closed = True


def _gated_job(tmp_path: Path) -> tuple[MemoryCatalog, _Gated, BatchApplier]:
    """A job on a memory catalog whose watermark connection (open at first) can be stalled."""
    catalog = MemoryCatalog()
    watermark = _Gated(catalog)
    watermark.gate.set()
    return catalog, watermark, _batch_applier(tmp_path, catalog, lambda _: None, catalogs=lambda: watermark)


def _encoded(records: list[tuple[int, Event]]) -> list[tuple[int, bytes]]:
    return [(o, encode_event(e)) for o, e in records]


def _published(catalog: MemoryCatalog) -> int | None:
    """The event id of the watermark record on ``catalog`` (None: none written yet)."""
    db = catalog.databases.get(default_watermark_db(b.SOURCE_ID))
    mark = from_parameters(db.parameters) if db is not None else None
    return mark.event_id if mark is not None else None


def test_a_follows_apply_returns_before_its_end_is_written_and_settle_writes_it(tmp_path: Path) -> None:
    catalog, watermark, job = _gated_job(tmp_path)
    records = chained([b.create_db(1, "a"), progress(1, None), b.create_db(2, "b"), progress(2, None),
                       b.create_db(3, "c"), progress(3, None)])
    state = tmp_path / "state"
    job.process(_encoded(records[:2]))
    watermark.gate.clear()  # the watermark's metastore connection stalls from here on

    job.process(_encoded(records[2:4]), settle=False)
    assert "b" in {d.lower() for d in catalog.list_databases()}  # applied, its end not written
    job.process(_encoded(records[4:]), settle=False)  # the next one goes on
    assert "c" in {d.lower() for d in catalog.list_databases()}
    assert _published(catalog) == 1
    anchor = read_anchor(state)
    assert anchor is not None and anchor.offset == records[1][0]
    watermark.gate.set()
    job.settle()
    assert _published(catalog) == 3
    anchor = read_anchor(state)
    assert anchor is not None and anchor.offset == records[-1][0]
    assert read_progress(state)[1] == 3
    job.close()
    assert watermark.closed


_TWO = [b.create_db(1, "a"), progress(1, None), b.create_db(2, "b"), progress(2, None)]


def test_processing_settles_by_default_and_close_writes_a_waiting_end(tmp_path: Path) -> None:
    catalog, watermark, job = _gated_job(tmp_path)
    records = chained(_TWO)
    job.process(_encoded(records[:2]))  # settle=True: written on return
    assert _published(catalog) == 1
    watermark.gate.clear()
    job.process(_encoded(records[2:]), settle=False)
    threading.Timer(0.2, watermark.gate.set).start()
    job.close()  # waits for the end, then closes the connection
    assert _published(catalog) == 2 and watermark.closed


class _Records(BatchSource):
    """A micro-batch's records and those a follow reads on, without Kafka or Spark."""

    def __init__(self, own: list[tuple[int, bytes]], after: list[tuple[int, bytes]]) -> None:
        super().__init__("unused", {"topic": TOPIC, "bootstrap.servers": "unused:9092"}, "spark")
        self.own, self.after = own, after

    def records(self, df: Any, batch_id: int) -> list[tuple[int, bytes]]:
        return self.own

    def follow(self, batch_id: int, apply: Callable[[list[tuple[int, bytes]]], None],
               done: Callable[[], bool]) -> None:
        apply(self.after)


def test_a_micro_batch_returns_to_spark_only_once_every_end_of_it_is_written(tmp_path: Path) -> None:
    catalog, watermark, job = _gated_job(tmp_path)
    records = chained(_TWO)
    encoded = _encoded(records)
    source = _Records(encoded[:2], encoded[2:])
    job.process([], settle=True)  # the start's publish done with the gate open
    watermark.gate.clear()
    threading.Timer(0.3, watermark.gate.set).start()  # the watermark's connection stalls for a while

    micro_batch(source, job, lambda read: job.process(read, settle=False))(None, 0)
    assert _published(catalog) == 2  # both applies' ends written before the return
    anchor = read_anchor(tmp_path / "state")
    assert anchor is not None and anchor.offset == records[-1][0]
    job.close()
