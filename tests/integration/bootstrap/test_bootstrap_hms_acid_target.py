"""A target applies a Thrift bootstrap of transactional tables, end to end: the embedded Hive 2.3
metastore on PostgreSQL (Hive's transaction tables, the test playing Hive's writer and listener as
``test_bootstrap_hms_acid`` does) holds an unpartitioned and a partitioned ACID table whose
transactions are committed, compacted, aborted and open around the dump; ``streamer bootstrap
--hms-uri ... --abort-open-txns`` publishes them into the session's Tansu broker; ``streamer target
run`` applies them. The replica holds exactly the committed directories (byte for byte, nothing of
the aborted or still-open transactions, nothing a compaction made obsolete), the target's ACID
visibility file names exactly their write ids, and ``read_table`` (what readers of an ACID replica
use) returns exactly the committed rows. A write committed after the dump, logged as Hive 2.x logs
it (an INSERT, before its commit; no transaction events), is copied but stays invisible: a target
never shows what no event says committed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from streamer.events.model import Column, EventType, FileRef, InsertPayload
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.thrift import ThriftTxns
from streamer.target.state.visibility import ACID_PARAM, load_visibility, table_key
from streamer.target.table_reader import read_table
from tests.integration.bootstrap.test_bootstrap_hms import (
    HiveSource,
    _local,
    _Topic,
    hive,
    publish_after_bootstrap,
    write_parquet,
)
from tests.integration.bootstrap.test_bootstrap_hms_acid import _bootstrap, _create_acid_table, _deltas
from tests.integration.target.helpers import TargetStack, sha256, wait_applied
from tests.integration.target.in_process import TargetInProcess, TargetJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

__all__ = ["hive"]  # the fixture, imported for pytest

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def _files(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every visible file under ``root`` (hidden names skipped)."""
    if not root.is_dir():
        return {}
    return {
        str(p.relative_to(root)): sha256(p) for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
    }


def _delta(txn: int, stmt: int = 0) -> str:
    return f"delta_{txn:07d}_{txn:07d}_{stmt:04d}"


def _ids(firsts: Iterable[int]) -> list[int]:
    return sorted(i for first in firsts for i in range(first, first + 3))


def test_target_applies_a_thrift_acid_bootstrap_with_only_committed_data(
    broker: EmbeddedBroker,
    hive: HiveSource,
    topic: str,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    prefix: str,
    spark: SparkSession,
) -> None:
    # the target job starts first (its query takes longer to start than preparing the source and the dump)
    job = TargetInProcess(target_stack, broker.bootstrap_servers, cast(Any, _Topic(hive.source_id, topic)),
                          spark=spark)
    target_jobs.append(job.start())
    db = f"{prefix}acid"
    hive.create_database(db)
    events = _create_acid_table(hive, db, "events")
    daily = _create_acid_table(hive, db, "daily", keys=[Column("dt", "string")])
    ev, dl = _local(events.sd.location), _local(daily.sd.location)
    parts: dict[str, str] = {}
    for day in DAYS:
        location = hive.add_partition(daily, day).sd.location
        assert location
        parts[day] = location

    txns = ThriftTxns(hive.catalog.conn)
    t1, t2, t3, t4, t5, t6, t7 = txns.open(7, user="hive")
    _deltas(str(events.sd.location), t1, 1, 0)
    _deltas(str(events.sd.location), t2, 1, 100)
    txns.commit(t1)
    txns.commit(t2)
    # a major compaction of t1 and t2 (not cleaned: the deltas stay beside it)
    write_parquet(f"{events.sd.location}/base_{t2:07d}", "bucket_00000", 0)
    write_parquet(f"{events.sd.location}/base_{t2:07d}", "bucket_00001", 100)
    for txn, first in [(t3, 300), (t4, 400), (t5, 500), (t7, 700)]:
        _deltas(str(events.sd.location), txn, 1, first)
    _deltas(str(events.sd.location), t6, 2, 600)  # two statements of one transaction
    _deltas(parts[DAYS[0]], t3, 1, 3000)
    _deltas(parts[DAYS[0]], t4, 1, 4000)
    _deltas(parts[DAYS[1]], t5, 1, 5000)
    _deltas(parts[DAYS[1]], t6, 1, 6000)
    _deltas(parts[DAYS[1]], t7, 1, 7000)
    _deltas(parts[DAYS[2]], t4, 1, 4100)  # a partition of an aborted transaction only
    txns.commit(t3)
    txns.abort([t4])
    txns.commit(t6)
    # t5 and t7 are open when the dump starts: t7 commits while it waits, t5 is aborted by it
    timer = threading.Timer(1.0, txns.commit, [t7])
    started = time.monotonic()
    timer.start()
    try:
        done = _bootstrap(broker, hive, topic, prefix, "--open-txn-timeout", "3", "--abort-open-txns",
                          "--partitions-per-record", "1", "--records-per-transaction", "2")
    finally:
        timer.join()
    dump_seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"aborting transactions {t5}" in done.stderr, done.stderr[-3000:]
    after = txns.snapshot()
    assert t5 in after.aborted and t4 in after.aborted and not after.open
    e1 = hive.catalog.current_notification_event_id()
    assert f"as of event {e1}:" in done.stdout, done.stdout

    applied = time.monotonic()
    wait_applied(job, target_stack, {db: e1}, timeout=300)
    apply_seconds = time.monotonic() - applied

    # the replica's files: exactly the committed directories Hive's reader reads, byte for byte
    committed_events = [f"base_{t2:07d}", _delta(t3), _delta(t6, 0), _delta(t6, 1), _delta(t7)]
    committed_daily = {DAYS[0]: [_delta(t3)], DAYS[1]: [_delta(t6), _delta(t7)], DAYS[2]: []}
    src_events = _files(ev)
    want_events = {k: v for k, v in src_events.items() if k.split("/")[0] in committed_events}
    src_daily = _files(dl)
    want_daily = {k: v for k, v in src_daily.items()
                  if k.split("/")[1] in committed_daily[k.split("/")[0].removeprefix("dt=")]}
    with target_stack.catalog() as tgt:
        t_events, t_daily = tgt.get_table(db, "events"), tgt.get_table(db, "daily")
        assert t_events is not None and t_daily is not None
        assert t_events.parameters.get(ACID_PARAM) == "true", t_events.parameters
        assert t_daily.parameters.get(ACID_PARAM) == "true", t_daily.parameters
        assert sorted(p.values[0] for p in tgt.list_partitions(db, "daily")) == DAYS
        got_events, got_daily = _files(_local(t_events.sd.location)), _files(_local(t_daily.sd.location))
    assert got_events == want_events, (sorted(got_events), sorted(want_events))
    assert got_daily == want_daily, (sorted(got_daily), sorted(want_daily))
    assert len(want_events) == 6 and len(want_daily) == 3  # the test's own arithmetic

    # the target's visibility file: the dumped write ids, no more
    warehouse_root = target_stack.warehouse_root.as_uri()
    visibility = load_visibility(warehouse_root, hive.source_id)
    assert visibility.write_ids(table_key(db, "events")) == [t2, t3, t6, t7]
    assert visibility.write_ids(table_key(db, "daily")) == [t3, t6, t7]

    # what a reader of the replica sees: exactly the committed rows (no duplicate of the compacted ones)
    def rows(table: str) -> list[tuple[int, ...]]:  # the visibility file as it is now
        frame = read_table(spark, f"{db}.{table}", warehouse_root=warehouse_root,
                           hms_uri=target_stack.hms.uri)
        return sorted(tuple(r) for r in frame.select("id", *(["dt"] if table == "daily" else [])).collect())

    assert rows("events") == [(i,) for i in _ids([0, 100, 300, 600, 610, 700])]
    assert rows("daily") == sorted(
        [(i, DAYS[0]) for i in _ids([3000])] + [(i, DAYS[1]) for i in _ids([6000, 7000])]
    )

    # after E1: a committed write, logged as Hive 2.x logs it (an INSERT naming the delta's files; no
    # transaction event), reaches the replica through the agent on the Thrift log; Hive logs it
    # before the commit, and no event says it committed, so the target copies the files and shows
    # none of them: readers keep the committed state of the dump (docs/bootstrap.md)
    t8 = txns.open(1, user="hive")[0]
    _deltas(str(events.sd.location), t8, 1, 800)
    written = FileRef(uri=f"{events.sd.location}/{_delta(t8)}/bucket_00000")
    e2 = hive.log(EventType.INSERT, InsertPayload(events, None, [], False, [written]), db, "events")
    txns.commit(t8)
    publish_after_bootstrap(hive, broker, topic, prefix, after=e1, until=e2)
    wait_applied(job, target_stack, {db: e2}, timeout=120)
    with target_stack.catalog() as tgt:
        t_events = tgt.get_table(db, "events")
        assert t_events is not None
        got_events = _files(_local(t_events.sd.location))
    copied = [*committed_events, _delta(t8)]
    assert got_events == {k: v for k, v in _files(ev).items() if k.split("/")[0] in copied}
    later = load_visibility(warehouse_root, hive.source_id)
    assert later.write_ids(table_key(db, "events")) == [t2, t3, t6, t7]
    assert later.write_ids(table_key(db, "daily")) == [t3, t6, t7]
    assert rows("events") == [(i,) for i in _ids([0, 100, 300, 600, 610, 700])]
    print(f"\ndump {dump_seconds:.1f} s, target applied it {apply_seconds:.1f} s later")
