"""The SQL locator's queries against a real Hive metastore schema: the embedded HMS (Hive 2.3) on
PostgreSQL creates its own tables (quoted upper-case identifiers); objects are made over Thrift and
the locator, reading the database read-only, must answer what the metastore's own ``get_table`` and
``get_partition`` answer."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import (
    Column,
    DatabaseSnapshot,
    PartitionSnapshot,
    SerDe,
    SortColumn,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.metastore.thrift import HmsCatalog
from streamer.source.insert_files import locator_for
from streamer.source.reader import SqlNotificationReader
from streamer.source.source_db import SourceDatabaseError
from streamer.source.sql_locator import SqlLocator
from tests.integration.source.test_sql_reader import _open
from tests.unit.source.logdb import LogDb, sqlite_logdb

pytestmark = pytest.mark.integration

PARQUET = SerDe("ser", "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                {"serialization.format": "1"})


def pg_url(hms: EmbeddedMetastore) -> str:
    """The metastore's database as ``--notification-db`` names it."""
    settings: Any = hms._settings  # the fixture's database; the server exposes no public accessor
    return "postgresql://" + settings.jdbc_url.split("//", 1)[1].split("?")[0] + f"?user={settings.jdbc_user}"


@pytest.fixture
def made(hms_postgres: EmbeddedMetastore) -> Iterator[tuple[HmsCatalog, str]]:
    catalog = HmsCatalog(hms_postgres.uri)
    db = f"loc_{uuid.uuid4().hex[:8]}"
    location = (hms_postgres.warehouse_dir / f"{db}.db").as_uri()
    catalog.create_database(DatabaseSnapshot(name=db, location=location))
    try:
        yield catalog, db
    finally:
        catalog.drop_database(db)
        catalog.close()


def _sd(location: str | None) -> StorageDescriptor:
    return StorageDescriptor(
        location=location, columns=[Column("id", "bigint", "the key"), Column("s", "string")],
        input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        output_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        num_buckets=4, serde=PARQUET, bucket_columns=["id"], sort_columns=[SortColumn("id", 1)],
        parameters={"sd.param": "x"},
    )


def test_the_locator_answers_as_the_metastore_does(hms_postgres: EmbeddedMetastore,
                                                    made: tuple[HmsCatalog, str]) -> None:
    catalog, db = made
    base = hms_postgres.warehouse_dir / f"{db}.db"
    table = TableSnapshot(
        name="events", db=db, sd=_sd((base / "events").as_uri()),
        partition_keys=[Column("dt", "string", "day"), Column("region", "string")],
        parameters={"transactional": "false", "owner.note": "kept"}, owner="alice", last_access_time=0,
        retention=0,
    )
    catalog.create_table(table)
    odd = ["2024-01-01 10:00", "eu/west"]  # Hive escapes ':' and '/' in the partition's name
    catalog.add_partitions(db, "events", [
        PartitionSnapshot(["2024-01-01", "eu"], db, "events", sd=_sd(None), parameters={"p": "1"}),
        PartitionSnapshot(odd, db, "events", sd=_sd((base / "elsewhere").as_uri())),
    ])
    catalog.create_table(TableSnapshot(name="ext", db=db, table_type="EXTERNAL_TABLE",
                                       sd=_sd((base / "ext").as_uri()), parameters={"EXTERNAL": "TRUE"}))
    locator = SqlLocator(pg_url(hms_postgres))
    try:
        for name in ("events", "ext"):
            expected = catalog.get_table(db, name)
            got = locator.table(db, name.upper())  # Hive keeps names lower case; the log may not
            assert expected is not None and got is not None and got.create_time
            assert got == dataclasses.replace(expected, owner_type=got.owner_type, catalog=got.catalog,
                                              rewrite_enabled=got.rewrite_enabled,
                                              temporary=got.temporary), (got, expected)
        assert locator.table(db, "events").is_transactional is False  # type: ignore[union-attr]
        for values in (["2024-01-01", "eu"], odd):
            expected_part = catalog.get_partition(db, "events", values)
            got_part = locator.partition(db, "events", values)
            assert expected_part is not None and got_part is not None
            assert got_part == dataclasses.replace(expected_part, catalog=got_part.catalog), (got_part,
                                                                                              expected_part)
        assert str(got_part.sd.location).rstrip("/").endswith("/elsewhere"), got_part
        assert locator.table(db, "missing") is None and locator.table("no_such_db", "events") is None
        assert locator.partition(db, "events", ["2024-01-02", "eu"]) is None
        assert locator.partition(db, "events", ["2024-01-01"]) is None  # values that fit no partition
        assert locator.partition(db, "missing", ["1"]) is None
    finally:
        locator.close()


def test_an_agent_on_the_metastore_database_locates_through_it(hms_postgres: EmbeddedMetastore) -> None:
    reader = SqlNotificationReader(pg_url(hms_postgres))
    locator = locator_for(reader)
    assert isinstance(locator, SqlLocator)
    try:
        assert locator.table("default", "no_such_table") is None  # Hive's schema recognised, read
    finally:
        locator.close()
        reader.close()


# --- the same queries on MySQL/MariaDB, sqlite and PostgreSQL, over Hive 2.3's column types ---------

LAZY = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
BIT = {"mysql": "BIT(1)", "sqlite": "CHAR(1)", "postgresql": "BOOLEAN"}  # sqlite: Derby's 'Y'/'N'


def _hive_ddl(backend: str) -> list[str]:
    """The tables the locator reads, with the column types of Hive 2.3's schema script (backquotes
    become each backend's identifier quote)."""
    text, bit = ("MEDIUMTEXT" if backend == "mysql" else "TEXT"), BIT[backend]
    params = f"`PARAM_KEY` VARCHAR(256) NOT NULL, `PARAM_VALUE` {text}"
    return [
        "CREATE TABLE `DBS` (`DB_ID` BIGINT NOT NULL, `DESC` VARCHAR(4000), `DB_LOCATION_URI` VARCHAR(4000), "
        "`NAME` VARCHAR(128), `OWNER_NAME` VARCHAR(128), `OWNER_TYPE` VARCHAR(10), PRIMARY KEY (`DB_ID`))",
        "CREATE TABLE `TBLS` (`TBL_ID` BIGINT NOT NULL, `CREATE_TIME` INTEGER NOT NULL, `DB_ID` BIGINT, "
        "`LAST_ACCESS_TIME` INTEGER NOT NULL, `OWNER` VARCHAR(767), `RETENTION` INTEGER NOT NULL, "
        "`SD_ID` BIGINT, `TBL_NAME` VARCHAR(256), `TBL_TYPE` VARCHAR(128), "
        f"`VIEW_EXPANDED_TEXT` {text}, `VIEW_ORIGINAL_TEXT` {text}, `IS_REWRITE_ENABLED` {bit}, "
        "PRIMARY KEY (`TBL_ID`))",
        "CREATE TABLE `SDS` (`SD_ID` BIGINT NOT NULL, `CD_ID` BIGINT, `INPUT_FORMAT` VARCHAR(4000), "
        f"`IS_COMPRESSED` {bit} NOT NULL, `IS_STOREDASSUBDIRECTORIES` {bit} NOT NULL, "
        "`LOCATION` VARCHAR(4000), `NUM_BUCKETS` INTEGER NOT NULL, `OUTPUT_FORMAT` VARCHAR(4000), "
        "`SERDE_ID` BIGINT, PRIMARY KEY (`SD_ID`))",
        "CREATE TABLE `SERDES` (`SERDE_ID` BIGINT NOT NULL, `NAME` VARCHAR(128), `SLIB` VARCHAR(4000), "
        "PRIMARY KEY (`SERDE_ID`))",
        f"CREATE TABLE `SERDE_PARAMS` (`SERDE_ID` BIGINT NOT NULL, {params})",
        f"CREATE TABLE `SD_PARAMS` (`SD_ID` BIGINT NOT NULL, {params})",
        f"CREATE TABLE `TABLE_PARAMS` (`TBL_ID` BIGINT NOT NULL, {params})",
        f"CREATE TABLE `PARTITION_PARAMS` (`PART_ID` BIGINT NOT NULL, {params})",
        "CREATE TABLE `COLUMNS_V2` (`CD_ID` BIGINT NOT NULL, `COMMENT` VARCHAR(256), "
        f"`COLUMN_NAME` VARCHAR(767) NOT NULL, `TYPE_NAME` {text}, `INTEGER_IDX` INTEGER NOT NULL)",
        "CREATE TABLE `PARTITION_KEYS` (`TBL_ID` BIGINT NOT NULL, `PKEY_COMMENT` VARCHAR(4000), "
        "`PKEY_NAME` VARCHAR(128) NOT NULL, `PKEY_TYPE` VARCHAR(767) NOT NULL, "
        "`INTEGER_IDX` INTEGER NOT NULL)",
        "CREATE TABLE `PARTITIONS` (`PART_ID` BIGINT NOT NULL, `CREATE_TIME` INTEGER NOT NULL, "
        "`LAST_ACCESS_TIME` INTEGER NOT NULL, `PART_NAME` VARCHAR(767), `SD_ID` BIGINT, `TBL_ID` BIGINT, "
        "PRIMARY KEY (`PART_ID`))",
        "CREATE TABLE `PARTITION_KEY_VALS` (`PART_ID` BIGINT NOT NULL, `PART_KEY_VAL` VARCHAR(256), "
        "`INTEGER_IDX` INTEGER NOT NULL)",
        "CREATE TABLE `BUCKETING_COLS` (`SD_ID` BIGINT NOT NULL, `BUCKET_COL_NAME` VARCHAR(256), "
        "`INTEGER_IDX` INTEGER NOT NULL)",
        "CREATE TABLE `SORT_COLS` (`SD_ID` BIGINT NOT NULL, `COLUMN_NAME` VARCHAR(767), "
        "`ORDER` INTEGER NOT NULL, `INTEGER_IDX` INTEGER NOT NULL)",
    ]


def _rows(backend: str) -> list[tuple[str, tuple[object, ...]]]:
    """A Hive 2.3 database as the metastore writes it: db ``sales``, table ``t`` partitioned by
    ``dt``, one partition with an escaped name (``dt=a%3Ab``, values ``a:b``)."""
    yes, no = (("Y", "N") if backend == "sqlite" else (True, False) if backend == "postgresql" else (1, 0))
    return [
        ("INSERT INTO `DBS` VALUES (?, ?, ?, ?, ?, ?)",
         (1, None, "file:/wh/sales.db", "sales", "hive", "USER")),
        ("INSERT INTO `SERDES` VALUES (?, ?, ?)", (10, None, LAZY)),
        ("INSERT INTO `SERDE_PARAMS` VALUES (?, ?, ?)", (10, "serialization.format", "1")),
        ("INSERT INTO `SERDES` VALUES (?, ?, ?)", (11, None, LAZY)),
        ("INSERT INTO `SDS` VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
         (20, 30, "org.apache.hadoop.mapred.TextInputFormat", no, no, "file:/wh/sales.db/t", -1,
          "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat", 10)),
        ("INSERT INTO `SDS` VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
         (21, 30, "org.apache.hadoop.mapred.TextInputFormat", yes, no, "file:/wh/sales.db/t/dt=a%3Ab", -1,
          "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat", 11)),
        ("INSERT INTO `COLUMNS_V2` VALUES (?, ?, ?, ?, ?)", (30, None, "s", "string", 1)),
        ("INSERT INTO `COLUMNS_V2` VALUES (?, ?, ?, ?, ?)", (30, "the key", "id", "bigint", 0)),
        ("INSERT INTO `TBLS` VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
         (40, 1700000000, 1, 0, "alice", 0, 20, "t", "MANAGED_TABLE", None, None, no)),
        ("INSERT INTO `TABLE_PARAMS` VALUES (?, ?, ?)", (40, "transactional", "false")),
        ("INSERT INTO `TABLE_PARAMS` VALUES (?, ?, ?)", (40, "numFiles", "2")),
        ("INSERT INTO `PARTITION_KEYS` VALUES (?, ?, ?, ?, ?)", (40, None, "dt", "string", 0)),
        ("INSERT INTO `PARTITIONS` VALUES (?, ?, ?, ?, ?, ?)", (50, 1700000100, 0, "dt=a%3Ab", 21, 40)),
        ("INSERT INTO `PARTITION_KEY_VALS` VALUES (?, ?, ?)", (50, "a:b", 0)),
        ("INSERT INTO `PARTITION_PARAMS` VALUES (?, ?, ?)", (50, "numRows", "3")),
    ]


@pytest.fixture(params=["sqlite", "mysql", "postgresql"])
def hive_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, LogDb]]:
    with _open(request.param, tmp_path, cat_name=False) as db:
        for stmt in _hive_ddl(request.param):
            db.execute(stmt)
        for stmt, args in _rows(request.param):
            db.execute(stmt, args)
        yield request.param, db


def test_the_locator_reads_hive_2_3s_schema_on_each_backend(hive_db: tuple[str, LogDb]) -> None:
    _, db = hive_db
    locator = locator_for(SqlNotificationReader(db.url))
    assert isinstance(locator, SqlLocator)
    try:
        table = locator.table("Sales", "T")
        assert table == TableSnapshot(
            name="t", db="sales", sd=StorageDescriptor(
                location="file:/wh/sales.db/t",
                columns=[Column("id", "bigint", "the key"), Column("s", "string")],
                input_format="org.apache.hadoop.mapred.TextInputFormat",
                output_format="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                serde=SerDe(None, LAZY, {"serialization.format": "1"})),
            partition_keys=[Column("dt", "string")], parameters={"transactional": "false", "numFiles": "2"},
            owner="alice", create_time=1700000000, last_access_time=0, retention=0,
        ), table
        part = locator.partition("sales", "t", ["a:b"])
        assert part is not None and part.sd.location == "file:/wh/sales.db/t/dt=a%3Ab" and part.sd.compressed
        assert (part.values, part.db, part.table, part.parameters, part.create_time) == (
            ["a:b"], "sales", "t", {"numRows": "3"}, 1700000100)
        assert locator.partition("sales", "t", ["a"]) is None and locator.table("sales", "u") is None
    finally:
        locator.close()


def test_the_locator_reads_the_bundled_warehouse(tmp_path: Path) -> None:
    from streamer.warehouse import Warehouse

    wh = Warehouse.open(str(tmp_path / "m.sqlite"), root=tmp_path / "wh", cmroot=tmp_path / "cm")
    try:
        wh.create_database("sales")
        made = wh.create_table("sales", "t", [Column("id", "bigint")], [Column("dt", "string")])
        wh.add_partitions("sales", "t", [{"dt": "a:b"}])
        expected = wh.partition_snapshots("sales", "t")[0]
        locator = SqlLocator(str(tmp_path / "m.sqlite"))
        try:
            assert locator.table("sales", "t") == wh.table("sales", "t") and made.name == "t"
            assert locator.partition("sales", "t", ["a:b"]) == expected
            assert locator.partition("sales", "t", ["x"]) is None and locator.table("sales", "u") is None
        finally:
            locator.close()
    finally:
        wh.close()


def test_a_database_with_neither_schema_is_an_error_not_a_dropped_table(tmp_path: Path) -> None:
    with sqlite_logdb(str(tmp_path / "log.db")) as db:
        locator = SqlLocator(db.url)
        with pytest.raises(SourceDatabaseError, match="neither Hive's TBLS"):
            locator.table("sales", "t")
        locator.close()
