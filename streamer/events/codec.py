"""Events on the wire: Avro single-object encoding by default, Confluent's framing with a registry.

Serializer and deserializer follow confluent-kafka-python's calling convention (``obj(value, ctx)``)
so they plug into its producers and consumers. Single-object encoding (``C3 01`` + 8-byte CRC-64-AVRO
fingerprint + body) lets a reader find the writer's schema by fingerprint and resolve it to its own;
with a schema registry URL the record is framed as magic ``0`` + 4-byte schema id instead. Decoding
anything that is not a valid event raises :class:`~streamer.errors.CodecError`, never another type.
"""

from __future__ import annotations

import functools
import io
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fastavro import schemaless_reader, schemaless_writer

from streamer.errors import CodecError
from streamer.events.avro import from_avro, to_avro
from streamer.events.model import PAYLOAD_TYPE_OF, Event
from streamer.events.schemas import EVENT_SCHEMA_NAME, WriterSchema, load_event_schema, load_writer_schemas

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import SerializationContext

SINGLE_OBJECT_MARKER = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"
_SINGLE_OBJECT_HEADER = len(SINGLE_OBJECT_MARKER) + 8
_CONFLUENT_HEADER = len(CONFLUENT_MAGIC) + 4


class EventSerializer:
    """``EventSerializer()(event) -> bytes``: the Event as one self-describing Kafka record value.

    Without ``schema_registry_url`` the format is Avro single-object encoding; with it, the schema is
    registered under ``subject`` (default: ``<topic>-value`` when a context names the topic, else the
    record's full name) and the record carries Confluent's magic byte and schema id.
    """

    def __init__(
        self,
        schema_registry_url: str | None = None,
        *,
        schema_registry_conf: Mapping[str, Any] | None = None,
        subject: str | None = None,
        schema: WriterSchema | None = None,
    ) -> None:
        self._schema = schema or load_event_schema()
        self._registry = _Registry(schema_registry_url, schema_registry_conf) if schema_registry_url else None
        self._subject = subject
        self._single_object_header = SINGLE_OBJECT_MARKER + self._schema.fingerprint

    def __call__(self, event: Event, ctx: SerializationContext | None = None) -> bytes:
        _check_payload(event)
        header = self._single_object_header if self._registry is None else self._confluent_header(ctx)
        out = io.BytesIO()
        out.write(header)
        try:
            schemaless_writer(out, self._schema.parsed, to_avro(event))
        except Exception as exc:  # fastavro and the converters raise many types for a malformed event
            raise CodecError(f"cannot encode {_describe(event)}: {type(exc).__name__}: {exc}") from exc
        return out.getvalue()

    def _confluent_header(self, ctx: SerializationContext | None) -> bytes:
        assert self._registry is not None
        subject = self._subject or (f"{ctx.topic}-{ctx.field}" if ctx is not None else EVENT_SCHEMA_NAME)
        schema_id = self._registry.register(subject, self._schema)
        return CONFLUENT_MAGIC + schema_id.to_bytes(4, "big")


class EventDeserializer:
    """``EventDeserializer()(data) -> Event``, for records of either wire format.

    Writer schemas are looked up by fingerprint in ``writer_schemas`` (default: the current schema
    and the archived ones in ``schemas/history/``; more can be added), or by id in the registry when
    ``schema_registry_url`` is given, and resolved to the current (reader) schema.
    """

    def __init__(
        self,
        schema_registry_url: str | None = None,
        *,
        schema_registry_conf: Mapping[str, Any] | None = None,
        writer_schemas: Mapping[bytes, WriterSchema] | None = None,
        reader_schema: WriterSchema | None = None,
    ) -> None:
        self._reader = reader_schema or load_event_schema()
        self.writer_schemas: dict[bytes, WriterSchema] = dict(
            writer_schemas if writer_schemas is not None else load_writer_schemas()
        )
        self.writer_schemas.setdefault(self._reader.fingerprint, self._reader)
        self._registry = _Registry(schema_registry_url, schema_registry_conf) if schema_registry_url else None

    def add_writer_schema(self, schema: WriterSchema) -> None:
        """Accept records written with ``schema`` (an older or newer version of the Event schema)."""
        self.writer_schemas[schema.fingerprint] = schema

    def __call__(
        self, data: bytes | bytearray | memoryview | None, ctx: SerializationContext | None = None
    ) -> Event:
        if not data:
            raise CodecError("empty record: expected an Avro-encoded event (is this a tombstone?)")
        data = bytes(data)
        if data.startswith(SINGLE_OBJECT_MARKER):
            return self._decode(data, _SINGLE_OBJECT_HEADER, self._by_fingerprint(data))
        if data.startswith(CONFLUENT_MAGIC):
            return self._decode(data, _CONFLUENT_HEADER, self._by_schema_id(data))
        raise CodecError(
            f"not an event record: starts with 0x{data[:2].hex()}, expected 0xc301 (Avro single-object "
            "encoding) or 0x00 (Confluent schema registry framing)"
        )

    def _by_fingerprint(self, data: bytes) -> WriterSchema:
        if len(data) < _SINGLE_OBJECT_HEADER:
            raise CodecError(f"truncated record: {len(data)} bytes, shorter than the single-object header")
        fingerprint = data[len(SINGLE_OBJECT_MARKER) : _SINGLE_OBJECT_HEADER]
        schema = self.writer_schemas.get(fingerprint)
        if schema is None:
            raise CodecError(
                f"unknown writer schema fingerprint {fingerprint.hex()} (known: "
                f"{', '.join(sorted(fp.hex() for fp in self.writer_schemas))}); a newer streamer may have "
                "written it: add its schema to schemas/history/"
            )
        return schema

    def _by_schema_id(self, data: bytes) -> WriterSchema:
        if len(data) < _CONFLUENT_HEADER:
            raise CodecError(f"truncated record: {len(data)} bytes, shorter than the Confluent header")
        schema_id = int.from_bytes(data[1:_CONFLUENT_HEADER], "big")
        if self._registry is None:
            raise CodecError(
                f"record is framed for a schema registry (schema id {schema_id}) but no "
                "schema_registry_url is configured"
            )
        schema = self._registry.lookup(schema_id)
        # The common case: the writer's schema is ours, so decode without resolution.
        return self.writer_schemas.get(schema.fingerprint, schema)

    def _decode(self, data: bytes, offset: int, writer: WriterSchema) -> Event:
        body = io.BytesIO(data)
        body.seek(offset)
        resolve_to = None if writer.fingerprint == self._reader.fingerprint else self._reader.parsed
        try:
            datum = schemaless_reader(
                body, writer.parsed, resolve_to, return_record_name=True, return_record_name_override=True
            )
        except Exception as exc:  # fastavro raises EOFError, UnicodeDecodeError, IndexError, ... on garbage
            cause = "the record ends early" if isinstance(exc, EOFError) else f"{type(exc).__name__}: {exc}"
            writer_fp = writer.fingerprint.hex()
            raise CodecError(f"undecodable Avro body (writer schema {writer_fp}): {cause}") from exc
        if body.tell() != len(data):
            raise CodecError(f"{len(data) - body.tell()} trailing bytes after the Avro body")
        if not isinstance(datum, dict):
            raise CodecError(f"writer schema {writer.fingerprint.hex()} does not describe a record")
        try:
            event = from_avro(Event, datum)
        except Exception as exc:  # the record does not fit the model: unknown enum value, wrong union
            raise CodecError(f"{_describe_datum(datum)}: invalid event: {exc}") from exc
        _check_payload(event)
        return event


def _check_payload(event: Event) -> None:
    """An event's payload must be the one its type carries (a CREATE_TABLE with a txn payload is garbage)."""
    expected = PAYLOAD_TYPE_OF.get(getattr(event, "event_type", None))  # type: ignore[arg-type]
    if expected is not None and not isinstance(event.payload, expected):
        raise CodecError(
            f"{_describe(event)}: payload {type(event.payload).__name__} does not belong to "
            f"{event.event_type.value} (expected {expected.__name__})"
        )


class _Registry:
    """Schema ids by subject and schemas by id, cached; one client per URL so ``mock://`` is shared."""

    def __init__(self, url: str, conf: Mapping[str, Any] | None) -> None:
        self.url = url
        self._client = registry_client(url, conf)
        self._ids: dict[str, int] = {}
        self._schemas: dict[int, WriterSchema] = {}

    def register(self, subject: str, schema: WriterSchema) -> int:
        schema_id = self._ids.get(subject)
        if schema_id is None:
            from confluent_kafka.schema_registry import Schema

            try:
                schema_id = self._client.register_schema(subject, Schema(schema.json, "AVRO"))
            except Exception as exc:  # SchemaRegistryError, network errors
                raise CodecError(
                    f"cannot register the event schema under {subject!r} at {self.url}: {exc}"
                ) from exc
            self._ids[subject] = schema_id
        return schema_id

    def lookup(self, schema_id: int) -> WriterSchema:
        schema = self._schemas.get(schema_id)
        if schema is None:
            try:
                registered = self._client.get_schema(schema_id)
            except Exception as exc:  # SchemaRegistryError, network errors
                raise CodecError(f"cannot get writer schema id {schema_id} from {self.url}: {exc}") from exc
            if registered.schema_type not in (None, "AVRO"):
                raise CodecError(f"schema id {schema_id} at {self.url} is {registered.schema_type}, not AVRO")
            try:
                schema = WriterSchema.from_json(registered.schema_str or "")
            except Exception as exc:  # fastavro raises several types for an invalid schema
                raise CodecError(
                    f"schema id {schema_id} at {self.url} is not a valid Avro schema: {exc}"
                ) from exc
            self._schemas[schema_id] = schema
        return schema


_CLIENTS: dict[tuple[str, tuple[tuple[str, Any], ...]], SchemaRegistryClient] = {}
_CLIENTS_LOCK = threading.Lock()


def registry_client(url: str, conf: Mapping[str, Any] | None = None) -> SchemaRegistryClient:
    """The process's one schema registry client for ``url`` and ``conf`` (``mock://...`` for tests).

    Sharing it shares the registry's caches, and makes a ``mock://`` registry one store per URL.
    """
    key = (url, tuple(sorted((conf or {}).items())))
    try:
        from confluent_kafka.schema_registry import SchemaRegistryClient
    except ImportError as exc:
        raise CodecError(
            f"schema registry support needs confluent-kafka's registry dependencies ({exc}); install "
            "them with `pip install 'confluent-kafka[schemaregistry]'`"
        ) from exc
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = SchemaRegistryClient.new_client({**(conf or {}), "url": url})
        return client


def _describe(event: Any) -> str:
    source = getattr(event, "source", None)
    event_id = getattr(source, "event_id", None)
    if event_id is None:
        return f"{type(event).__name__} (not an Event)"
    return f"event {event_id} ({getattr(event, 'event_type', '?')})"


def _describe_datum(datum: dict[str, Any]) -> str:
    """The event's id and type for an error message; conversion may have half-replaced the dict."""
    source = datum.get("source")
    event_id = source.get("event_id") if isinstance(source, dict) else getattr(source, "event_id", None)
    return f"event {event_id} ({datum.get('event_type')})" if event_id is not None else "record"


@functools.cache
def _default_serializer() -> EventSerializer:
    return EventSerializer()


@functools.cache
def _default_deserializer() -> EventDeserializer:
    return EventDeserializer()


def encode_event(event: Event) -> bytes:
    """The event in Avro single-object encoding with the current schema."""
    return _default_serializer()(event)


def decode_event(data: bytes | bytearray | memoryview) -> Event:
    """The event in ``data`` (single-object encoding); raises CodecError for anything else."""
    return _default_deserializer()(data)
