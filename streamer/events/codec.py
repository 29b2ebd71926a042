"""Events on the wire: Avro single-object encoding by default, Confluent's framing with a registry.

Serializer and deserializer follow confluent-kafka-python's calling convention (``obj(value, ctx)``)
so they plug into its producers and consumers. Single-object encoding (``C3 01`` + 8-byte CRC-64-AVRO
fingerprint + body) lets a reader find the writer's schema by fingerprint and resolve it to its own;
with a schema registry URL the record is framed as magic ``0`` + 4-byte schema id instead. Decoding
anything that is not a valid event raises :class:`~streamer.errors.CodecError`, never another type.

Decoding also refuses a record whose envelope names another database or table than its payload
(``check_envelope``; :class:`~streamer.errors.EnvelopeMismatchError`, a ``CodecError`` and a
``DecodeError``): a target checks ownership of, and keys progress by, the envelope's database.
"""

from __future__ import annotations

import functools
import hashlib
import io
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fastavro import schemaless_reader, schemaless_writer

from streamer.errors import CodecError, EnvelopeMismatchError, InvalidNameError
from streamer.events.avro import from_avro, to_avro
from streamer.events.model import (
    PAYLOAD_TYPE_OF,
    AcidWrite,
    AcidWritePayload,
    AddConstraintsPayload,
    AddPartitionPayload,
    AllocWriteIdPayload,
    AlterDatabasePayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
    BootstrapObjectPayload,
    CommitTxnPayload,
    CreateFunctionPayload,
    CreateTablePayload,
    DatabasePayload,
    DeleteColumnStatsPayload,
    DropConstraintPayload,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    InsertPayload,
    PartitionSnapshot,
    ReloadPayload,
    TableSnapshot,
    UpdateColumnStatsPayload,
)
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
    ``schema_registry_url`` is given, and resolved to the current (reader) schema. With
    ``check_envelope`` (the default) an event whose envelope and payload disagree is refused; the
    target job decodes without, so that its applier refuses it and halts only that database.
    """

    def __init__(
        self,
        schema_registry_url: str | None = None,
        *,
        schema_registry_conf: Mapping[str, Any] | None = None,
        writer_schemas: Mapping[bytes, WriterSchema] | None = None,
        reader_schema: WriterSchema | None = None,
        check_envelope: bool = True,
    ) -> None:
        self._check_envelope = check_envelope
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
        if self._check_envelope:
            check_envelope(event)
        return event


def _check_payload(event: Event) -> None:
    """An event's payload must be the one its type carries (a CREATE_TABLE with a txn payload is garbage)."""
    expected = PAYLOAD_TYPE_OF.get(getattr(event, "event_type", None))  # type: ignore[arg-type]
    if expected is not None and not isinstance(event.payload, expected):
        raise CodecError(
            f"{_describe(event)}: payload {type(event.payload).__name__} does not belong to "
            f"{event.event_type.value} (expected {expected.__name__})"
        )


# --- envelope vs payload ------------------------------------------------------------------------

# Types whose envelope names no object by design (a transaction spans databases; the others are
# streamer's own records): when it names a database anyway, what the payload changes must be in it.
_UNKEYED = frozenset(
    {EventType.OPEN_TXN, EventType.COMMIT_TXN, EventType.ABORT_TXN, EventType.PROGRESS,
     EventType.BOOTSTRAP_END, EventType.UNKNOWN, EventType.COMMIT_COMPACTION}
)

Named = list[tuple[str, str | None]]  # (where in the payload, the name found there)


def check_envelope(event: Event) -> None:
    """Refuse ``event`` when its envelope's ``db``/``table`` differ (case-insensitively) from the
    database and table its payload acts on: :class:`EnvelopeMismatchError` naming the event and both.

    Legitimate differences stay allowed: a rename's old names (the envelope names the new ones, as
    Hive's listener does), the primary-key side of a foreign key (Hive keys ADD_FOREIGNKEY by it),
    the tables of a transaction (its envelope names none, or only the database all writes are in).
    Within the payload, names must agree too: a write's snapshots name its table, one event's
    constraints name one table.
    """
    names = _Names()
    names.collect(event)
    check_names(event, names)
    envelope_db, envelope_table = _lower(event.db), _lower(event.table)
    dbs = [] if event.db is None and event.event_type in _UNKEYED else names.dbs
    wrong = [f"{where} {name!r}" for where, name in dbs if name is not None and _lower(name) != envelope_db]
    wrong += [f"{where} {name!r}" for where, name in names.tables if name and _lower(name) != envelope_table]
    wrong += names.conflicts
    if not wrong:
        return
    raise EnvelopeMismatchError(
        f"the envelope names database {event.db!r}, table {event.table!r}, but the payload's "
        f"{', '.join(wrong)}: refused (a record's payload acts only on the object its envelope names)",
        event_id=event.event_id,
        event_type=str(event.event_type),
        obj=".".join(n for n in (event.db, event.table) if n) or None,
    )


MAX_DB_NAME, MAX_TABLE_NAME = 128, 256
"""Hive's metastore columns: ``DBS.NAME`` VARCHAR(128), ``TBLS.TBL_NAME`` VARCHAR(256)."""


def check_names(event: Event, names: _Names | None = None) -> None:
    """Refuse ``event`` when its envelope or payload names a database or table with a control
    character or longer than Hive stores: :class:`InvalidNameError` naming the event and the name
    (escaped). Every record passes this before the target writes any of its names anywhere; the
    error's object is the envelope's, bounded and escaped (``tracked_db``, ``shown_name``): a halt
    keeps it."""
    if names is None:
        names = _Names()
        names.collect(event)
    found = [("envelope database", event.db, MAX_DB_NAME), ("envelope table", event.table, MAX_TABLE_NAME)]
    found += [(where, name, MAX_DB_NAME) for where, name in names.dbs]
    found += [(where, name, MAX_TABLE_NAME) for where, name in names.tables]
    for where, name, limit in found:
        if name is None:
            continue
        problem = name_problem(name, limit)
        if problem is not None:
            shown = name if len(name) <= 80 else f"{name[:80]}..."
            obj = [tracked_db(event.db)] if event.db else []
            raise InvalidNameError(
                f"the {where} name {shown!r} {problem}: refused (no metastore holds such a name)",
                event_id=event.event_id,
                event_type=str(event.event_type),
                obj=".".join(obj + ([shown_name(event.table)] if event.table else [])) or None,
            )


def name_problem(name: str, limit: int) -> str | None:
    """Why no metastore holds ``name`` (a control character, over ``limit`` characters), or None."""
    if any(map(_control, name)):
        return f"holds control character {next(c for c in name if _control(c))!r}"
    if len(name) > limit:
        return f"is {len(name)} characters long, over Hive's {limit}"
    return None


def shown_name(name: str) -> str:
    """``name`` as an error or a halt may keep it: at most 80 characters, control characters escaped."""
    shown = name if len(name) <= 80 else f"{name[:80]}..."
    return "".join(repr(c)[1:-1] if _control(c) else c for c in shown)


def tracked_db(name: str) -> str:
    """The name the target keeps a record's database under (its halt, a skip's progress): the name
    itself, or for one no metastore holds (every record naming it is refused, ``check_names``)
    ``<invalid database name sha256:...>``, the same for every record naming it, so that those
    records are held behind its halt while no multi-MiB or line-forging name reaches the state file,
    logs or metrics. No Hive database is named so (Hive allows letters, digits and ``_``)."""
    if name_problem(name, MAX_DB_NAME) is None:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"<invalid database name sha256:{digest}>"


def _control(char: str) -> bool:
    return char < " " or "\x7f" <= char <= "\x9f"


def _lower(name: str | None) -> str | None:
    return name.lower() if name is not None else None


class _Names:
    """The database and table names a payload acts on, each with where it was found, and the names
    within the payload that disagree with each other (``conflicts``)."""

    def __init__(self) -> None:
        self.dbs: Named = []
        self.tables: Named = []
        self.conflicts: list[str] = []

    def table(self, where: str, snap: TableSnapshot | None) -> None:
        if snap is not None:
            self.named(where, snap.db, snap.name)

    def partitions(self, where: str, parts: list[PartitionSnapshot | None]) -> None:
        for part in parts:
            if part is not None:
                self.named(where, part.db, part.table)

    def named(self, where: str, db: str | None, name: str | None) -> None:
        self.dbs.append((f"{where} database", db))
        self.tables.append((f"{where} table", name))

    def collect(self, event: Event) -> None:
        """The names in ``event``'s payload, by its type."""
        p = event.payload
        if isinstance(p, DatabasePayload) and p.database is not None:
            self.dbs.append(("database", p.database.name))
        elif isinstance(p, AlterDatabasePayload):
            self.dbs += [("before", p.before.name), ("after", p.after.name)]
        elif isinstance(p, CreateTablePayload | DropTablePayload):
            self.table("table", p.table)
        elif isinstance(p, AlterTablePayload):
            self.table("after", p.after)  # ``before`` holds a rename's old names
        elif isinstance(p, AddPartitionPayload | AlterPartitionsPayload | ReloadPayload):
            self.table("table", p.table)
            self.partitions("partition", list(p.partitions))
        elif isinstance(p, AlterPartitionPayload):
            self.table("table", p.table)
            self.partitions("partition", [p.before, p.after])
        elif isinstance(p, DropPartitionPayload):
            self.table("table", p.table)
        elif isinstance(p, InsertPayload):
            self.table("table", p.table)
            self.partitions("partition", [p.partition])
        elif isinstance(p, CreateFunctionPayload):
            self.dbs.append(("function", p.function.db))
        elif isinstance(p, AddConstraintsPayload):
            self.constraints(event, p)
        elif isinstance(p, DropConstraintPayload | AllocWriteIdPayload | UpdateColumnStatsPayload):
            self.named("payload", p.db, p.table)
        elif isinstance(p, DeleteColumnStatsPayload):
            self.named("payload", p.db, p.table or None)
        elif isinstance(p, AcidWritePayload):
            self.write("write", p.write)
        elif isinstance(p, CommitTxnPayload):
            for i, write in enumerate(p.writes):
                self.write(f"writes[{i}]", write, keyed_table=False)  # a txn spans tables
        elif isinstance(p, BootstrapObjectPayload):
            if p.database is not None:
                self.dbs.append(("database", p.database.name))
            if p.function is not None:
                self.dbs.append(("function", p.function.db))
            self.table("table", p.table)
            self.partitions("partition", list(p.partitions))
            for i, c in enumerate(p.constraints):
                self.named(f"constraints[{i}]", c.db, c.table)

    def write(self, where: str, write: AcidWrite, *, keyed_table: bool = True) -> None:
        """A write's names; its snapshots must name its own table."""
        self.dbs.append((f"{where} database", write.db))
        if keyed_table:
            self.tables.append((f"{where} table", write.table))
        inner: list[tuple[str | None, str | None]] = []
        if write.table_snapshot is not None:
            inner.append((write.table_snapshot.db, write.table_snapshot.name))
        if write.partition_snapshot is not None:
            inner.append((write.partition_snapshot.db, write.partition_snapshot.table))
        own = (_lower(write.db), _lower(write.table))
        for db, name in inner:
            if (db is not None and _lower(db) != own[0]) or (name and _lower(name) != own[1]):
                self.conflicts.append(f"{where} to {write.db}.{write.table} with a snapshot of {db}.{name}")

    def constraints(self, event: Event, p: AddConstraintsPayload) -> None:
        """Constraints of one table; a foreign key's envelope may name either side (Hive: the key's)."""
        if not p.constraints:
            return
        first = p.constraints[0]
        for i, c in enumerate(p.constraints):
            if (_lower(c.db), _lower(c.table)) != (_lower(first.db), _lower(first.table)):
                self.conflicts.append(f"constraints[{i}] on {c.db}.{c.table}, constraints[0] on another")
            referenced = (_lower(c.ref_db), _lower(c.ref_table)) == (_lower(event.db), _lower(event.table))
            if event.event_type is EventType.ADD_FOREIGNKEY and c.ref_db and referenced:
                continue
            self.named(f"constraints[{i}]", c.db, c.table)


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
