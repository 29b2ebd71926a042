"""``streamer.read.snapshot`` against a live target: readers through the API see only source prefixes
while a writer moves two databases together; plain reads (one table at a time) show why it is
needed; ``min_event_id`` gives read-your-writes; the watermark is published on the target metastore.

The writer's pattern spans databases: each round records an order in ``shop.orders`` (partitioned)
and its payment in ``books.ledger``, and every tenth round overwrites ``shop.items``. A reader that
shows an order without its payment (or the reverse) shows a state the source never had. The
checker (:mod:`streamer.testing.checker`) judges the exact files each snapshot read.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fsspec.core import url_to_fs

from streamer.events.model import Column
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.thrift import HmsCatalog
from streamer.read import PinnedTable, Snapshot, SnapshotTimeout, TableNotFound, resolve, snapshot
from streamer.replay.state import TableState, observe
from streamer.target.job.watermark import default_watermark_db, from_parameters
from streamer.testing import intervals
from streamer.testing.checker import CUT, EVERYTHING, Sample, check
from streamer.testing.history import History
from streamer.warehouse import Warehouse
from tests.integration.target.helpers import Source, TargetStack, wait_converged
from tests.integration.target.in_process import TargetInProcess, TargetJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROUNDS = 80
COLS = [Column("id", "int"), Column("amount", "bigint")]


def _state(pinned: PinnedTable) -> TableState | None:
    """The checker's state of what a read pinned, hashing each file; None when a file is no longer
    the one pinned (replaced after the read: that sample cannot be judged from the files)."""
    if pinned.table is None:
        return None
    files: dict[str, list[tuple[str, str]]] = {}
    for part, pinned_files in pinned.partitions.items():
        files[part] = []
        for f in pinned_files:
            fs, path = url_to_fs(f.url)
            try:
                with fs.open(path, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
                same = fs.info(path)
            except FileNotFoundError:
                raise _Unjudgeable(f.url) from None
            if (same.get("size"), str(same.get("mtime")), same.get("ino")) != f.identity:
                raise _Unjudgeable(f.url)
            files[part].append((f.relative, digest))
    return observe(pinned.table, files, pinned.write_ids)


class _Unjudgeable(Exception):
    pass


class _Readers:
    """An API reader and a plain reader sampling the target from threads until stopped."""

    def __init__(self, spark: SparkSession, hms_uri: str, tables: list[str]) -> None:
        self.spark, self.hms_uri, self.tables = spark, hms_uri, tables
        self.api: list[Sample] = []
        self.plain: list[Sample] = []
        self.unjudged = 0
        self.attempts: list[int] = []
        self.claimed: list[int] = []  # each API sample's event_id
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._api, daemon=True),
                         threading.Thread(target=self._plain, daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)

    def _api(self) -> None:
        while not self._stop.is_set():
            wall = time.time()
            try:
                snap = snapshot(self.spark, self.hms_uri, self.tables, timeout=60)
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return
            try:
                tables = {name: _state(p) for name, p in snap.tables.items()}
            except _Unjudgeable:
                self.unjudged += 1
                continue
            finally:
                snap.release()
            self.attempts.append(snap.attempts)
            self.api.append(Sample("api", wall, dict(snap.last_ids), tables))
            self.claimed.append(snap.event_id)

    def _plain(self) -> None:
        """Each table read as a plain reader reads it: its files now, then the next table's."""
        with HmsCatalog(self.hms_uri) as catalog:
            while not self._stop.is_set():
                wall = time.time()
                try:
                    tables = {}
                    for name in self.tables:
                        tables[name] = _state(resolve(catalog, name))
                        self._stop.wait(0.05)
                except _Unjudgeable:
                    continue
                except Exception as exc:  # a table replaced between two calls: plain readers fail too
                    self.errors.append(f"plain: {type(exc).__name__}: {exc}")
                    self._stop.wait(0.2)
                    continue
                self.plain.append(Sample("plain", wall, {}, tables))
                self._stop.wait(0.2)


def _round(wh: Warehouse, shop: str, books: str, r: int) -> None:
    """One order and its payment, in two databases; every tenth round the item list is replaced."""
    wh.insert(shop, "orders", [{"id": r, "amount": 10 * r}], {"dt": f"d{r % 4}"})
    wh.insert(books, "ledger", [{"id": r, "amount": -10 * r}])
    if r % 10 == 9:
        wh.insert(shop, "items", [{"id": i, "amount": r} for i in range(3)], overwrite=True)


def _sample(wall: float, snap: Snapshot) -> Sample:
    return Sample("api-main", wall, dict(snap.last_ids), {n: _state(p) for n, p in snap.tables.items()})


def _overclaimed(history: History, samples: list[Sample], claimed: list[int]) -> list[str]:
    """Samples whose tables fit no source state at or after the event id the API said they reflect."""
    out = []
    for sample, event_id in zip(samples, claimed, strict=True):
        cut: intervals.IdSet = EVERYTHING
        for key, state in sample.tables.items():
            cut = intervals.intersect(cut, history.compatible(key, state))
        if intervals.first_at_or_after(cut, event_id) is None:
            out.append(f"claimed {event_id}, tables fit {intervals.render(cut)}")
    return out


def _rows(snap: Snapshot, name: str) -> list[tuple[object, ...]]:
    return sorted(tuple(sorted(r.asDict().items())) for r in snap[name].collect())


def test_snapshot_reads_only_source_prefixes_where_plain_reads_mix_states(
    broker: EmbeddedBroker,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark: SparkSession,
    prefix: str,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    wh = source.warehouse
    shop, books = f"{prefix}shop", f"{prefix}books"
    for db in (shop, books):
        wh.create_database(db)
    wh.create_table(shop, "orders", COLS, [Column("dt", "string")])
    wh.create_table(shop, "items", COLS)
    wh.create_table(books, "ledger", COLS)
    tables = [f"{shop}.orders", f"{shop}.items", f"{books}.ledger"]
    source.start_background()
    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    hms_uri = target_stack.hms.uri

    created = wh.current_event_id()  # the tables exist from here on: wait for the job to get there
    snapshot(spark, hms_uri, tables, min_event_id=created, timeout=180).release()

    # 1. concurrent writer, readers through the API and plain readers
    readers = _Readers(spark, hms_uri, tables)
    readers.start()
    for r in range(ROUNDS):
        _round(wh, shop, books, r)
        time.sleep(0.3)  # below the target's pace: it applies between readers' reads, and idles too
    last_written = wh.current_event_id()
    wait_converged(job, source)
    readers.stop()
    assert not [e for e in readers.errors if not e.startswith("plain")], readers.errors

    # 2. a plain reader made deterministic: table A, then a source change of A and B applied, then B
    with HmsCatalog(hms_uri) as catalog:
        wall = time.time()
        orders_before = _state(resolve(catalog, f"{shop}.orders"))
        _round(wh, shop, books, ROUNDS)
        wait_converged(job, source)
        ledger_after = _state(resolve(catalog, f"{books}.ledger"))
    mixed = Sample("plain-stepped", wall, {}, {f"{shop}.orders": orders_before,
                                               f"{books}.ledger": ledger_after})

    # 3. read-your-writes: the snapshot waits for the event the source just wrote
    _round(wh, shop, books, ROUNDS + 1)
    written = wh.current_event_id()
    wall = time.time()
    mine = snapshot(spark, hms_uri, tables, min_event_id=written, timeout=120)
    extra, extra_claimed = [_sample(wall, mine)], [mine.event_id]
    assert mine.event_id >= written
    orders = [(r["id"], r["amount"]) for r in mine[f"{shop}.orders"].collect()]
    assert (ROUNDS + 1, 10 * (ROUNDS + 1)) in orders
    pattern = rf"waiting for event {written + 10_000}: the tables reflect event \d+ \({books} repl.last.id"
    with pytest.raises(SnapshotTimeout, match=pattern):
        snapshot(spark, hms_uri, tables, min_event_id=written + 10_000, timeout=1.5)

    # 4. the final snapshot holds exactly the source's rows; the watermark record and metric
    wait_converged(job, source)
    wall = time.time()
    final = snapshot(spark, hms_uri, tables, timeout=60)
    extra.append(_sample(wall, final))
    extra_claimed.append(final.event_id)
    for name in tables:
        db, table = name.split(".")
        expected = sorted(tuple(sorted(row.items())) for row in wh.rows(db, table))
        assert _rows(final, name) == expected, name
    with pytest.raises(TableNotFound, match=rf"{shop}.nope does not exist at source event \d+"):
        snapshot(spark, hms_uri, [f"{shop}.nope", f"{books}.ledger"], timeout=10)
    with HmsCatalog(hms_uri) as catalog:
        record = catalog.get_database(default_watermark_db(source.source_id))
    assert record is not None
    mark = from_parameters(record.parameters)
    assert mark is not None and mark.event_id >= written and mark.source_id == source.source_id
    assert mark.of(shop) == mark.of(books) == mark.event_id == final.event_id
    assert job.metric("streamer_target_watermark_event_id") == mark.event_id
    assert job.metric("streamer_target_db_watermark_event_id", db=shop) == mark.event_id

    # the checker's verdicts
    source.stop_background()
    history = History.from_rows(wh.notifications(), source.source_id, txn_writes=wh.txn_write_rows)
    api = check(history, [*readers.api, *extra])
    plain = check(history, readers.plain)
    stepped = check(history, [mixed])
    print(
        f"\n{wh.current_event_id()} events; API: {api.summary(3)}; attempts per snapshot "
        f"max {max(readers.attempts, default=0)}, retried {sum(a > 1 for a in readers.attempts)}, "
        f"{readers.unjudged} not judgeable (files replaced after the read)\n"
        f"plain reads: {plain.summary(3)}\nstepped plain read: {stepped.by_check()}; "
        f"{time.monotonic() - started:.0f} s"
    )
    # each snapshot reads and holds three tables with Spark (seconds here): a few during the writes
    during = [e for e in readers.claimed if e < last_written]
    assert len(during) >= 2, f"too few API snapshots during the writes: {readers.claimed} (< {last_written})"
    assert api.ok, api.summary(10)
    assert not _overclaimed(history, [*readers.api, *extra], [*readers.claimed, *extra_claimed])
    assert stepped.by_check().get(CUT) == 1, stepped.summary()
