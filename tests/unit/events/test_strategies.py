"""The shared strategies stay complete (every event type) and coherent (names agree)."""

from __future__ import annotations

from hypothesis import given, settings

from streamer.events.model import (
    PAYLOAD_EVENT_TYPES,
    PAYLOAD_TYPE_OF,
    PAYLOAD_TYPES,
    CreateTablePayload,
    Event,
    EventType,
)
from tests.strategies import events, partition_snapshots


def test_every_event_type_and_payload_type_is_covered() -> None:
    assert set(PAYLOAD_TYPE_OF) == set(EventType)
    assert set(PAYLOAD_EVENT_TYPES) == set(PAYLOAD_TYPES)


@settings(max_examples=30, deadline=None)
@given(events([EventType.CREATE_TABLE]))
def test_payload_names_agree_with_the_envelope(event: Event) -> None:
    assert isinstance(event.payload, CreateTablePayload)
    assert (event.payload.table.db, event.payload.table.name) == (event.db, event.table)


@settings(max_examples=20, deadline=None)
@given(partition_snapshots(db="sales", table="orders"))
def test_builders_place_objects_where_asked(partition: object) -> None:
    assert getattr(partition, "db", None) in (None, "sales")
    assert getattr(partition, "table", None) in (None, "orders")
