"""ACID end to end (DESIGN invariant 5): agent -> topic -> target job -> ``read_table``.

Real Tansu, the real Hive 2.3 target metastore, a real ``streamer target run`` process and Spark.
1. Hundreds of transactions, a third aborted, many across two databases, some interleaved: the
   replica's committed rows equal the source's, and aborted transactions copied zero bytes (the
   job's own counters and the target filesystem agree).
2. A reader polling while transactions replicate never sees part of one.
3. A target SIGKILLed between a transaction's OPEN and its COMMIT converges after a restart.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from streamer.events.model import Column
from streamer.target.apply.files import TMP_PREFIX
from streamer.target.state.visibility import TxnState, VisibilitySnapshot, load_visibility, table_key
from streamer.warehouse import Warehouse
from streamer.warehouse.acid import parse_dir
from tests.integration.acid.conftest import Pipeline, multiset

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

COLUMNS = [
    Column("id", "bigint"), Column("name", "string"), Column("amount", "double"), Column("ok", "boolean"),
]
TAGGED = [Column("id", "bigint"), Column("tag", "string")]
DAYS = ["2024-03-01", "2024-03-02", "2024-03-03"]
REGIONS = ["eu", "us"]
COUNTERS = (
    "streamer_target_bytes_copied_total",
    "streamer_target_txns_committed_total",
    "streamer_target_txns_aborted_total",
)


# --- source side -------------------------------------------------------------------------------


@dataclass
class Script:
    """What a scripted ACID workload did, for the assertions' preconditions."""

    committed: int = 0
    aborted: int = 0
    cross_db: int = 0
    interleaved: int = 0
    next_id: int = 0
    tables: list[tuple[str, str]] = field(default_factory=list)


def _create_acid_tables(wh: Warehouse, prefix: str) -> list[tuple[str, str]]:
    """Two databases, both ACID kinds, unpartitioned and partitioned by one and by two keys."""
    sales, audit = f"{prefix}sales", f"{prefix}audit"
    wh.create_database(sales)
    wh.create_database(audit)
    day, day_region = [Column("dt", "string")], [Column("dt", "string"), Column("region", "string")]
    wh.create_table(sales, "orders", COLUMNS, transactional=True)
    wh.create_table(sales, "lines", COLUMNS, day, transactional="insert_only")
    wh.create_table(audit, "events", COLUMNS, day_region, transactional="insert_only")
    wh.create_table(audit, "log", COLUMNS, day, transactional=True)
    return [(sales, "orders"), (sales, "lines"), (audit, "events"), (audit, "log")]


def _statement(wh: Warehouse, rng: random.Random, script: Script, txn: int, db: str, table: str) -> None:
    rows = []
    for _ in range(rng.randint(1, 3)):
        script.next_id += 1
        rows.append({"id": script.next_id, "name": f"txn{txn}", "amount": script.next_id / 4,
                     "ok": script.next_id % 2 == 0})
    keys = [k.name for k in wh.table(db, table).partition_keys]
    spec = {"dt": rng.choice(DAYS), "region": rng.choice(REGIONS)} if keys else None
    part = {k: spec[k] for k in keys} if spec else None
    wh.acid_insert(txn, db, table, rows, part, n_files=rng.choice([1, 1, 2]))


def acid_workload(wh: Warehouse, prefix: str, n_txns: int, abort_share: float, seed: int) -> Script:
    """``n_txns`` transactions, exactly ``abort_share`` of them aborted (shuffled), a quarter writing
    tables of both databases, 1-2 statements per table; every fifth pair runs interleaved (B opens
    before A finishes and finishes first), so write ids are not allocated in commit order."""
    rng = random.Random(seed)
    script = Script(tables=_create_acid_tables(wh, prefix))
    n_aborted = round(n_txns * abort_share)
    aborts = [True] * n_aborted + [False] * (n_txns - n_aborted)
    rng.shuffle(aborts)

    def plan() -> list[tuple[str, str]]:
        first = rng.choice(script.tables)
        chosen = [first]
        if rng.random() < 0.25:
            chosen.append(rng.choice([t for t in script.tables if t[0] != first[0]]))
            script.cross_db += 1
        return chosen

    def write(txn: int, tables: list[tuple[str, str]]) -> None:
        for db, table in tables:
            for _ in range(rng.choice([1, 1, 2])):
                _statement(wh, rng, script, txn, db, table)

    def finish(txn: int, abort: bool) -> None:
        if abort:
            wh.abort_txn(txn)
            script.aborted += 1
        else:
            wh.commit_txn(txn)
            script.committed += 1

    i = 0
    while i < n_txns:
        if i % 10 == 5 and i + 1 < n_txns:
            a, b = wh.open_txn(), wh.open_txn()
            write(a, plan())
            write(b, plan())
            finish(b, aborts[i + 1])
            finish(a, aborts[i])
            script.interleaved += 1
            i += 2
            continue
        txn = wh.open_txn()
        write(txn, plan())
        finish(txn, aborts[i])
        i += 1
    return script


def aborted_write_ids(wh: Warehouse) -> dict[str, set[int]]:
    """Write ids of aborted transactions per ``db.table`` (their deltas stay on the source's disk)."""
    out: dict[str, set[int]] = {}
    for txn in wh.txns("aborted"):
        for row in wh.txn_write_rows(txn):
            out.setdefault(table_key(row.db, row.table), set()).add(row.write_id)
    return out


# --- target side -------------------------------------------------------------------------------


def acid_files(table_dir: Path) -> dict[str, int]:
    """Size of every data file under the ACID directories of a table, by path relative to the table."""
    out: dict[str, int] = {}
    for f in table_dir.rglob("*"):
        if f.is_file() and not f.name.startswith((".", "_")) and parse_dir(f.parent.name) is not None:
            out[str(f.relative_to(table_dir))] = f.stat().st_size
    return out


def delta_write_ids(table_dir: Path) -> set[int]:
    """Write ids that have at least one ACID directory (any partition) under the table."""
    ids: set[int] = set()
    for d in table_dir.rglob("*"):
        acid_dir = parse_dir(d.name) if d.is_dir() else None
        if acid_dir is not None:
            ids.update(range(acid_dir.min_write_id, acid_dir.max_write_id + 1))
    return ids


def committed_source_files(wh: Warehouse, db: str, table: str) -> dict[str, int]:
    """The committed files of a source table, by path relative to the table, with their sizes."""
    out: dict[str, int] = {}
    for ref in wh.files(db, table):
        assert ref.size is not None and ref.subdir, ref
        rel = "/".join(p for p in (ref.partition, ref.subdir, ref.uri.rsplit("/", 1)[-1]) if p)
        out[rel] = ref.size
    return out


def target_table_dir(pipeline: Pipeline, db: str, table: str) -> Path:
    return pipeline.stack.warehouse_root / f"{db}.db" / table


def assert_replica_equals_source(
    pipeline: Pipeline, spark: SparkSession, tables: list[tuple[str, str]]
) -> None:
    """Rows (one visibility snapshot for all tables), committed write ids and files match exactly."""
    wh = pipeline.source.warehouse
    visibility = VisibilitySnapshot(pipeline.warehouse_root)
    mine = visibility.of(pipeline.source.source_id)
    aborted = aborted_write_ids(wh)
    for db, table in tables:
        what = f"{db}.{table}"
        source_rows = multiset(wh.rows(db, table))
        target_rows = multiset(pipeline.target_rows(spark, db, table, visibility))
        assert target_rows == source_rows, (
            f"rows of {what}: only source {dict(source_rows - target_rows)}, "
            f"only target {dict(target_rows - source_rows)}"
        )
        committed = set(wh.acid_committed_write_ids(db, table))
        assert set(mine.write_ids(table_key(db, table))) == committed, what
        tdir = target_table_dir(pipeline, db, table)
        on_target = delta_write_ids(tdir)
        assert on_target <= committed, f"{what}: delta dirs of uncommitted write ids {on_target - committed}"
        assert not on_target & aborted.get(table_key(db, table), set()), what
        expected_files = committed_source_files(wh, db, table)
        got_files = acid_files(tdir)
        assert got_files == expected_files, (
            f"files of {what}: missing {sorted(set(expected_files) - set(got_files))[:5]}, "
            f"extra {sorted(set(got_files) - set(expected_files))[:5]}"
        )
    left = list(pipeline.stack.warehouse_root.rglob(f"{TMP_PREFIX}*"))
    assert not left, f"staging files left behind: {left[:5]}"


# --- 1. a large ACID workload ------------------------------------------------------------------


def test_acid_workload_replicates_committed_rows_and_copies_nothing_aborted(
    shared_pipeline: Pipeline, spark: SparkSession, prefix: str
) -> None:
    pipeline, wh = shared_pipeline, shared_pipeline.source.warehouse
    pipeline.wait_converged()  # counters are measured from here, over this test's work alone
    before = {name: pipeline.counter(name) for name in COUNTERS}
    started = time.monotonic()
    script = acid_workload(wh, prefix, n_txns=220, abort_share=0.35, seed=20240301)
    written = time.monotonic() - started
    assert script.committed + script.aborted >= 200
    assert script.aborted >= 0.3 * (script.committed + script.aborted)
    assert script.cross_db >= 30 and script.interleaved >= 10
    committed_bytes = sum(sum(committed_source_files(wh, db, t).values()) for db, t in script.tables)
    on_source_disk = sum(sum(acid_files(wh.root / f"{db}.db" / t).values()) for db, t in script.tables)
    assert on_source_disk > committed_bytes, "aborted transactions must leave deltas on the source"

    pipeline.wait_converged(timeout=300)
    replicated = time.monotonic() - started
    assert_replica_equals_source(pipeline, spark, script.tables)

    # the copier's own counters: exactly the committed files' bytes, none of the aborted deltas'
    done = {name: pipeline.counter(name) - before[name] for name in COUNTERS}
    assert done["streamer_target_bytes_copied_total"] == committed_bytes, (done, committed_bytes)
    assert done["streamer_target_txns_committed_total"] == script.committed, done
    assert done["streamer_target_txns_aborted_total"] == script.aborted, done
    assert pipeline.counter("streamer_target_open_txns") == 0
    # and the target filesystem: every byte under these tables belongs to a committed write id
    on_target_disk = sum(
        sum(acid_files(target_table_dir(pipeline, db, t)).values()) for db, t in script.tables
    )
    assert on_target_disk == committed_bytes
    print(f"\nACID workload: {script.committed} committed, {script.aborted} aborted, "
          f"{script.cross_db} across databases, {script.interleaved} interleaved pairs, "
          f"{wh.current_event_id()} events, {committed_bytes} of {on_source_disk} bytes committed; "
          f"written in {written:.1f} s, replicated in {replicated:.1f} s")


# --- 2. a reader polling during replication ----------------------------------------------------


@dataclass
class Poll:
    left: Counter[str]
    right: Counter[str]


class PollingReader:
    """Reads two tables in a loop, one visibility snapshot per poll, until stopped."""

    def __init__(self, pipeline: Pipeline, spark: SparkSession, left: str, right: str) -> None:
        self.pipeline, self.spark = pipeline, spark
        self.left, self.right = left, right
        self.polls: list[Poll] = []
        self.errors: list[BaseException] = []
        self._started = 0
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acid-reader", daemon=True)

    def _tags(self, name: str, visibility: VisibilitySnapshot) -> Counter[str]:
        db, table = name.split(".")
        return Counter(str(r["tag"]) for r in self.pipeline.target_rows(self.spark, db, table, visibility))

    def poll(self) -> Poll:
        visibility = VisibilitySnapshot(self.pipeline.warehouse_root)
        return Poll(self._tags(self.left, visibility), self._tags(self.right, visibility))

    def wait_next_poll(self, timeout: float = 120.0) -> None:
        """Until a poll that starts after this call has finished (so it ran while the target applied)."""
        with self._changed:
            wanted = self._started + 1
            ok = self._changed.wait_for(lambda: len(self.polls) >= wanted or bool(self.errors), timeout)
        assert ok, f"no poll finished within {timeout} s"

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._changed:
                self._started += 1
            try:
                poll = self.poll()
            except BaseException as exc:
                self.errors.append(exc)
                poll = None
            with self._changed:
                if poll is not None:
                    self.polls.append(poll)
                self._changed.notify_all()
            if poll is None:
                return

    def __enter__(self) -> PollingReader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)


def test_reader_polling_during_replication_never_sees_part_of_a_transaction(
    shared_pipeline: Pipeline, spark: SparkSession, prefix: str
) -> None:
    pipeline, wh = shared_pipeline, shared_pipeline.source.warehouse
    left_db, right_db = f"{prefix}left", f"{prefix}right"
    wh.create_database(left_db)
    wh.create_database(right_db)
    wh.create_table(left_db, "a", TAGGED, transactional=True)
    wh.create_table(right_db, "b", TAGGED, [Column("dt", "string")], transactional="insert_only")
    pipeline.wait_converged()

    rng = random.Random(7)
    expected: dict[str, int] = {}  # committed tag -> rows it has in the left table
    aborted: set[str] = set()
    with PollingReader(pipeline, spark, f"{left_db}.a", f"{right_db}.b") as reader:
        for i in range(48):
            tag, statements = f"t{i:03d}", rng.choice([1, 2])
            txn = wh.open_txn()
            wh.acid_insert(txn, left_db, "a", [{"id": i * 10, "tag": tag}])
            wh.acid_insert(txn, right_db, "b", [{"id": i * 10, "tag": tag}], {"dt": rng.choice(DAYS)})
            if statements == 2:  # a second statement: delta_W_W_1 must appear together with _0
                wh.acid_insert(txn, left_db, "a", [{"id": i * 10 + 1, "tag": tag}])
            if rng.random() < 0.3:
                wh.abort_txn(txn)
                aborted.add(tag)
            else:
                wh.commit_txn(txn)
                expected[tag] = statements
            if i % 6 == 5:  # rounds of six: the next poll runs while the target applies this round
                reader.wait_next_poll()
        pipeline.wait_converged()
        reader.wait_next_poll()
    assert not reader.errors, reader.errors
    assert dict(reader.polls[-1].left) == expected and set(reader.polls[-1].right) == set(expected)

    states = set()
    for n, poll in enumerate(reader.polls):
        assert set(poll.left) == set(poll.right), f"poll {n}: a transaction is half visible: " \
            f"only left {set(poll.left) - set(poll.right)}, only right {set(poll.right) - set(poll.left)}"
        assert not set(poll.left) & aborted, f"poll {n}: rows of aborted transactions are visible"
        partial = {t: c for t, c in poll.left.items() if c != expected[t]}
        assert not partial, f"poll {n}: part of a transaction's statements is visible: {partial}"
        assert all(c == 1 for c in poll.right.values()), f"poll {n}: duplicated rows {poll.right}"
        states.add(frozenset(poll.left))
    intermediate = [s for s in states if s and s != set(expected)]
    assert len(intermediate) >= 2, (
        f"the reader saw only {len(intermediate)} intermediate states in {len(reader.polls)} polls: "
        "it did not poll during replication"
    )
    print(f"\nreader: {len(reader.polls)} polls, {len(intermediate)} intermediate states, "
          f"{len(expected)} committed / {len(aborted)} aborted transactions")


# --- 3. a target killed between OPEN and COMMIT ------------------------------------------------


def test_target_killed_between_open_and_commit_converges(
    shared_pipeline: Pipeline, spark: SparkSession, prefix: str
) -> None:
    pipeline, wh = shared_pipeline, shared_pipeline.source.warehouse
    starts = pipeline.job.starts
    tables = _create_acid_tables(wh, prefix)
    (sales, orders), (_, lines), (audit, events), _ = tables
    row_id = iter(range(1, 10_000))

    def rows(n: int, label: str) -> list[dict[str, object]]:
        return [{"id": next(row_id), "name": label, "amount": 1.5, "ok": True} for _ in range(n)]

    with wh.transaction() as txn:
        wh.acid_insert(txn, sales, orders, rows(2, "before"))
        wh.acid_insert(txn, audit, events, rows(2, "before"), {"dt": DAYS[0], "region": "eu"})
    pipeline.wait_converged()
    before = {t: multiset(pipeline.target_rows(spark, *t)) for t in tables}

    # two transactions open on the source; the target consumes OPEN, ALLOC_WRITE_ID, ADD_PARTITION
    committing, aborting = wh.open_txn(), wh.open_txn()
    wh.acid_insert(committing, sales, orders, rows(3, "kept"), n_files=2)
    # each into a new partition (ADD_PARTITION events inside the transactions)
    wh.acid_insert(committing, audit, events, rows(2, "kept"), {"dt": DAYS[1], "region": "us"})
    wh.acid_insert(aborting, sales, lines, rows(2, "dropped"), {"dt": DAYS[2]})
    wh.acid_insert(committing, sales, orders, rows(1, "kept"))  # a second statement
    pipeline.wait_converged()
    visibility = load_visibility(pipeline.warehouse_root, pipeline.source.source_id)
    for txn in (committing, aborting):
        known = visibility.txn(pipeline.source.source_id, txn)
        assert known is not None and known.state is TxnState.OPEN, (txn, known)
    assert {t: multiset(pipeline.target_rows(spark, *t)) for t in tables} == before
    pipeline.job.kill()

    wh.commit_txn(committing)
    wh.abort_txn(aborting)
    with wh.transaction() as txn:  # and life goes on while the target is down
        wh.acid_insert(txn, audit, events, rows(1, "after"), {"dt": DAYS[1], "region": "us"})
    pipeline.job.start()
    pipeline.wait_converged()

    assert_replica_equals_source(pipeline, spark, tables)
    got = multiset(pipeline.target_rows(spark, sales, orders))
    assert sum(got.values()) == 6 and max(got.values()) == 1, got
    state = load_visibility(pipeline.warehouse_root, pipeline.source.source_id)
    for txn, wanted in ((committing, TxnState.COMMITTED), (aborting, TxnState.ABORTED)):
        known = state.txn(pipeline.source.source_id, txn)
        assert known is not None and known.state is wanted, (txn, known)
    assert state.open_count() == 0
    assert not delta_write_ids(target_table_dir(pipeline, sales, lines)), "the aborted write was copied"
    assert pipeline.job.starts == starts + 1
