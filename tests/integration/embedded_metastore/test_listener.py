"""streamer's notification listener in the embedded metastore (Hive 2.3 from PySpark's jars).

Changes made over Thrift (database, table, partitions, alter, drop, a function, and an INSERT fired
with ``fire_listener_event``) land in the server's own NOTIFICATION_LOG, in order, with dense ids,
as json-0.2 messages that streamer's decoder reads; the agent (``ThriftNotificationReader``)
publishes them to a topic.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as tt

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import (
    AddPartitionPayload,
    AlterTablePayload,
    Column,
    CreateFunctionPayload,
    CreateTablePayload,
    DatabasePayload,
    DatabaseSnapshot,
    DropFunctionPayload,
    DropPartitionPayload,
    DropTablePayload,
    EventType,
    FunctionSnapshot,
    InsertPayload,
    PartitionSnapshot,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.hive.decode import decode_row
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.thrift import HmsCatalog
from streamer.metastore.transport import open_client
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.thrift_reader import ThriftNotificationReader
from tests.integration.source.test_agent import topic_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def fire_insert(uri: str, db: str, table: str, files: list[str], partition: list[str] | None = None) -> None:
    """What a writer (Hive, Spark with dml events) tells the metastore after adding data files."""
    client = open_client(uri, timeout_s=30)
    assert client._iprot._fast_encode is not None  # Thrift's C codec, as every streamer client
    try:
        client.fire_listener_event(tt.FireEventRequest(
            successful=True, dbName=db, tableName=table, partitionVals=partition,
            data=tt.FireEventRequestData(insertData=tt.InsertEventRequestData(filesAdded=files))))
    finally:
        client.close()


def test_thrift_changes_reach_the_log_decodable_and_published(
    hms_notifying: EmbeddedMetastore, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    uri = hms_notifying.uri
    db = f"lsn_{tmp_path.name[-8:].lower().replace('-', '_')}"
    loc = tmp_path / "data"
    part_dir = loc / "dt=2024-01-01"
    part_dir.mkdir(parents=True)
    (part_dir / "part-0.parquet").write_bytes(b"p0")
    (part_dir / "_SUCCESS").write_bytes(b"")  # hidden: not listed
    reader = ThriftNotificationReader(uri)
    catalog = HmsCatalog(uri)  # (locations as file:// + path: Path.as_uri() escapes the '=' of k=v)
    try:
        base = reader.head_event_id()
        cols = [Column("id", "bigint"), Column("name", "string")]
        table = TableSnapshot(name="t", db=db, table_type="EXTERNAL_TABLE", parameters={"EXTERNAL": "TRUE"},
                              sd=StorageDescriptor(location=loc.as_uri(), columns=cols),
                              partition_keys=[Column("dt", "string")])
        catalog.create_database(DatabaseSnapshot(name=db, location=(tmp_path / "db").as_uri()))
        catalog.create_table(table)
        catalog.add_partitions(db, "t", [PartitionSnapshot(values=["2024-01-01"], sd=StorageDescriptor(
            location=f"file://{part_dir}", columns=cols))])
        new_file = part_dir / "part-1.parquet"
        new_file.write_bytes(b"p1")
        fire_insert(uri, db, "t", [f"file://{new_file}"], ["2024-01-01"])
        altered = dataclasses.replace(table, parameters={"EXTERNAL": "TRUE", "note": "x"})
        catalog.alter_table(db, "t", altered)
        catalog.create_function(FunctionSnapshot(name="f", db=db, class_name="com.example.F"))
        catalog.drop_partitions(db, "t", [["2024-01-01"]])
        catalog.drop_function(db, "f")
        catalog.drop_table(db, "t")
        catalog.drop_database(db)
        rows = reader.read_after(base, 100)
    finally:
        catalog.close()
        reader.close()

    # one row per change, dense ids, in order, json-0.2, named by db/table
    types = [r.event_type for r in rows]
    assert types == ["CREATE_DATABASE", "CREATE_TABLE", "ADD_PARTITION", "INSERT", "ALTER_TABLE",
                     "CREATE_FUNCTION", "DROP_PARTITION", "DROP_FUNCTION", "DROP_TABLE",
                     "DROP_DATABASE"], types
    assert [r.event_id for r in rows] == list(range(base + 1, base + 11))
    assert {r.message_format for r in rows} == {"json-0.2"}
    assert all(r.db_name == db for r in rows)
    assert [r.table_name for r in rows[1:5]] == ["t"] * 4 and rows[0].table_name in (None, "")

    events = [decode_row(r, "a") for r in rows]
    assert [e.event_type for e in events] == [EventType(t) for t in types]
    created_db = events[0].payload
    assert isinstance(created_db, DatabasePayload) and events[0].db == db
    assert created_db.database is None  # Hive 2.3's CREATE_DATABASE message names the database only
    created = events[1].payload
    assert isinstance(created, CreateTablePayload)
    assert created.table.sd.columns == cols and [c.name for c in created.table.partition_keys] == ["dt"]
    added = events[2].payload
    assert isinstance(added, AddPartitionPayload) and added.partitions[0].values == ["2024-01-01"]
    assert [f.uri.rsplit("/", 1)[-1] for f in added.files] == ["part-0.parquet"]
    assert added.files[0].partition == "dt=2024-01-01"
    inserted = events[3].payload
    assert isinstance(inserted, InsertPayload) and inserted.partition_values == ["2024-01-01"]
    assert [f.uri for f in inserted.files] == [f"file://{new_file}"] and not inserted.replace
    alter = events[4].payload
    assert isinstance(alter, AlterTablePayload) and alter.after.parameters.get("note") == "x"
    assert "note" not in alter.before.parameters
    fn = events[5].payload
    assert isinstance(fn, CreateFunctionPayload) and fn.function.class_name == "com.example.F"
    dropped = events[6].payload
    assert isinstance(dropped, DropPartitionPayload) and dropped.partition_values == [["2024-01-01"]]
    assert isinstance(events[7].payload, DropFunctionPayload) and events[7].payload.function_name == "f"
    assert isinstance(events[8].payload, DropTablePayload) and events[8].table == "t"
    assert isinstance(events[9].payload, DatabasePayload) and events[9].db == db

    # the agent publishes them
    config = broker.client_settings()
    topic = f"streamer.lsn.{db}"
    agent = SourceAgent(AgentConfig("lsn", config, topic=topic, start_after=base, gap_settle_seconds=0.5),
                        ThriftNotificationReader(uri))
    try:
        agent.run(once=True)
    finally:
        agent.close()
        agent.reader.close()
    published: list[Any] = [e for e in topic_events(config, topic) if e.event_type != EventType.PROGRESS]
    mine = [e for e in published if e.db == db]
    assert [e.event_type.value for e in mine] == types
    assert [e.event_id for e in mine] == [r.event_id for r in rows]
    assert all(f.checksum for e in mine if isinstance(e.payload, InsertPayload) for f in e.payload.files)


def test_failed_change_logs_nothing(hms_notifying: EmbeddedMetastore) -> None:
    """A change the metastore refuses is not logged (the event is in the change's transaction)."""
    reader = ThriftNotificationReader(hms_notifying.uri)
    catalog = HmsCatalog(hms_notifying.uri)
    try:
        base = reader.head_event_id()
        with pytest.raises(Exception):  # noqa: B017 - the table's database does not exist
            catalog.create_table(TableSnapshot(name="t", db="no_such_db_here", table_type="MANAGED_TABLE",
                                               sd=StorageDescriptor(columns=[Column("id", "int")])))
        assert reader.head_event_id() == base and reader.read_after(base, 10) == []
    finally:
        catalog.close()
        reader.close()
