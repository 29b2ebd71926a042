"""The SQL locator's queries against a real Hive metastore schema: the embedded HMS (Hive 2.3) on
PostgreSQL creates its own tables (quoted upper-case identifiers); objects are made over Thrift and
the locator, reading the database read-only, must answer what the metastore's own ``get_table`` and
``get_partition`` answer."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
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
from streamer.metastore.thrift_catalog import HmsCatalog
from streamer.source.insert_files import locator_for
from streamer.source.reader import SqlNotificationReader
from streamer.source.sql_locator import SqlLocator

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
