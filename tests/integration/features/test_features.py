"""Statistics, constraints, functions, views and external-table data, end to end: bundled warehouse ->
agent -> Tansu -> ``streamer target run`` (Spark) -> target HMS (Hive 2.3) + files, read back there.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pyspark.sql import SparkSession

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import Column, ColumnStatistic, Constraint, ResourceUri
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.catalog import LAST_ID_PARAM
from tests.integration.target.helpers import (
    Source,
    SparkReader,
    TargetStack,
    by_partition,
    leftovers,
    wait_converged,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

COLS = [Column("id", "bigint"), Column("name", "string"), Column("amount", "double"), Column("ok", "boolean")]
DT = [Column("dt", "string")]
ROWS = [
    {"id": 1, "name": "ann", "amount": 1.5, "ok": True},
    {"id": 2, "name": None, "amount": 20.25, "ok": False},
    {"id": 3, "name": "carla", "amount": None, "ok": None},
]
BASIC = ("numFiles", "numRows", "totalSize")


def _stats(stats: list[ColumnStatistic]) -> list[ColumnStatistic]:
    return sorted((dataclasses.replace(s, type=s.type.lower()) for s in stats), key=lambda s: s.column)


def _constraints(cs: list[Constraint]) -> list[tuple[object, ...]]:
    """Comparable constraints (Hive 2.3 has no catalogs)."""
    return sorted(dataclasses.astuple(dataclasses.replace(c, catalog=None)) for c in cs)


def _basic(params: dict[str, str]) -> dict[str, str]:
    return {k: params[k] for k in BASIC if k in params}


def _path(location: str) -> Path:
    return Path(urlsplit(location).path)


def _digest(directory: Path) -> dict[str, str]:
    if not directory.is_dir():
        return {}
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in directory.iterdir()
        if p.is_file() and not p.name.startswith((".", "_"))
    }


def test_statistics_constraints_functions_and_views_read_back_equal(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark_readers: Callable[[EmbeddedMetastore], SparkReader],
    prefix: str,
) -> None:
    source.warehouse.stats_autogather = True
    wh = source.publishing()
    db, bad = f"{prefix}f", f"{prefix}g"
    wh.create_database(db)
    wh.create_table(db, "customers", COLS)
    wh.create_table(db, "orders", COLS, DT)
    wh.insert(db, "customers", ROWS, n_files=2)  # INSERT + ALTER_TABLE with basic statistics
    wh.insert(db, "orders", ROWS, {"dt": "d1"})  # new partition: statistics in ADD_PARTITION
    wh.insert(db, "orders", ROWS[:2], {"dt": "d1"})  # INSERT + ALTER_PARTITION
    wh.insert(db, "orders", ROWS[1:], {"dt": "d2"})
    wh.update_column_statistics(db, "customers")
    wh.update_column_statistics(db, "orders", {"dt": "d1"})
    wh.update_column_statistics(db, "orders", {"dt": "d2"})
    wh.delete_column_statistics(db, "orders", {"dt": "d2"}, "name")
    wh.add_primary_key(db, "customers", f"{db}_pk", ["id"], rely=True)
    wh.add_foreign_key(db, "orders", f"{db}_fk", ["id"], "customers")
    wh.add_primary_key(db, "orders", f"{db}_pk2", ["id", "name"])
    wh.drop_constraint(db, "orders", f"{db}_pk2")
    jar = source.warehouse.root / "lib" / "upper.jar"  # the source's jars: below its warehouse root
    jar.parent.mkdir(parents=True, exist_ok=True)
    jar.write_bytes(b"PK\x05\x06" + bytes(18))
    wh.create_function(db, "up", "com.example.Upper", [ResourceUri("JAR", f"file:{jar}")])
    wh.create_function(db, "gone", "com.example.Gone", [ResourceUri("JAR", f"file:{jar}")])
    wh.drop_function(db, "gone")
    wh.create_view(db, "named", COLS[:2], f"SELECT id, name FROM {db}.customers WHERE name IS NOT NULL")
    # a kind Hive 2.3 cannot store halts its database, loudly; other databases go on
    wh.create_database(bad)
    wh.create_table(bad, "t", COLS)
    wh.add_not_null(bad, "t", f"{bad}_nn", "id")
    wh.create_table(bad, "later", COLS)

    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    want = source.last_ids()[db]
    job.wait_for(
        lambda: target_stack.applied_ids([db])[db] == want and bad in target_stack.halts(),
        f"{db} at {want} and {bad} halted",
    )
    halt = target_stack.halts()[bad]
    assert halt.event_type == "ADD_NOTNULLCONSTRAINT" and "not supported by this metastore" in halt.cause, (
        halt
    )

    src = source.warehouse
    with target_stack.catalog() as cat:
        # statistics: column statistics and basic statistics parameters, table and partition level
        names = [c.name for c in COLS]
        assert _stats(cat.get_column_statistics(db, "customers", None, names)) == _stats(
            src.column_statistics(db, "customers")
        )
        for day in ("d1", "d2"):
            assert _stats(cat.get_column_statistics(db, "orders", [day], names)) == _stats(
                src.column_statistics(db, "orders", {"dt": day})
            ), day
        assert len(src.column_statistics(db, "orders", {"dt": "d2"})) == 3  # one was deleted
        tgt_customers = cat.get_table(db, "customers")
        assert tgt_customers is not None
        assert _basic(tgt_customers.parameters) == _basic(src.table(db, "customers").parameters)
        assert _basic(src.table(db, "customers").parameters)["numRows"] == "3"
        tgt_parts = {tuple(p.values): _basic(p.parameters) for p in cat.list_partitions(db, "orders")}
        src_parts = {tuple(p.values): _basic(p.parameters) for p in src.partition_snapshots(db, "orders")}
        assert tgt_parts == src_parts and src_parts[("d1",)]["numRows"] == "5", (tgt_parts, src_parts)
        # constraints: primary and foreign keys, the dropped one gone
        for table in ("customers", "orders"):
            assert _constraints(cat.get_constraints(db, table)) == _constraints(src.constraints(db, table)), (
                table
            )
        assert {c.kind for c in cat.get_constraints(db, "orders")} == {"FOREIGN_KEY"}
        # functions: the resource copied into the target's functions dir; the dropped one gone
        fn = cat.get_function(db, "up")
        assert fn is not None and fn.class_name == "com.example.Upper"
        (res,) = fn.resource_uris
        copied = _path(res.uri)
        assert copied.is_relative_to(target_stack.warehouse_root / "_functions")
        assert copied.read_bytes() == jar.read_bytes()
        assert cat.get_function(db, "gone") is None
        assert not (target_stack.warehouse_root / "_functions" / db / "gone").exists()
        # views: the definition replicated
        view = cat.get_table(db, "named")
        assert view is not None and view.table_type == "VIRTUAL_VIEW"
        assert view.view_original_text == src.table(db, "named").view_original_text
        assert cat.get_table(bad, "later") is None  # held behind the halt
    reader = spark_readers(target_stack.hms)
    rows = reader.ask("rows", db=db, table="named")
    assert sorted(r["id"] for r in rows) == [1, 3]
    assert by_partition(reader.ask("rows", db=db, table="orders"), ["dt"]) == by_partition(
        src.rows(db, "orders"), ["dt"]
    )


def test_external_table_data_converges_including_deletes(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark_readers: Callable[[EmbeddedMetastore], SparkReader],
    prefix: str,
) -> None:
    wh = source.publishing()
    src = source.warehouse
    db = f"{prefix}e"
    wh.create_database(db)
    wh.create_table(db, "plain", COLS, external=True, location=src.root / "outside" / db / "plain")
    wh.create_table(db, "daily", COLS, DT, external=True, location=src.root / "outside" / db / "daily")
    wh.insert(db, "plain", ROWS, n_files=2)  # data that arrives with events
    wh.insert(db, "daily", ROWS, {"dt": "d1"})
    wh.add_partitions(db, "daily", [{"dt": "d2"}])

    job = TargetInProcess(
        target_stack, broker.bootstrap_servers, source, spark=spark,
        extra=["--external-sync-seconds", "1", "--source-prefix", src.root.as_uri()],  # syncs read there
    ).start()
    target_jobs.append(job)
    wait_converged(job, source)

    # other tools change the files: no events at all
    events_before = src.current_event_id()
    plain_files = sorted(p.name for p in src.external_dir(db, "plain").iterdir())
    src.write_external_file(db, "plain", ROWS[:1], name="added.parquet")
    src.write_external_file(db, "plain", ROWS[2:], name=plain_files[0])  # replaced in place
    src.delete_external_file(db, "plain", plain_files[1])
    (d1_file,) = [p.name for p in src.external_dir(db, "daily", {"dt": "d1"}).iterdir()]
    src.delete_external_file(db, "daily", d1_file, {"dt": "d1"})
    src.write_external_file(db, "daily", ROWS, {"dt": "d2"}, name="late.parquet")
    assert src.current_event_id() == events_before

    dirs = [
        src.external_dir(db, "plain"),
        src.external_dir(db, "daily", {"dt": "d1"}),
        src.external_dir(db, "daily", {"dt": "d2"}),
    ]

    def target_dir(source_dir: Path) -> Path:  # <base>/<scheme>/<authority>/<path> (docs/features.md)
        return target_stack.external_base / "file" / "_" / str(source_dir).lstrip("/")

    def converged() -> bool:
        return all(_digest(target_dir(d)) == _digest(d) for d in dirs)

    job.wait_for(converged, "external directories equal to the source's", timeout=120)
    assert _digest(target_dir(dirs[1])) == {}  # the delete reached the target
    assert "added.parquet" in _digest(target_dir(dirs[0]))
    reader = spark_readers(target_stack.hms)
    assert by_partition(reader.ask("rows", db=db, table="plain"), []) == by_partition(
        src.rows(db, "plain"), []
    )
    assert by_partition(reader.ask("rows", db=db, table="daily"), ["dt"]) == by_partition(
        src.rows(db, "daily"), ["dt"]
    )
    assert not leftovers(target_stack.external_base)
    with target_stack.catalog() as cat:
        snap = cat.get_database(db)
        assert snap is not None and int(snap.parameters[LAST_ID_PARAM]) == events_before
