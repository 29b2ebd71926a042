"""One batch of prepared records into the topic: one transaction, closed by a PROGRESS record."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from confluent_kafka import KafkaError

from streamer import metrics
from streamer.events.model import Event, EventType, ProgressPayload, Source
from streamer.source.errors import RecordTooLargeError
from streamer.source.policy import PolicySet
from streamer.source.policy_record import policy_record
from streamer.source.prepare import Prepared, Preparer
from streamer.source.producer import TransactionalProducer

log = logging.getLogger("streamer.source.agent")  # the agent's batches: their lines under the agent's name


def publish_batch(
    producer: TransactionalProducer,
    preparer: Preparer,
    prepared: list[Prepared],
    *,
    source_id: str,
    policy: PolicySet,
    after: int,
    head: int,
    clock: Callable[[], float],
) -> int:
    """Publish the records of ``prepared`` that pass (the topic ends at event ``after``) and a PROGRESS
    record (the last id passed, the source's ``head``, the policies); the new last id."""
    producer.ready()
    last = prepared[-1].event_id if prepared else after
    prev = next((p.event_id for p in reversed(prepared) if p.value is not None), after)

    def records() -> Iterator[tuple[bytes | None, bytes]]:
        for item in prepared:
            if item.value is not None:
                yield item.key, item.value
        progress = Event(  # made once the records before it are produced, as its times say
            source=Source(source_id, last, int(clock())),
            event_type=EventType.PROGRESS,
            payload=ProgressPayload(last, head, policy_record(policy)),
            ts_ms=int(clock() * 1000),
            prev_event_id=prev,
        )
        yield None, preparer.encode(progress)

    started = time.monotonic()
    producer.send(records())
    metrics.SOURCE_PUBLISH_SECONDS.observe(time.monotonic() - started)
    published = _count_outcomes(prepared)
    log.debug("published events ..%d (%d of %d, rest filtered)", last, published, len(prepared))
    return last


def refused_as_too_large(
    producer: TransactionalProducer, prepared: list[Prepared]
) -> RecordTooLargeError | None:
    """After a failed commit: the error for the first record the broker refused as too large, if any.

    ``publish_batch`` sent the records of ``prepared`` that pass, then a PROGRESS record; the producer
    knows refused records by their index in that order."""
    sent = [item for item in prepared if item.value is not None]
    for index, err in sorted(producer.refused(), key=lambda pair: pair[0]):
        if err.code() != KafkaError.MSG_SIZE_TOO_LARGE:
            continue
        if index < len(sent):
            item = sent[index]
            assert item.value is not None
            size = len(item.value) + len(item.key or b"")
            return RecordTooLargeError(item.event_id, item.event_type, item.obj, size, None, by="broker")
        return RecordTooLargeError(prepared[-1].event_id if prepared else 0, EventType.PROGRESS.value, None,
                                   0, None, by="broker")
    return None


def _count_outcomes(prepared: list[Prepared]) -> int:
    """Metrics and warnings for a committed batch; the number of its events that were published."""
    published = 0
    for item in prepared:
        if item.passed == "unknown":
            metrics.SOURCE_EVENTS_SKIPPED.inc()
            log.warning("event %d: unknown event type %r names no database; passed over (nothing to "
                        "halt, and streamer replicates no catalog-level objects)",
                        item.event_id, item.event_type)
        elif item.value is None:
            metrics.SOURCE_EVENTS_FILTERED.inc()
            if item.passed == "catalog":
                metrics.SOURCE_EVENTS_OTHER_CATALOG.inc()
        else:
            if item.opaque_db is not None:
                log.warning("event %d: unknown event type %r published as %s; targets halt database "
                            "%s at it (retry after an upgrade, or skip)", item.event_id,
                            item.event_type, EventType.UNKNOWN.value, item.opaque_db)
            # an unknown type counts as the type it is published as: labels stay bounded
            metrics.SOURCE_EVENTS_PUBLISHED.labels(
                EventType.UNKNOWN.value if item.opaque_db is not None else item.event_type).inc()
            published += 1
    return published
