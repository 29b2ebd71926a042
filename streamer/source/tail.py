"""The last event id a source's topic holds: where a (re)started agent continues."""

from __future__ import annotations

from typing import Any

from streamer.errors import CodecError, ConfigError
from streamer.events.codec import EventDeserializer
from streamer.events.model import BootstrapObjectPayload, ProgressPayload
from streamer.kafka.errors import KafkaClientError
from streamer.kafka.topics import Record, read_tail
from streamer.source.errors import UnfinishedBootstrapError


def last_published_id(
    kafka: dict[str, Any],
    topic: str,
    source_id: str,
    *,
    timeout: float,
    start_after: int | None = None,
    refuse_unfinished_bootstrap: bool = False,
) -> int:
    """The last event id in the topic's committed tail (0, or ``start_after``, if it is empty).

    ``start_after`` is for an empty topic: a topic that already holds events past it is continued
    (a restarted agent keeps its setting); one that ends before it is refused (``ConfigError``),
    since the events in between would never be published.

    With ``refuse_unfinished_bootstrap`` a tail inside a bootstrap (records, no marker yet: a
    ``streamer bootstrap`` was interrupted) raises ``UnfinishedBootstrapError``. A topic of another
    source is a ``ConfigError``, one that is not streamer's a ``KafkaClientError``.
    """
    tail = read_tail(kafka, topic, n=1, timeout=timeout)
    if not tail:
        return start_after or 0
    last = _event_id(tail[-1], topic, source_id, refuse_unfinished_bootstrap)
    if start_after is not None and last < start_after:
        raise ConfigError(
            f"topic {topic} already ends at event {last}, before --start-after {start_after}: events "
            f"{last + 1}..{start_after} would never be published. --start-after only applies to an "
            f"empty topic; publish to a new topic, or drop --start-after to continue after {last}"
        )
    return last


def _event_id(record: Record, topic: str, source_id: str, refuse_unfinished_bootstrap: bool) -> int:
    if record.value is None:
        raise KafkaClientError(f"topic {topic}: last record at offset {record.offset} has no value; is "
                               "this topic streamer's?")
    try:
        event = EventDeserializer()(record.value)
    except CodecError as exc:
        raise KafkaClientError(f"topic {topic}: last record at offset {record.offset} is not a streamer "
                               f"event ({exc}); is this topic streamer's?") from exc
    if event.source.source_id != source_id:
        raise ConfigError(f"topic {topic} holds events of source {event.source.source_id!r}, not "
                          f"{source_id!r}")
    if isinstance(event.payload, ProgressPayload):
        return event.payload.last_event_id
    if refuse_unfinished_bootstrap and isinstance(event.payload, BootstrapObjectPayload):
        p = event.payload
        raise UnfinishedBootstrapError(topic, p.bootstrap_id, p.sequence, p.total)
    return event.event_id
