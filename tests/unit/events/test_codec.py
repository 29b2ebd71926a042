"""The wire format: round trips in both framings, union branches by name, schema resolution."""

from __future__ import annotations

import io
import json

import pytest
from fastavro import schemaless_writer
from hypothesis import given, settings

from streamer.errors import CodecError
from streamer.events.avro import to_avro
from streamer.events.codec import (
    SINGLE_OBJECT_MARKER,
    EventDeserializer,
    EventSerializer,
    decode_event,
    encode_event,
)
from streamer.events.model import (
    DatabasePayload,
    DropTablePayload,
    Event,
    EventType,
    ProgressPayload,
    Source,
    TableSnapshot,
)
from streamer.events.schemas import WriterSchema, load_event_schema
from tests.strategies import events


def _registry_installed() -> bool:
    try:
        import confluent_kafka.schema_registry  # noqa: F401
    except ImportError:
        return False
    return True


needs_registry = pytest.mark.skipif(
    not _registry_installed(), reason="confluent-kafka's schema registry dependencies are not installed"
)
SOURCE = Source(source_id="src", event_id=42, event_time=1_700_000_000)


def _event(payload: object, event_type: EventType = EventType.DROP_TABLE, **kw: object) -> Event:
    return Event(source=SOURCE, event_type=event_type, payload=payload, **kw)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(events())
def test_single_object_round_trip(event: Event) -> None:
    data = encode_event(event)
    assert data[:2] == SINGLE_OBJECT_MARKER
    assert decode_event(data) == event


@needs_registry
@settings(max_examples=25, deadline=None)
@given(events())
def test_confluent_round_trip_through_mock_registry(event: Event) -> None:
    serializer = EventSerializer(schema_registry_url="mock://codec-tests")
    deserializer = EventDeserializer(schema_registry_url="mock://codec-tests")
    data = serializer(event)
    assert data[0] == 0
    assert deserializer(data) == event


@needs_registry
def test_confluent_header_carries_the_registered_schema_id() -> None:
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = EventSerializer(schema_registry_url="mock://codec-ids")
    data = serializer(_event(DropTablePayload()), SerializationContext("events.src", MessageField.VALUE))
    schema_id = int.from_bytes(data[1:5], "big")
    assert schema_id >= 1
    # A plain single-object reader refuses registry framing with a clear cause.
    with pytest.raises(CodecError, match="no schema_registry_url"):
        decode_event(data)
    # A registry-aware deserializer still reads single-object records.
    event = _event(DropTablePayload())
    assert EventDeserializer(schema_registry_url="mock://codec-ids")(encode_event(event)) == event


@needs_registry
def test_unknown_registry_schema_id_is_a_codec_error() -> None:
    deserializer = EventDeserializer(schema_registry_url="mock://codec-empty")
    with pytest.raises(CodecError, match="schema id 999"):
        deserializer(b"\x00" + (999).to_bytes(4, "big") + b"\x02")


def test_header_is_marker_then_little_endian_fingerprint() -> None:
    data = encode_event(_event(DropTablePayload()))
    assert data[:2] == b"\xc3\x01"
    assert data[2:10] == load_event_schema().fingerprint


def test_payloads_of_the_same_shape_keep_their_type() -> None:
    # DatabasePayload(None) and DropTablePayload(None) encode to the same body but for the union index.
    same_shape = ((DatabasePayload(), EventType.DROP_DATABASE), (DropTablePayload(), EventType.DROP_TABLE))
    for payload, kind in same_shape:
        decoded = decode_event(encode_event(_event(payload, kind)))
        assert type(decoded.payload) is type(payload)


def test_optional_record_round_trips_in_both_states() -> None:
    for table in (None, TableSnapshot(name="t", db="d")):
        event = _event(DropTablePayload(table=table), db="d", table="t", ts_ms=5)
        assert decode_event(encode_event(event)) == event


def test_encoding_a_malformed_event_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="event 42"):
        encode_event(_event("not a payload"))
    with pytest.raises(CodecError, match="event 42"):
        encode_event(_event(ProgressPayload(last_event_id="x", source_head_event_id=1)))  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="not an Event"):
        encode_event(object())  # type: ignore[arg-type]


def _raw_body(schema: WriterSchema, datum: dict[str, object]) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, schema.parsed, datum)
    return SINGLE_OBJECT_MARKER + schema.fingerprint + out.getvalue()


def test_unknown_event_type_from_a_newer_writer_is_a_codec_error() -> None:
    datum = to_avro(_event(DropTablePayload()))
    datum["event_type"] = "SOME_FUTURE_EVENT"
    with pytest.raises(CodecError, match=r"event 42.*unknown EventType 'SOME_FUTURE_EVENT'"):
        decode_event(_raw_body(load_event_schema(), datum))


def _variant(transform: str) -> WriterSchema:
    """The current schema without Event.ts_ms ("older"), or with an extra field ("newer")."""
    schema = json.loads(load_event_schema().json)
    if transform == "older":
        schema["fields"] = [f for f in schema["fields"] if f["name"] != "ts_ms"]
    else:
        schema["fields"].append({"name": "shard", "type": "int", "default": 0})
    return WriterSchema.from_json(json.dumps(schema))


def test_records_of_an_older_schema_resolve_with_defaults() -> None:
    older = _variant("older")
    datum = to_avro(_event(DropTablePayload(), db="d"))
    del datum["ts_ms"]
    data = _raw_body(older, datum)
    deserializer = EventDeserializer()
    with pytest.raises(CodecError, match="unknown writer schema fingerprint"):
        deserializer(data)
    deserializer.add_writer_schema(older)
    assert deserializer(data) == _event(DropTablePayload(), db="d", ts_ms=None)


def test_records_of_a_newer_schema_drop_unknown_fields() -> None:
    newer = _variant("newer")
    datum = {**to_avro(_event(DropTablePayload(), ts_ms=7)), "shard": 3}
    deserializer = EventDeserializer()
    deserializer.add_writer_schema(newer)
    assert deserializer(_raw_body(newer, datum)) == _event(DropTablePayload(), ts_ms=7)


@needs_registry
def test_confluent_framing_interoperates_with_confluents_avro_serdes() -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from streamer.events.avro import from_avro
    from streamer.events.codec import registry_client

    url = "mock://codec-interop"
    ctx = SerializationContext("events.src", MessageField.VALUE)
    event = _event(DropTablePayload(TableSnapshot(name="t", db="d")), db="d", table="t")
    theirs = AvroSerializer(registry_client(url), load_event_schema().json, lambda e, _ctx: to_avro(e))
    assert EventDeserializer(schema_registry_url=url)(theirs(event, ctx)) == event
    reader = AvroDeserializer(registry_client(url), return_record_name=True)
    datum = reader(EventSerializer(schema_registry_url=url)(event, ctx), ctx)
    assert from_avro(Event, datum) == event
