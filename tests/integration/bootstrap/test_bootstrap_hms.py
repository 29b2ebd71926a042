"""Bootstrap of a real Hive Metastore: ``streamer bootstrap --hms-uri`` (the CLI, a child process) dumps
a source metastore (the embedded Hive 2.3 one on PostgreSQL, with real data files in its warehouse
dir) into the session's broker; ``streamer target run`` applies it to the target metastore; the
target equals the source (tables, partitions, file checksums, view text, statistics, constraints,
functions). Then an incremental change on the source, published by the agent through the Thrift
reader, reaches the target too.

Hive 2.3's embedded server has no DbNotificationListener (it lives in hcatalog, which PySpark does
not ship), so the test plays the listener: each change it makes over Thrift is logged as the row
Hive would write (``streamer.hive.encode``) into the metastore database's NOTIFICATION_LOG, with
NOTIFICATION_SEQUENCE moved on, which the server then serves over Thrift.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import (
    AddPartitionPayload,
    Column,
    ColumnStatistic,
    Constraint,
    DatabasePayload,
    DatabaseSnapshot,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    Payload,
    SerDe,
    Source,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.hive.encode import encode_event
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.thrift import HmsCatalog
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.enrich import EnrichSettings
from streamer.source.policy import PolicySet
from streamer.source.thrift_reader import ThriftNotificationReader
from tests.integration.target.helpers import STREAMER, TargetStack, target_files, wait_applied
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

COLUMNS = [Column("id", "bigint"), Column("name", "string")]
PARQUET = dict(
    input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    output_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    serde=SerDe(
        serialization_lib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
        parameters={"serialization.format": "1"},
    ),
)


@dataclass(frozen=True)
class _Topic:
    """What a target job needs of a source: its id and topic."""

    source_id: str
    topic: str


class HiveSource:
    """A source metastore the test changes over Thrift, logging each change as Hive's listener would."""

    def __init__(self, hms: EmbeddedMetastore, source_id: str) -> None:
        import psycopg

        self.hms = hms
        self.source_id = source_id
        self.catalog = HmsCatalog(hms.uri)
        self.catalog.current_notification_event_id()  # makes DataNucleus create its notification tables
        jdbc = hms._settings.jdbc_url  # the fixture's database; the server exposes no public accessor
        conninfo = "postgresql://" + jdbc.split("//", 1)[1].split("?")[0] + f"?user={hms._settings.jdbc_user}"
        self.db = psycopg.connect(conninfo, autocommit=True)

    def close(self) -> None:
        self.catalog.close()
        self.db.close()

    def log(self, event_type: EventType, payload: Payload, db: str, table: str | None = None) -> int:
        """Append the change's notification row; returns its event id."""
        with self.db.transaction():
            self.db.execute('LOCK TABLE "NOTIFICATION_LOG" IN EXCLUSIVE MODE')
            last_row = self.db.execute(
                'SELECT COALESCE(MAX("EVENT_ID"), 0), COALESCE(MAX("NL_ID"), 0) FROM "NOTIFICATION_LOG"'
            ).fetchone()
            seq = self.db.execute('SELECT "NEXT_EVENT_ID" FROM "NOTIFICATION_SEQUENCE"').fetchone()
            assert last_row is not None
            event_id = max(int(last_row[0]), (int(seq[0]) - 1) if seq else 0) + 1
            event = Event(Source(self.source_id, event_id, int(time.time())), event_type, payload, db, table)
            row = encode_event(event)
            self.db.execute(
                'INSERT INTO "NOTIFICATION_LOG" ("NL_ID", "EVENT_ID", "EVENT_TIME", "EVENT_TYPE", "DB_NAME", '
                '"TBL_NAME", "MESSAGE", "MESSAGE_FORMAT") VALUES (%s, %s, %s, %s, %s, %s, %s, %s)',
                (
                    int(last_row[1]) + 1,
                    event_id,
                    row.event_time,
                    row.event_type,
                    row.db_name,
                    row.table_name,
                    row.message,
                    row.message_format,
                ),
            )
            if seq is None:
                self.db.execute(
                    'INSERT INTO "NOTIFICATION_SEQUENCE" ("NNI_ID", "NEXT_EVENT_ID") VALUES (1, %s)',
                    (event_id + 1,),
                )
            else:
                self.db.execute('UPDATE "NOTIFICATION_SEQUENCE" SET "NEXT_EVENT_ID" = %s', (event_id + 1,))
        assert self.catalog.current_notification_event_id() == event_id
        return event_id

    # --- changes ----------------------------------------------------------------------------

    def location(self, *parts: str) -> str:
        return "file://" + str(Path(self.hms.warehouse_dir, *parts))  # not as_uri(): keeps dt=... literal

    def create_database(self, name: str) -> int:
        snap = DatabaseSnapshot(
            name, "bootstrapped from Hive", self.location(f"{name}.db"), {"owner.team": "fin"}
        )
        self.catalog.create_database(snap)
        return self.log(EventType.CREATE_DATABASE, DatabasePayload(self.catalog.get_database(name)), name)

    def create_table(self, db: str, name: str, keys: list[Column] | None = None, **kw: Any) -> TableSnapshot:
        sd = StorageDescriptor(location=self.location(f"{db}.db", name), columns=COLUMNS, **PARQUET)
        self.catalog.create_table(TableSnapshot(name, db, sd=sd, partition_keys=keys or [], **kw))
        table = self.catalog.get_table(db, name)
        assert table is not None
        return table

    def add_partition(self, table: TableSnapshot, value: str) -> PartitionSnapshot:
        assert table.sd.location
        sd = dataclasses.replace(table.sd, location=f"{table.sd.location}/dt={value}")
        self.catalog.add_partitions(
            table.db, table.name, [PartitionSnapshot([value], table.db, table.name, sd)]
        )
        part = self.catalog.get_partition(table.db, table.name, [value])
        assert part is not None
        return part


def write_parquet(location: str, name: str, first: int, rows: int = 3) -> Path:
    directory = _local(location)
    directory.mkdir(parents=True, exist_ok=True)
    data = pa.table(
        {
            "id": pa.array(range(first, first + rows), pa.int64()),
            "name": [f"n{i}" for i in range(first, first + rows)],
        }
    )
    path = directory / name
    pq.write_table(data, path)
    return path


def hidden_litter(location: str) -> None:
    """What Hive leaves next to data files, which its readers (and a dump) skip."""
    directory = _local(location)
    (directory / "_SUCCESS").write_bytes(b"")
    (directory / ".000000_0.crc").write_bytes(b"crc")
    (directory / ".hive-staging_hive_1").mkdir(exist_ok=True)
    (directory / ".hive-staging_hive_1" / "000000_0").write_bytes(b"half-written")


@pytest.fixture
def hive(hms_postgres: EmbeddedMetastore, prefix: str) -> Iterator[HiveSource]:
    source = HiveSource(hms_postgres, f"hive-{prefix.rstrip('_')}")
    try:
        yield source
    finally:
        source.close()


def _history(hive: HiveSource, prefix: str) -> tuple[list[str], TableSnapshot]:
    """Two databases: partitioned and unpartitioned tables with data (and litter), a view, a function,
    table- and partition-level column statistics and a primary key."""
    dbs = [f"{prefix}sales", f"{prefix}hr"]
    for db in dbs:
        hive.create_database(db)
    sales, hr = dbs
    plain = hive.create_table(sales, "orders")
    assert plain.sd.location
    write_parquet(plain.sd.location, "000000_0", 0)
    write_parquet(plain.sd.location, "000001_0", 10)
    write_parquet(plain.sd.location + "/HIVE_UNION_SUBDIR_1", "000000_0", 20)  # a visible subdirectory
    hidden_litter(plain.sd.location)
    days = hive.create_table(sales, "daily", [Column("dt", "string")])
    for i, day in enumerate(["2024-01-01", "2024-01-02", "2024-01-03"]):
        part = hive.add_partition(days, day)
        assert part.sd.location
        write_parquet(part.sd.location, "000000_0", 100 * i)
        hidden_litter(part.sd.location)
    hive.add_partition(days, "2024-01-04")  # an empty partition
    for i, day in enumerate(["2024-01-01", "2024-01-03"]):  # 2 partitions a record: in TABLE and PARTITIONS
        hive.catalog.update_column_statistics(
            sales,
            "daily",
            [day],
            [
                ColumnStatistic(
                    "id", "bigint", "LONG", num_nulls=0, num_distinct=3, low_value=str(100 * i),
                    high_value=str(100 * i + 2),
                ),
                ColumnStatistic("name", "string", "STRING", num_nulls=i, num_distinct=3, avg_length=2.0 + i,
                                max_length=4),
            ],
        )
    people = hive.create_table(hr, "people", table_type="EXTERNAL_TABLE", parameters={"EXTERNAL": "TRUE"})
    assert people.sd.location
    write_parquet(people.sd.location, "part-0.parquet", 7)
    view_sql = f"SELECT id, name FROM {sales}.orders WHERE id > 3"
    hive.catalog.create_table(
        TableSnapshot(
            "big_orders",
            sales,
            "VIRTUAL_VIEW",
            StorageDescriptor(columns=COLUMNS),
            view_original_text=view_sql,
            view_expanded_text=view_sql.replace("SELECT id, name", "SELECT `orders`.`id`, `orders`.`name`"),
        )
    )
    hive.catalog.create_function(
        FunctionSnapshot("mask", sales, "com.example.udf.Mask", owner_name="hive", owner_type=1)
    )
    hive.catalog.update_column_statistics(
        sales,
        "orders",
        None,
        [
            ColumnStatistic(
                "id", "bigint", "LONG", num_nulls=0, num_distinct=9, low_value="0", high_value="22"
            ),
            ColumnStatistic(
                "name", "string", "STRING", num_nulls=0, num_distinct=9, avg_length=2.7, max_length=3
            ),
        ],
    )
    hive.catalog.add_constraints([Constraint("PRIMARY_KEY", "pk_orders", sales, "orders", "id")])
    return dbs, days


def _bootstrap_cli(broker: EmbeddedBroker, hive: HiveSource, topic: str, prefix: str) -> str:
    cmd = [
        STREAMER,
        "bootstrap",
        "--source-id",
        hive.source_id,
        "--hms-uri",
        hive.hms.uri,
        "--policy",
        f"`{prefix}.*`",
        "--bootstrap-servers",
        broker.bootstrap_servers,
        "--topic",
        topic,
        "--records-per-transaction",
        "2",
        "--partitions-per-record",
        "2",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


_VOLATILE = (
    "transient_",
    "repl.",
    "streamer.",
    "numFiles",
    "totalSize",
    "numRows",
    "rawDataSize",
    "COLUMN_STATS",
)


def _params(params: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in params.items() if not k.startswith(_VOLATILE)}


def assert_target_equals_source(src: HmsCatalog, tgt: HmsCatalog, dbs: list[str]) -> int:
    """Every object of ``dbs`` reads back equal; returns the number of data files compared."""
    files = 0
    for db in dbs:
        s_db, t_db = src.get_database(db), tgt.get_database(db)
        assert s_db is not None and t_db is not None, db
        assert _params(t_db.parameters) == _params(s_db.parameters), db
        assert sorted(tgt.list_tables(db)) == sorted(src.list_tables(db)), f"tables of {db}"
        for name in src.list_tables(db):
            what = f"{db}.{name}"
            s, t = src.get_table(db, name), tgt.get_table(db, name)
            assert s is not None and t is not None, what
            assert (t.table_type, t.sd.columns, t.partition_keys) == (
                s.table_type,
                s.sd.columns,
                s.partition_keys,
            )
            assert _params(t.parameters) == _params(s.parameters), what
            assert (t.view_original_text, t.view_expanded_text) == (
                s.view_original_text,
                s.view_expanded_text,
            )
            if s.table_type == "VIRTUAL_VIEW":
                continue
            assert sorted(p.values for p in tgt.list_partitions(db, name)) == sorted(
                p.values for p in src.list_partitions(db, name)
            ), what
            want, got = target_files(src, db, name), target_files(tgt, db, name)
            assert got == want, f"files of {what}: only source {want - got}, only target {got - want}"
            files += sum(want.values())
            cols = [c.name for c in s.sd.columns]
            assert tgt.get_column_statistics(db, name, None, cols) == src.get_column_statistics(
                db, name, None, cols
            )
            for part in src.list_partitions(db, name):
                assert tgt.get_column_statistics(db, name, part.values, cols) == src.get_column_statistics(
                    db, name, part.values, cols
                ), f"column statistics of {what} partition {part.values}"
            assert tgt.get_constraints(db, name) == src.get_constraints(db, name), what
        for fn in src.list_functions(db):
            s_fn, t_fn = src.get_function(db, fn), tgt.get_function(db, fn)
            assert t_fn is not None and s_fn is not None, f"function {db}.{fn}"
            assert (t_fn.class_name, t_fn.resource_uris) == (s_fn.class_name, s_fn.resource_uris)
        assert sorted(tgt.list_functions(db)) == sorted(src.list_functions(db))
    return files


def _local(location: str | None) -> Path:
    assert location
    return Path(unquote(urlsplit(location).path))


def test_bootstrap_of_a_hive_metastore_then_incremental_events(
    broker: EmbeddedBroker,
    spark: SparkSession,
    hive: HiveSource,
    topic: str,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    prefix: str,
) -> None:
    dbs, days = _history(hive, prefix)
    sales = dbs[0]
    out = _bootstrap_cli(broker, hive, topic, prefix)
    e1 = hive.catalog.current_notification_event_id()
    assert f"as of event {e1}:" in out, out
    assert "2 databases, 4 tables, 4 partitions" in out, out

    job = TargetInProcess(
        target_stack, broker.bootstrap_servers, cast(Any, _Topic(hive.source_id, topic)),
        spark=spark,
    ).start()
    target_jobs.append(job)
    wait_applied(job, target_stack, {db: e1 for db in dbs}, timeout=400)
    with target_stack.catalog() as tgt:
        files = assert_target_equals_source(hive.catalog, tgt, dbs)
        assert files == 2 + 3 + 1, files  # top-level data files; litter and staging dirs stayed behind
        orders = tgt.get_table(sales, "orders")
        assert orders is not None
        copied = _local(orders.sd.location)
        assert (copied / "HIVE_UNION_SUBDIR_1" / "000000_0").is_file()
        assert not any(p.name.startswith(("_", ".")) for p in copied.rglob("*")), sorted(copied.rglob("*"))
        assert tgt.get_column_statistics(sales, "orders", None, ["id"]), "statistics were not replicated"
        for day in ["2024-01-01", "2024-01-03"]:
            got = tgt.get_column_statistics(sales, "daily", [day], ["id", "name"])
            assert [st.column for st in got] == ["id", "name"], f"partition {day}: {got}"
        assert [c.name for c in tgt.get_constraints(sales, "orders")] == ["pk_orders"]

    # incremental: a new partition with a file, logged as Hive logs it, published by the agent
    part = hive.add_partition(days, "2024-01-05")
    assert part.sd.location
    path = write_parquet(part.sd.location, "000000_0", 500)
    ref = FileRef(uri="file://" + str(path), partition="dt=2024-01-05")
    e2 = hive.log(EventType.ADD_PARTITION, AddPartitionPayload(days, [part], [ref]), sales, "daily")
    publish_after_bootstrap(hive, broker, topic, prefix, after=e1, until=e2)
    wait_applied(job, target_stack, {sales: e2}, timeout=300)
    with target_stack.catalog() as tgt:
        assert assert_target_equals_source(hive.catalog, tgt, dbs) == files + 1


def publish_after_bootstrap(
    hive: HiveSource, broker: EmbeddedBroker, topic: str, prefix: str, *, after: int, until: int
) -> None:
    """The agent, on the source's Thrift log, publishes the events after the bootstrap's ``after``
    through ``until``."""
    config = AgentConfig(hive.source_id, broker.client_settings(), topic=topic, poll_interval=0.05,
                         gap_settle_seconds=0.5, enrich=EnrichSettings())
    agent = SourceAgent(config, ThriftNotificationReader(hive.hms.uri), PolicySet.parse([f"`{prefix}.*`"]))
    try:
        agent.start()
        assert agent.last_id == after  # continues after the bootstrap
        agent.run(once=True)
        assert agent.last_id == until
    finally:
        agent.close()
        agent.reader.close()
