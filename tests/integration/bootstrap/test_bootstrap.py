"""Bootstrap end to end: a source with history and >= 50 tables / >= 2,000 partitions is dumped while a
workload (renames and drops included) runs, published, applied by ``streamer target run`` (Spark, a
child process) on a real metastore, and then followed by incremental events; the target equals the source.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import Column
from streamer.kafka.broker import EmbeddedBroker
from streamer.source.bootstrap import enrich_records, records, snapshot
from streamer.source.policy import PolicySet
from streamer.source.publish_bootstrap import publish_records
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import COLUMNS, Workload
from tests.integration.target.helpers import (
    Source,
    SparkReader,
    TargetStack,
    assert_target_equals_source,
    wait_applied,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROWS = [{"id": i, "name": f"n{i}", "amount": i * 1.5, "ok": i % 2 == 0} for i in range(3)]


def _history(source: Source, prefix: str) -> list[str]:
    """Three databases (so the random workload makes no others), 56 tables (28 partitioned with 80
    partitions each) in two of them, some data."""
    wh = source.warehouse
    dbs = [f"{prefix}a", f"{prefix}b", f"{prefix}c"]
    day = [Column("dt", "string")]
    wh.create_database(dbs[2])
    for db in dbs[:2]:
        wh.create_database(db, {"owner.team": "fin"})
        for i in range(28):
            if i % 2:
                wh.create_table(db, f"p{i}", COLUMNS, day)
                wh.add_partitions(db, f"p{i}", [{"dt": f"d{k:03d}"} for k in range(80)])
                wh.insert(db, f"p{i}", ROWS, {"dt": "d000"})
            else:
                wh.create_table(db, f"u{i}", COLUMNS, [])
                wh.insert(db, f"u{i}", ROWS, n_files=2)
    return dbs


def _some(wh: Warehouse, db: str, start: str, last: bool = False) -> str:
    names = [t for t in sorted(wh.tables(db)) if t.startswith(start) and t[1:].isdigit()]
    return names[-1] if last else names[0]


def test_bootstrap_during_a_workload_then_incremental_events(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark_readers: Callable[[EmbeddedMetastore], SparkReader],
    prefix: str,
) -> None:
    started = time.monotonic()
    wh = source.warehouse
    dbs = _history(source, prefix)
    load = Workload(wh, seed=5)
    done_ops: list[str] = []

    def meanwhile(kind: str, name: str) -> None:
        """Writers go on while the dump reads: random changes, renames and drops of dumped tables."""
        if kind != "table":
            return
        n = len(done_ops)
        if n % 7 == 0:
            load.run(3)
        if n == 5:  # a table of the first database, already dumped: consolidated
            wh.rename_table(dbs[0], _some(wh, dbs[0], "u"), f"renamed{n}")
        if n == 10:  # the last table of the second database, not dumped yet: read under its new name
            wh.rename_table(dbs[1], _some(wh, dbs[1], "p", last=True), f"renamed{n}")
        if n == 15:
            wh.drop_table(dbs[0], _some(wh, dbs[0], "p"))
        done_ops.append(name)

    scope = PolicySet.parse([f"`{prefix}.*`"])
    source.agent.policy = scope  # the agent publishes what the bootstrap covers
    state = snapshot(WarehouseCatalog(wh), source.agent.reader, scope, source.source_id,
                     enrich=source.agent.config.enrich, on_object=meanwhile)
    e1 = state.event_id
    assert e1 == wh.current_event_id()
    partitions = sum(len(t.partitions) for t in state.dump.tables.values())
    assert len(state.dump.tables) >= 50 and partitions >= 2000, (len(state.dump.tables), partitions)
    recs = enrich_records(records(state, source.source_id, policy=str(scope), event_time=int(time.time())),
                          source.agent.config.enrich)
    publish_records(source.agent.config, recs, head=e1, policy=str(scope))
    source.agent.close()
    source.agent.start()  # recovers E1 from the topic: continues after the bootstrap
    assert source.agent.last_id == e1

    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    wait_applied(job, target_stack, {db: e1 for db in dbs}, timeout=600)
    bootstrapped = time.monotonic() - started

    publishing = source.publishing()
    publishing.rename_table(dbs[0], _some(wh, dbs[0], "p"), "after_p")
    publishing.insert(dbs[1], _some(wh, dbs[1], "u"), ROWS)
    publishing.drop_table(dbs[1], _some(wh, dbs[1], "u", last=True))
    Workload(publishing, seed=6).run(40)
    expected = {db: max(e1, last) for db, last in source.last_ids().items() if db in dbs}
    wait_applied(job, target_stack, expected, timeout=300)
    seen = assert_target_equals_source(source, target_stack, spark_readers(target_stack.hms))
    assert seen.tables >= 40 and seen.partitions >= 1900, seen
    print(f"\nbootstrap of {len(state.dump.tables)} tables / {partitions} partitions ({len(recs)} records) "
          f"applied in {bootstrapped:.0f} s; {seen}; total {time.monotonic() - started:.0f} s")
