"""ACID replicas end to end without a broker: bundled warehouse -> SQL reader -> applier -> read_table.

Real files, a real Spark session, and (second test) the real Hive 2.3 target metastore, which must
accept the replicated transactional tables and serve their metadata to the reader.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from streamer.events.model import Column
from streamer.hive.decode import decode_row
from streamer.metastore.catalog import REPL_SOURCE_PARAM, Catalog
from streamer.metastore.memory import MemoryCatalog
from streamer.source.enrich import Enricher, EnrichSettings
from streamer.source.reader import SqlNotificationReader
from streamer.target import read_table
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import GLOBAL_DB, plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from streamer.target.state.visibility import (
    ACID_PARAM,
    AcidStateError,
    Visibility,
    VisibilityStore,
    load_visibility,
)
from streamer.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamer.embedded_metastore.server import EmbeddedMetastore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
SOURCE = "acid-src"


class FlakyStore(VisibilityStore):
    """The real store, which can be told to fail its next write (a crash before the visibility flip)."""

    fail_next = False

    def _save(self, state: Visibility) -> None:
        if self.fail_next:
            self.fail_next = False
            raise AcidStateError("crash (test)")
        super()._save(state)


class Target:
    def __init__(self, tmp: Path, catalog: Catalog) -> None:
        self.root = tmp / "target"
        self.root.mkdir()
        self.state = TargetState(tmp / "target-state")
        self.store = FlakyStore(str(self.root), SOURCE)
        self.copier = FileCopier(max_workers=2)
        self.applier = Applier(catalog, self.copier, TargetPaths(str(self.root)), SOURCE,
                               state=self.state, acid=self.store)
        self.after = 0

    def replicate(self, url: str) -> None:
        reader = SqlNotificationReader(url)
        try:
            enrich = Enricher(EnrichSettings(), reader)
            rows = reader.read_after(self.after, 100_000)
            events = [enrich(decode_row(r, SOURCE)) for r in rows]
        finally:
            reader.close()
        if rows:
            self.after = rows[-1].event_id
        the_plan = plan(events, self.applier.load_progress(), set(self.state.halts()))
        run_plan(self.applier, the_plan, self.state)


def _workload(wh: Warehouse, db1: str, db2: str, n_txns: int, seed: int) -> list[int]:
    """Transactions over two tables in two databases, about a third aborted; returns aborted txn ids."""
    rnd = random.Random(seed)
    wh.create_database(db1)
    wh.create_database(db2)
    wh.create_table(db1, "t1", [Column("id", "int"), Column("name", "string")], transactional=True)
    wh.create_table(db2, "t2", [Column("id", "int")], [Column("p", "string")], transactional="insert_only")
    aborted, next_id = [], 0
    for _ in range(n_txns):
        txn = wh.open_txn()
        for db, table in rnd.sample([(db1, "t1"), (db2, "t2")], rnd.choice([1, 2])):
            rows: list[dict[str, object]] = []
            for _ in range(rnd.randint(1, 3)):
                next_id += 1
                row: dict[str, object] = {"id": next_id}
                row.update({"name": f"n{next_id}"} if table == "t1" else {"p": rnd.choice(["x", "y/z"])})
                rows.append(row)
            wh.acid_insert(txn, db, table, rows)
        if rnd.random() < 0.35:
            wh.abort_txn(txn)
            aborted.append(txn)
        else:
            wh.commit_txn(txn)
    return aborted


def _rows(df: Any) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in df.collect())


def _expected(wh: Warehouse, db: str, table: str, cols: list[str]) -> list[tuple[object, ...]]:
    return sorted(tuple(r[c] for c in cols) for r in wh.rows(db, table))


def test_read_table_returns_exactly_the_committed_rows(spark: SparkSession, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    db1, db2 = f"acid_a_{tag}", f"acid_b_{tag}"
    url = str(tmp_path / "source.sqlite")
    wh = Warehouse.open(url, root=tmp_path / "src", cmroot=tmp_path / "cm", source_id=SOURCE)
    target = Target(tmp_path, MemoryCatalog())
    try:
        aborted = _workload(wh, db1, db2, 40, seed=5)
        target.replicate(url)
        assert aborted and not target.state.halts()
        loc1, loc2 = target.root / f"{db1}.db" / "t1", target.root / f"{db2}.db" / "t2"
        # as the replica's own table parameters say (the target's catalog is a memory one here)
        props = f"TBLPROPERTIES ('{ACID_PARAM}'='true', '{REPL_SOURCE_PARAM}'='{SOURCE}')"
        spark.sql(f"CREATE DATABASE {db1}")
        spark.sql(f"CREATE DATABASE {db2}")
        spark.sql(f"CREATE TABLE {db1}.t1 (id INT, name STRING) USING parquet LOCATION '{loc1}' {props}")
        spark.sql(f"CREATE TABLE {db2}.t2 (id INT, p STRING) USING parquet PARTITIONED BY (p) "
                  f"LOCATION '{loc2}' {props}")

        expected1 = _expected(wh, db1, "t1", ["id", "name"])
        expected2 = _expected(wh, db2, "t2", ["id", "p"])
        assert _rows(read_table(spark, f"{db1}.t1")) == expected1
        assert _rows(read_table(spark, f"{db2}.t2", warehouse_root=str(target.root))) == expected2
        # aborted transactions left deltas on the source and nothing on the target
        committed = set(load_visibility(str(target.root), SOURCE).write_ids(f"{db1}.t1"))
        assert committed == set(wh.acid_committed_write_ids(db1, "t1"))
        on_target = {p.name for p in target.root.rglob("delta_*")}
        on_source = {p.name for p in (tmp_path / "src").rglob("delta_*")}
        assert on_target < on_source
        assert all(int(name.split("_")[1]) in set(wh.acid_committed_write_ids(db1, "t1"))
                   | set(wh.acid_committed_write_ids(db2, "t2")) for name in on_target)

        # a commit whose files are published but whose visibility flip crashed shows nothing
        with wh.transaction() as txn:
            wh.acid_insert(txn, db1, "t1", [{"id": -1, "name": "late"}])
            wh.acid_insert(txn, db2, "t2", [{"id": -2, "p": "x"}])
        target.store.fail_next = True
        target.replicate(url)
        assert target.state.is_halted(GLOBAL_DB)
        assert _rows(read_table(spark, f"{db1}.t1")) == expected1
        assert _rows(read_table(spark, f"{db2}.t2")) == expected2
        target.state.retry(GLOBAL_DB)
        target.after = 0  # re-read the held events, as the job does after a retry
        target.replicate(url)
        assert _rows(read_table(spark, f"{db1}.t1")) == _expected(wh, db1, "t1", ["id", "name"])
        assert _rows(read_table(spark, f"{db2}.t2")) == _expected(wh, db2, "t2", ["id", "p"])
    finally:
        wh.close()
        spark.sql(f"DROP DATABASE IF EXISTS {db1} CASCADE")
        spark.sql(f"DROP DATABASE IF EXISTS {db2} CASCADE")


def test_acid_replica_on_the_hive_2_3_metastore(
    spark: SparkSession, hms: EmbeddedMetastore, tmp_path: Path
) -> None:
    from streamer.metastore.thrift import HmsCatalog

    tag = uuid.uuid4().hex[:8]
    db1, db2 = f"hacid_a_{tag}", f"hacid_b_{tag}"
    url = str(tmp_path / "source.sqlite")
    wh = Warehouse.open(url, root=tmp_path / "src", cmroot=tmp_path / "cm", source_id=SOURCE)
    with HmsCatalog(hms.uri) as catalog:
        target = Target(tmp_path, catalog)
        try:
            _workload(wh, db1, db2, 6, seed=11)
            target.replicate(url)
            assert not target.state.halts(), target.state.halts()
            table = catalog.get_table(db2, "t2")
            assert table is not None
            assert table.parameters[ACID_PARAM] == "true" and "transactional" not in table.parameters
            assert _rows(read_table(spark, f"{db1}.t1", hms_uri=hms.uri)) == _expected(
                wh, db1, "t1", ["id", "name"]
            )
            assert _rows(read_table(spark, f"{db2}.t2", hms_uri=hms.uri)) == _expected(
                wh, db2, "t2", ["id", "p"]
            )
        finally:
            wh.close()
            for db in (db1, db2):
                if catalog.get_database(db) is not None:
                    for t in catalog.list_tables(db):
                        catalog.drop_table(db, t)
                    catalog.drop_database(db)


def test_snapshot_reads_acid_replicas_as_read_table_does(spark: SparkSession, tmp_path: Path) -> None:
    """``streamer.read.snapshot`` resolves ACID replicas to the committed write ids' directories and
    pins them: rows of aborted transactions never show, and a commit after the snapshot does not
    change the DataFrames it returned."""
    from streamer.read import snapshot_from
    from streamer.target.job.watermark import WatermarkPublisher, compute, default_watermark_db

    tag = uuid.uuid4().hex[:8]
    db1, db2 = f"acid_s_{tag}", f"acid_t_{tag}"
    url = str(tmp_path / "source.sqlite")
    wh = Warehouse.open(url, root=tmp_path / "src", cmroot=tmp_path / "cm", source_id=SOURCE)
    catalog = MemoryCatalog()
    target = Target(tmp_path, catalog)
    name = default_watermark_db(SOURCE)
    publisher = WatermarkPublisher(catalog, name, str(target.root / f"{name}.db"), SOURCE)

    def replicate() -> None:  # as the job: apply, then publish the watermark
        target.replicate(url)
        publisher.publish(compute(target.applier.progress, target.after, (), source_id=SOURCE))

    try:
        aborted = _workload(wh, db1, db2, 30, seed=7)
        replicate()
        assert aborted and not target.state.halts()
        tables = [f"{db1}.t1", f"{db2}.t2"]
        snap = snapshot_from(spark, catalog, tables, warehouse_root=str(target.root), timeout=30)
        assert snap.event_id == wh.current_event_id()
        expected1 = _expected(wh, db1, "t1", ["id", "name"])
        expected2 = _expected(wh, db2, "t2", ["id", "p"])
        assert _rows(snap[f"{db1}.t1"].select("id", "name")) == expected1
        assert _rows(snap[f"{db2}.t2"].select("id", "p")) == expected2
        assert snap.tables[f"{db1}.t1"].write_ids == tuple(sorted(wh.acid_committed_write_ids(db1, "t1")))

        with wh.transaction() as txn:
            wh.acid_insert(txn, db1, "t1", [{"id": -1, "name": "late"}])
        replicate()
        assert _rows(snap[f"{db1}.t1"].select("id", "name")) == expected1  # pinned
        later = snapshot_from(spark, catalog, tables, min_event_id=wh.current_event_id(),
                              warehouse_root=str(target.root), timeout=30)
        assert _rows(later[f"{db1}.t1"].select("id", "name")) == _expected(wh, db1, "t1", ["id", "name"])
    finally:
        wh.close()
