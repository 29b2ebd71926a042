"""Tables replicated by state (their writers log no INSERT): recognised, their location-bearing
parameters on the target, their directories synced through the read rules and the write guard."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streamer import metrics
from streamer.events.model import (
    AlterPartitionPayload,
    Column,
    EventType,
    SerDe,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.target.apply.by_state import SOURCE_LOCATION_PARAM, state_sync_reason
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.sources import SourceRules
from streamer.target.job.external_sync import ExternalSync
from tests.unit.target import builders as b
from tests.unit.target.apply.test_apply import Env, make_env

PARQUET = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
DATASOURCE = {"spark.sql.sources.provider": "parquet", "spark.sql.create.version": "3.5.0"}


def _declared(root: Path) -> SourceRules:
    """The source's warehouse declared, as a directory sync needs (docs/security.md)."""
    return SourceRules(prefixes=(f"file://{root / 'src'}",))


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path, sources=_declared(tmp_path))


def _hive(fmt: str, table_type: str = "MANAGED_TABLE", **params: str) -> TableSnapshot:
    return TableSnapshot("t", "d", table_type, sd=StorageDescriptor(location="file:/s/t", input_format=fmt),
                         parameters=params)


@pytest.mark.parametrize(("table", "by_state"), [
    (_hive("x.TextInputFormat", **DATASOURCE), True),  # USING parquet: Spark's own writer
    (_hive(PARQUET, **{"spark.sql.create.version": "3.5.0"}), True),  # conversion on by default
    (_hive("x.OrcInputFormat"), False),  # statistics alone: Hive's own writes alter them too
    (_hive(PARQUET), False),  # Hive's own: INSERT events
    (_hive("x.TextInputFormat", **{"spark.sql.create.version": "3.5.0"}), False),  # Hive's write path
    (_hive("x.OrcInputFormat", transactional="true"), False),  # ACID: writes log events
    (_hive(PARQUET, "EXTERNAL_TABLE", **DATASOURCE), False),  # the external sync's
    (_hive(PARQUET, **{"spark.sql.sources.provider": "hive", "spark.sql.create.version": "3"}), True),
])
def test_which_tables_are_replicated_by_state(table: TableSnapshot, by_state: bool) -> None:
    assert (state_sync_reason(table) is not None) is by_state


def _datasource(env: Env, db: str) -> TableSnapshot:
    plain = b.table(db, "t", location=f"file://{env.src}/{db}.db/t")
    t = dataclasses.replace(plain, parameters=dict(DATASOURCE))
    serde = SerDe(serialization_lib="ParquetHiveSerDe", parameters={"path": t.sd.location or ""})
    (env.src / f"{db}.db/t").mkdir(parents=True)
    return dataclasses.replace(t, sd=dataclasses.replace(t.sd, serde=serde))


def _gauge(db: str) -> float | None:
    return metrics.TARGET_REGISTRY.get_sample_value("streamer_target_tables_synced_by_state", {"db": db})


def test_a_datasource_table_points_at_its_replica_and_is_synced_when_its_statistics_change(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    t = _datasource(env, "ds1")
    assert env.run([b.create_db(1, "ds1"), b.create_table(2, t)]) == [1, 2]
    target = env.catalog.get_table("ds1", "t")
    assert target is not None and target.sd.serde.parameters["path"] == str(env.wh / "ds1.db/t")
    assert target.parameters[SOURCE_LOCATION_PARAM] == t.sd.location
    assert _gauge("ds1") == 1
    assert [r for r in caplog.records if "replicated by state" in r.getMessage()]
    src = env.src / "ds1.db/t"
    (src / "part-0.parquet").write_bytes(b"zero")
    (src / "_SUCCESS").write_bytes(b"")
    counted = dataclasses.replace(t, parameters={**t.parameters, "numFiles": "1"})
    assert env.run([b.alter_table(3, t, counted)]) == [3]
    assert env.files() == {"ds1.db/t/part-0.parquet": b"zero"}
    (src / "part-0.parquet").unlink()  # an overwrite: a new file, the old one gone
    (src / "part-1.parquet").write_bytes(b"one")
    again = dataclasses.replace(t, parameters={**t.parameters, "numFiles": "1", "totalSize": "3"})
    assert env.run([b.alter_table(4, counted, again)]) == [4]
    assert env.files() == {"ds1.db/t/part-1.parquet": b"one"}
    assert env.run([b.drop_table(5, again)]) == [5]
    assert _gauge("ds1") == 0


def test_a_sync_the_read_rules_refuse_halts_the_database_at_the_event(tmp_path: Path) -> None:
    env = make_env(tmp_path, sources=SourceRules(prefixes=("file:///elsewhere",)))
    t = _datasource(env, "ds2")
    assert env.run([b.create_db(1, "ds2"), b.create_table(2, t)]) == [1, 2]
    (env.src / "ds2.db/t/part-0.parquet").write_bytes(b"zero")
    counted = dataclasses.replace(t, parameters={**t.parameters, "numFiles": "1"})
    assert env.run([b.alter_table(3, t, counted)]) == []
    halt = env.state.halts()["ds2"]
    assert halt.event_id == 3 and "below no --source-prefix" in halt.cause, halt
    assert env.files() == {}


def test_the_timer_syncs_tables_replicated_by_state_without_an_external_base_dir(env: Env) -> None:
    t = _datasource(env, "ds3")
    assert env.run([b.create_db(1, "ds3"), b.create_table(2, t)]) == [1, 2]
    (env.src / "ds3.db/t/part-0.parquet").write_bytes(b"zero")
    paths = TargetPaths(str(env.wh))  # no --external-base-dir: only tables replicated by state
    undeclared = ExternalSync(env.catalog, paths, b.SOURCE_ID)
    report = undeclared.sync_once()
    assert report.copied == 0 and "--source-prefix" in report.failures[str(env.wh / "ds3.db/t")], report
    assert env.files() == {}
    copier = FileCopier(roots=paths.roots, sources=_declared(env.root))
    sync = ExternalSync(env.catalog, paths, b.SOURCE_ID, copier=copier)
    report = sync.sync_once()
    assert (report.copied, report.failures) == (1, {}), report
    assert env.files() == {"ds3.db/t/part-0.parquet": b"zero"}


def test_a_sync_reads_nothing_without_a_declared_prefix(tmp_path: Path) -> None:
    """A sync hashes what it copies itself: the record naming the directory vouches for nothing, so
    with no --source-prefix declared the database halts at the ALTER and nothing is read."""
    env = make_env(tmp_path)
    t = _datasource(env, "ds5")
    assert env.run([b.create_db(1, "ds5"), b.create_table(2, t)]) == [1, 2]
    (env.src / "ds5.db/t/part-0.parquet").write_bytes(b"zero")
    counted = dataclasses.replace(t, parameters={**t.parameters, "numFiles": "1"})
    assert env.run([b.alter_table(3, t, counted)]) == []
    halt = env.state.halts()["ds5"]
    assert halt.event_id == 3 and "--source-prefix" in halt.cause, halt
    assert env.files() == {}


@pytest.mark.parametrize("where", ["other.db/t", "ds6.db/../other.db/t", "x/OTHER.DB/t"])
def test_a_sync_never_reads_another_databases_directory_below_the_prefix(env: Env, where: str) -> None:
    """A policy that leaves a database out does not leave its directory out of a prefix holding it:
    a table of ``ds6`` whose location names ``other.db`` (or any ``<name>.db`` but its own) halts."""
    t = _datasource(env, "ds6")
    (env.src / "other.db/t").mkdir(parents=True)
    (env.src / "other.db/t/secret.parquet").write_bytes(b"not ds6's")
    (env.src / "x/OTHER.DB/t").mkdir(parents=True)
    elsewhere = f"file://{env.src}/{where}"
    serde = dataclasses.replace(t.sd.serde, parameters={"path": elsewhere})
    t = dataclasses.replace(t, sd=dataclasses.replace(t.sd, location=elsewhere, serde=serde))
    assert env.run([b.create_db(1, "ds6"), b.create_table(2, t)]) == [1, 2] or "ds6" in env.state.halts()
    counted = dataclasses.replace(t, parameters={**t.parameters, "numFiles": "1"})
    env.run([b.alter_table(3, t, counted)])
    assert "ds6" in env.state.halts()
    assert env.files() == {}


def test_a_partition_of_a_table_replicated_by_state_is_synced_when_its_statistics_change(env: Env) -> None:
    t = _datasource(env, "ds4")
    t = dataclasses.replace(t, partition_keys=[Column("dt", "string")])
    p = b.partition(t, "1")
    (env.src / "ds4.db/t/dt=1").mkdir()
    assert env.run([b.create_db(1, "ds4"), b.create_table(2, t), b.add_partition(3, t, [p])]) == [1, 2, 3]
    target = env.catalog.get_partition("ds4", "t", ["1"])
    assert target is not None and target.parameters[SOURCE_LOCATION_PARAM] == p.sd.location
    (env.src / "ds4.db/t/dt=1/part-0.parquet").write_bytes(b"zero")
    counted = dataclasses.replace(p, parameters={"numFiles": "1"})
    alter = b.event(4, EventType.ALTER_PARTITION, AlterPartitionPayload(t, p, counted), "ds4", "t")
    assert env.run([alter]) == [4]
    assert env.files() == {"ds4.db/t/dt=1/part-0.parquet": b"zero"}


def test_a_dropped_database_takes_its_tables_replicated_by_state_along(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Re-created under the same name, the database counts only its new tables, and warns anew."""
    from streamer.target.apply.by_state import REGISTRY

    t = _datasource(env, "ds9")
    assert env.run([b.create_db(1, "ds9"), b.create_table(2, t)]) == [1, 2]
    assert REGISTRY.tables("ds9") == {"t"}
    assert env.run([b.drop_table(3, t), b.drop_db(4, "ds9")]) == [3, 4]
    assert REGISTRY.tables("ds9") == frozenset()
    assert _gauge("ds9") is None  # the series went with the database
    caplog.clear()
    assert env.run([b.create_db(5, "ds9"), b.create_table(6, t)]) == [5, 6]
    assert _gauge("ds9") == 1
    assert [r for r in caplog.records if "replicated by state" in r.getMessage()]
