"""Held events of a released database, re-read from the topic so that none is passed unapplied.

A halted database's later events are held while other databases go on; ``streamer target retry``
or ``skip`` releases it, and the job then re-reads its events from the halted one's offset.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from streamer.events.codec import EventDeserializer
from streamer.events.model import Event, EventType
from streamer.target.apply.plan import step_db
from streamer.target.job.settings import TargetSettings
from streamer.target.state.state_file import TargetState

if TYPE_CHECKING:
    from confluent_kafka import Consumer

log = logging.getLogger(__name__)

Replay = Callable[[int, int], Iterable[tuple[int, bytes]]]


class HeldEvents:
    """Re-reads the held range of each released database through ``replay(start, end)``."""

    def __init__(self, replay: Replay, deserialize: EventDeserializer) -> None:
        self._replay = replay
        self._deserialize = deserialize

    def take(
        self,
        state: TargetState,
        reload_progress: Callable[[], object],
        before_offset: int | None,
        offsets: dict[int, int],
    ) -> tuple[list[Event], dict[str, int]]:
        """Events of released databases below ``before_offset`` (the batch's first record), and the
        databases whose release this batch completes (with the offset re-read from); ``offsets``
        learns each event's offset."""
        halted = state.halts()
        events: list[Event] = []
        released: dict[str, int] = {}
        for db, offset in state.pending_replays().items():
            if db in halted or before_offset is None:
                continue  # still halted, or no record yet to bound the range: next batch
            released[db] = offset
            reload_progress()  # an operator skip advanced the database's progress
            if offset >= before_offset:
                continue  # the held events are in this batch itself
            log.info("re-reading held events of %s from offset %d", db, offset)
            for event_offset, value in self._replay(offset, before_offset):
                event = self._deserialize(value)
                if step_db(event) == db:
                    if event.event_type is not EventType.PROGRESS:  # (its id is the event's before it)
                        offsets.setdefault(event.event_id, event_offset)
                    events.append(event)
        return events, released

    def events_between(self, start: int, end: int) -> Iterable[Event]:
        """The topic's events from offset ``start`` up to ``end`` (none the topic no longer holds)."""
        for _, value in self._replay(start, end):
            yield self._deserialize(value)


def _consumer(settings: TargetSettings) -> Consumer:
    """A ``read_committed`` consumer of the job's topic, outside Spark, under the job's record limit."""
    from confluent_kafka import Consumer

    from streamer.kafka.client_log import with_client_log
    from streamer.kafka.record_limit import consumer_settings

    config = {
        "bootstrap.servers": settings.kafka.bootstrap_servers,
        "group.id": f"streamer-replay-{settings.source_id}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "error",
        **settings.kafka.config,
    }
    return Consumer(with_client_log({**config, **consumer_settings(settings.trust.max_record_bytes, config)}))


def _records(
    consumer: Consumer, settings: TargetSettings, start: int, end: int
) -> Iterable[tuple[int, bytes]]:
    """``(offset, value)`` of the committed records in ``[start, end)``, under the job's record limit."""
    from streamer.kafka.record_limit import check_message
    from streamer.kafka.topics import iter_range

    limit = settings.trust.max_record_bytes
    for msg in iter_range(consumer, settings.kafka.topic, 0, start, end,
                          check=lambda msg: check_message(msg, limit)):
        yield int(msg.offset() or 0), bytes(msg.value() or b"")


def kafka_replay(settings: TargetSettings) -> Replay:
    """Re-reads a range of the topic outside Spark (the consumer connects on the first call)."""

    def replay(start: int, end: int) -> Iterable[tuple[int, bytes]]:
        consumer = _consumer(settings)
        try:
            yield from _records(consumer, settings, start, end)
        finally:
            consumer.close()

    return replay


def kafka_record_at(settings: TargetSettings) -> Callable[[int], bytes | None]:
    """The committed record at one offset of the topic, or None when the topic holds none there (it
    ends before it, or a transaction marker or an aborted record takes it)."""

    def record_at(offset: int) -> bytes | None:
        from streamer.kafka.spark_source import checked_watermarks

        consumer = _consumer(settings)
        try:
            marks = checked_watermarks(consumer, settings.kafka.topic, 0, offset + 1)
            if marks is None or not marks[0] <= offset < marks[1]:
                return None
            return next((value for _, value in _records(consumer, settings, offset, offset + 1)), None)
        finally:
            consumer.close()

    return record_at
