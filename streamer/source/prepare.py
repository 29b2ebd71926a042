"""Notification rows into the records the agent publishes: decode, enrich, filter, chain, encode."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from confluent_kafka.serialization import MessageField, SerializationContext

from streamer.errors import CodecError, DecodeError, StreamerError
from streamer.events.codec import EventSerializer
from streamer.events.model import Event, EventType
from streamer.hive.decode import decode_row, is_known_type, opaque_event
from streamer.hive.notification import NotificationRow, in_catalog
from streamer.kafka.record_size import record_size, too_large
from streamer.source.enrich import Enricher
from streamer.source.errors import RecordTooLargeError
from streamer.source.policy import PolicySet


@dataclass(frozen=True)
class Prepared:
    event_id: int
    event_type: str
    key: bytes | None
    value: bytes | None  # None: passed over (``passed`` says why)
    passed: str | None = None  # "policy", "catalog" (another metastore catalog), "unknown" (no database)
    opaque_db: str | None = None  # published as UNKNOWN: the database it halts on targets
    obj: str | None = None  # db or db.table, for error messages
    # the event ``value`` encodes (None: passed over), for a writer that re-encodes it (``streamer dump``)
    event: Event | None = field(default=None, compare=False, repr=False)


class Preparer:
    """Turns rows into ``Prepared`` records for one topic; ``encode`` serializes any other event."""

    def __init__(self, enricher: Enricher, serializer: EventSerializer, topic: str) -> None:
        self.enricher = enricher
        self.serializer = serializer
        self._ctx = SerializationContext(topic, MessageField.VALUE)

    def encode(self, event: Event) -> bytes:
        return self.serializer(event, self._ctx)

    def prepare(
        self, rows: list[NotificationRow], *, source_id: str, catalog: str, policy: PolicySet, prev: int,
        now_ms: int,
    ) -> tuple[list[Prepared], StreamerError | None]:
        """Decode, enrich, filter and encode rows, stopping at the first one that fails.

        Each published record names the id of the one published before it (``prev_event_id``): ``prev``
        (the last id already in the topic) for the first."""
        out: list[Prepared] = []
        for row in rows:
            if not in_catalog(row, catalog):
                out.append(Prepared(row.event_id, row.event_type, None, None, "catalog"))
                continue
            try:
                if is_known_type(row.event_type):
                    event = self.enricher(decode_row(row, source_id))
                else:
                    event = opaque_event(row, source_id)
                    if event.db is None:
                        out.append(Prepared(row.event_id, row.event_type, None, None, "unknown"))
                        continue
                selected = policy.select(replace(event, ts_ms=now_ms))
                if selected is not None:
                    selected = replace(selected, prev_event_id=prev)
                value = None if selected is None else self.encode(selected)
            except DecodeError as exc:
                return out, exc
            except CodecError as exc:
                return out, DecodeError(f"cannot encode: {exc}", event_id=row.event_id,
                                        event_type=row.event_type, obj=_obj(row))
            if selected is None:
                out.append(Prepared(row.event_id, row.event_type, None, None, "policy"))
                continue
            key = selected.db.encode() if selected.db else None
            opaque_db = selected.db if selected.event_type is EventType.UNKNOWN else None
            out.append(Prepared(row.event_id, row.event_type, key, value, opaque_db=opaque_db, obj=_obj(row),
                                event=selected))
            prev = row.event_id
        return out, None


def cut_at_oversized(
    prepared: list[Prepared], limit: int
) -> tuple[list[Prepared], RecordTooLargeError | None]:
    """The records before the first one over ``limit`` bytes, and the error that one is.

    Those before it are published (the chain stays whole up to it); the agent then stops at it, since
    no retry makes a record smaller."""
    for index, item in enumerate(prepared):
        if item.value is not None and too_large(item.key, item.value, limit):
            size = record_size(item.key, item.value)
            error = RecordTooLargeError(item.event_id, item.event_type, item.obj, size, limit)
            return prepared[:index], error
    return prepared, None


def failure_kind(failure: StreamerError) -> str:
    """The ``streamer_source_errors_total`` kind of a batch's failure."""
    return "record_too_large" if isinstance(failure, RecordTooLargeError) else "decode"


def _obj(row: NotificationRow) -> str | None:
    return ".".join(n for n in (row.db_name, row.table_name) if n and n.strip() and n != "null") or None
