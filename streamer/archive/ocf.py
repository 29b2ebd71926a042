"""Archive files: Avro Object Container Files of the topic's records, as they were on the topic.

Each record keeps the Kafka record's value byte for byte (the event in its wire format, decoded by
``streamer.events.codec`` as a record from the topic is) with its offset and, for readers that do not
decode events (Spark's avro reader, Apache Avro), the event's id, its predecessor's id, type, database
and table. The file's metadata names the topic, partition and source. Deflate, the codec every Avro
implementation reads. Pure: bytes in, bytes out.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastavro import parse_schema, reader, writer

from streamer.archive.manifest import ArchiveError

CODEC = "deflate"
META_TOPIC = "streamer.topic"
META_PARTITION = "streamer.partition"
META_SOURCE_ID = "streamer.source_id"

RECORD_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "ArchivedRecord",
    "namespace": "streamer.archive",
    "doc": "One record of a streamer topic: the Kafka record's value (an encoded event) and where it was.",
    "fields": [
        {"name": "offset", "type": "long", "doc": "Kafka offset in the topic's partition"},
        {"name": "event_id", "type": "long", "doc": "the event's id (Event.source.event_id)"},
        {"name": "prev_event_id", "type": ["null", "long"], "default": None,
         "doc": "the id of the event of the record before it in the topic (the chain)"},
        {"name": "event_type", "type": "string"},
        {"name": "db", "type": ["null", "string"], "default": None},
        {"name": "table", "type": ["null", "string"], "default": None},
        {"name": "timestamp_ms", "type": ["null", "long"], "default": None,
         "doc": "the Kafka record's timestamp"},
        {"name": "key", "type": ["null", "bytes"], "default": None},
        {"name": "value", "type": "bytes", "doc": "the Kafka record's value, as published"},
    ],
}
_PARSED = parse_schema(RECORD_SCHEMA)


@dataclass(frozen=True)
class ArchivedRecord:
    offset: int
    event_id: int
    prev_event_id: int | None
    event_type: str
    value: bytes
    db: str | None = None
    table: str | None = None
    timestamp_ms: int | None = None
    key: bytes | None = None


@dataclass(frozen=True)
class FileHeader:
    topic: str
    partition: int
    source_id: str


def encode(records: Sequence[ArchivedRecord], header: FileHeader) -> bytes:
    """One Object Container File holding ``records`` in order."""
    out = io.BytesIO()
    metadata = {
        META_TOPIC: header.topic, META_PARTITION: str(header.partition), META_SOURCE_ID: header.source_id,
    }
    rows = [
        {"offset": r.offset, "event_id": r.event_id, "prev_event_id": r.prev_event_id,
         "event_type": r.event_type, "db": r.db, "table": r.table, "timestamp_ms": r.timestamp_ms,
         "key": r.key, "value": r.value}
        for r in records
    ]
    writer(out, _PARSED, rows, codec=CODEC, metadata=metadata)
    return out.getvalue()


def decode(data: bytes, what: str) -> tuple[FileHeader, list[ArchivedRecord]]:
    """The header and records of a file; anything unreadable (truncated, corrupt, another schema) is
    an ``ArchiveError`` naming ``what``."""
    try:
        avro = reader(io.BytesIO(data), reader_schema=_PARSED)
        meta = avro.metadata
        header = FileHeader(str(meta[META_TOPIC]), int(meta[META_PARTITION]), str(meta[META_SOURCE_ID]))
        records = [
            ArchivedRecord(
                offset=row["offset"], event_id=row["event_id"], prev_event_id=row["prev_event_id"],
                event_type=row["event_type"], value=bytes(row["value"]), db=row["db"], table=row["table"],
                timestamp_ms=row["timestamp_ms"], key=None if row["key"] is None else bytes(row["key"]),
            )
            for row in avro
            if isinstance(row, dict)
        ]
    except Exception as exc:  # fastavro raises what its parser meets: EOFError, ValueError, zlib.error, ...
        raise ArchiveError(f"{what}: not a readable archive file ({type(exc).__name__}: {exc}); it is "
                           "truncated or corrupt") from exc
    return header, records
