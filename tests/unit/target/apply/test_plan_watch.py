"""The planner and the source agent's watch records (``InsertPayload.watch``): each carries the id of
the event published before it, so neither that event nor another watch record is its duplicate, and a
database whose position is that id still applies it."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import Event, InsertPayload
from streamer.target.apply.plan import plan
from tests.unit.target import builders as b

SNAP = b.table("db", "ds")


def watch(event_id: int, number: int) -> Event:
    event = b.insert(event_id, SNAP, [], replace=True)
    assert isinstance(event.payload, InsertPayload)
    return dataclasses.replace(event, payload=dataclasses.replace(event.payload, watch=number))


def number_of(event: Event) -> int:
    return event.payload.watch if isinstance(event.payload, InsertPayload) else 0


def test_watch_records_after_an_event_are_applied_with_it_in_topic_order() -> None:
    records = [b.insert(5, SNAP, []), watch(5, 1), watch(5, 2), b.insert(6, SNAP, []), watch(6, 3)]
    result = plan(records, {})
    assert [e for s in result.steps for e in s.events] == records and not result.duplicates


def test_a_watch_record_at_the_applied_position_is_applied_and_one_before_it_is_not() -> None:
    result = plan([watch(5, 1), watch(6, 2)], {"db": 6})
    assert [number_of(e) for s in result.steps for e in s.events] == [2]
    assert result.already_applied == (5,)


def test_a_watch_record_delivered_twice_in_a_batch_is_a_duplicate() -> None:
    result = plan([watch(5, 1), watch(5, 1)], {})
    assert len(result.event_ids) == 1 and result.duplicates == (5,)


@given(st.lists(st.tuples(st.integers(1, 6), st.booleans()), max_size=12), st.integers(0, 7))
def test_every_distinct_record_at_or_after_its_position_is_planned(
    drawn: list[tuple[int, bool]], applied: int,
) -> None:
    records = [watch(event_id, number) if is_watch else b.insert(event_id, SNAP, [])
               for number, (event_id, is_watch) in enumerate(sorted(drawn), start=1)]
    watched = [r.event_id for r in records if number_of(r)]
    ids = {r.event_id for r in records if not number_of(r)}
    expected = sum(1 for i in watched if i >= applied) + sum(1 for i in ids if i > applied)
    assert len(plan(records, {"db": applied}).event_ids) == expected
