"""Unknown event types and other metastore catalogs, from a notification row to what the agent
publishes: opaque ``UNKNOWN`` events that survive the wire unchanged, catalog-level ones passed over
with a metric, other catalogs filtered, and the event chain (``prev_event_id``) through all of them."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from fastavro import schemaless_writer
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import UnknownEventTypeError
from streamer.events.avro import to_avro
from streamer.events.codec import SINGLE_OBJECT_MARKER, EventSerializer, decode_event, encode_event
from streamer.events.model import (
    DatabasePayload,
    DatabaseSnapshot,
    Event,
    EventType,
    OpenTxnPayload,
    Source,
    UnknownPayload,
)
from streamer.events.schemas import WriterSchema, schemas_dir
from streamer.hive.decode import decode_row, is_known_type, opaque_event
from streamer.hive.encode import encode_event as hive_row
from streamer.hive.message import GZIP_FORMAT, gzip_message
from streamer.hive.notification import NotificationRow, in_catalog
from streamer.source.agent import AgentConfig, SourceAgent
from tests.unit.source.memory_log import MemoryLog

CONNECTOR = json.dumps({"server": "", "servicePrincipal": "", "connector": "mysql_conn", "timestamp": 1})


def row(event_id: int, event_type: str, message: str = "{}", db: str | None = None, table: str | None = None,
        cat: str | None = "hive", fmt: str | None = "json-0.2") -> NotificationRow:
    return NotificationRow(event_id, 1_700_000_000, event_type, message, fmt, db, table, cat)


def test_decode_row_still_refuses_unknown_types_and_the_agent_asks_first() -> None:
    with pytest.raises(UnknownEventTypeError, match="event 7 CREATE_DATACONNECTOR: unknown event type"):
        decode_row(row(7, "CREATE_DATACONNECTOR", CONNECTOR))
    assert is_known_type("CREATE_TABLE") and is_known_type("ALLOC_WRITE_ID_EVENT")
    assert not is_known_type("CREATE_DATACONNECTOR")
    assert not is_known_type("STREAMER_PROGRESS")  # streamer's own types never come from a Hive log


def test_an_opaque_event_carries_the_row_unchanged_across_the_wire() -> None:
    gz = gzip_message(json.dumps({"db": "sales", "table": "orders", "policy": "cold"}))
    event = opaque_event(row(42, "ALTER_STORAGE_POLICY", gz, "sales", "orders", fmt=GZIP_FORMAT), "src")
    assert (event.event_type, event.event_id) == (EventType.UNKNOWN, 42)
    assert (event.db, event.table) == ("sales", "orders")
    back = decode_event(encode_event(event))
    assert back == event
    assert isinstance(back.payload, UnknownPayload)
    assert back.payload.hive_event_type == "ALTER_STORAGE_POLICY"
    assert back.payload.message == gz.encode() and back.payload.message_format == GZIP_FORMAT
    # what a later streamer that knows the type does with it: the original row again
    again = NotificationRow(back.event_id, back.source.event_time, back.payload.hive_event_type,
                            back.payload.text, back.payload.message_format, back.db, back.table,
                            back.payload.catalog)
    assert again == row(42, "ALTER_STORAGE_POLICY", gz, "sales", "orders", fmt=GZIP_FORMAT)


@given(st.text(max_size=200), st.none() | st.text(max_size=20),
       st.none() | st.sampled_from(["null", " ", "db"]))
def test_any_message_fits_an_opaque_event(message: str, fmt: str | None, db: str | None) -> None:
    event = opaque_event(row(1, "SOMETHING_NEW", message, db, fmt=fmt))
    assert decode_event(encode_event(event)) == event
    assert event.db == (None if db in (None, "null", " ") else db)  # Hive 3.1's blank names: no database


@pytest.mark.parametrize(("cat", "catalog", "inside"), [
    ("hive", "hive", True), ("HIVE", "hive", True), ("spark", "hive", False), ("spark", "Spark", True),
    (None, "hive", True), ("", "spark", True), ("null", "hive", True),
])
def test_catalog_membership(cat: str | None, catalog: str, inside: bool) -> None:
    assert in_catalog(row(1, "CREATE_TABLE", cat=cat), catalog) is inside


def test_records_of_the_schema_before_unknown_events_still_decode() -> None:
    """A record written before this change (archived schema e3f5c69185178fc1) resolves to the
    current reader: ``prev_event_id`` defaults to None."""
    text = (schemas_dir() / "history" / "e3f5c69185178fc1.avsc").read_text(encoding="utf-8")
    old = WriterSchema.from_json(text)
    event = Event(Source("s", 5, 1), EventType.OPEN_TXN, OpenTxnPayload([5]))
    datum = to_avro(event)
    datum.pop("prev_event_id")
    out = io.BytesIO()
    out.write(SINGLE_OBJECT_MARKER + old.fingerprint)
    schemaless_writer(out, old.parsed, datum)
    assert decode_event(out.getvalue()) == event


def test_the_agent_prepares_opaque_skipped_and_other_catalog_events_and_chains_the_rest() -> None:
    def create_db(event_id: int, name: str, cat: str = "hive") -> NotificationRow:
        encoded = hive_row(Event(Source("s", event_id, 1), EventType.CREATE_DATABASE,
                                 DatabasePayload(DatabaseSnapshot(name)), db=name))
        return dataclasses.replace(encoded, cat_name=cat)

    rows = [
        create_db(11, "sales"),
        create_db(12, "sales", cat="spark"),  # HDP's spark catalog: a same-named database
        row(13, "CREATE_DATACONNECTOR", CONNECTOR),  # catalog-level: nothing to halt
        row(14, "ALTER_STORAGE_POLICY", "{}", "sales", "orders"),  # names a database: published
        create_db(15, "hr"),
    ]
    agent = SourceAgent(AgentConfig("s", {}, catalog="hive"), MemoryLog(rows), serializer=EventSerializer())
    agent.last_id = 10
    prepared, failure = agent._prepare(rows)
    assert failure is None
    assert [(p.event_id, p.passed) for p in prepared] == [
        (11, None), (12, "catalog"), (13, "unknown"), (14, None), (15, None)]
    published = [decode_event(p.value) for p in prepared if p.value is not None]
    assert [(e.event_id, e.event_type, e.prev_event_id) for e in published] == [
        (11, EventType.CREATE_DATABASE, 10), (14, EventType.UNKNOWN, 11), (15, EventType.CREATE_DATABASE, 14)]
    assert prepared[3].opaque_db == "sales"


def test_thrift_events_without_a_catalog_belong_to_every_catalog() -> None:
    """pyspark's Hive 2.3 bindings have no ``catName``; Hive 3+ servers send one."""
    from types import SimpleNamespace

    from streamer.source.thrift_reader import _row as thrift_row

    old = SimpleNamespace(eventId=3, eventTime=1, eventType="CREATE_TABLE", dbName="a", tableName="t",
                          message="{}", messageFormat="json-0.2")
    assert thrift_row(old).cat_name is None and in_catalog(thrift_row(old), "hive")
    spark = SimpleNamespace(**vars(old), catName="spark")
    assert not in_catalog(thrift_row(spark), "hive") and in_catalog(thrift_row(spark), "spark")
