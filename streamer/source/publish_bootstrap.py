"""Publishing bootstrap records into a source's topic, with the agent's transactional id.

Using the agent's ``transactional.id`` fences a running agent (two writers must never interleave in
the one ordered topic) and lets the agent, started afterwards, recover the bootstrap's event id E1
from the topic tail: the last transaction ends with the marker and a PROGRESS record at E1 carrying
the policy, so the agent continues after E1 and later detects a policy change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from confluent_kafka import Producer
from confluent_kafka.serialization import MessageField, SerializationContext

from streamer.events.codec import EventSerializer
from streamer.events.model import Event, EventType, ProgressPayload, Source
from streamer.kafka.settings import with_overrides
from streamer.kafka.topics import ensure_topic
from streamer.source.agent import AgentConfig

log = logging.getLogger(__name__)


def publish_records(
    config: AgentConfig,
    records: Sequence[Event],
    *,
    head: int,
    policy: str,
    per_transaction: int = 200,
    on_published: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """Publish ``records`` (the last one the marker) in transactions, then PROGRESS at the marker's id."""
    if not records:
        raise ValueError("a bootstrap has at least its marker")
    ensure_topic(config.kafka, config.topic_name, timeout=config.kafka_timeout)
    serializer = EventSerializer()
    ctx = SerializationContext(config.topic_name, MessageField.VALUE)
    producer = Producer(with_overrides(config.kafka, transactional_id=config.transactional_id,
                                       enable_idempotence=True, acks="all", linger_ms=5))
    producer.init_transactions(config.kafka_timeout)
    bootstrap_id = records[-1].event_id
    try:
        for start in range(0, len(records), per_transaction):
            chunk = records[start : start + per_transaction]
            producer.begin_transaction()
            for event in chunk:
                _produce(producer, config.topic_name, event.db, serializer(event, ctx))
            if start + per_transaction >= len(records):
                progress = Event(
                    Source(config.source_id, bootstrap_id, int(clock())),
                    EventType.PROGRESS,
                    ProgressPayload(bootstrap_id, max(head, bootstrap_id), policy),
                    ts_ms=int(clock() * 1000),
                )
                _produce(producer, config.topic_name, None, serializer(progress, ctx))
            producer.commit_transaction(config.kafka_timeout)
            if on_published is not None:
                on_published(len(chunk))
    finally:
        producer.flush(config.kafka_timeout)
    log.info("published bootstrap %d: %d records to %s", bootstrap_id, len(records), config.topic_name)


def _produce(producer: Producer, topic: str, db: str | None, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=db.encode() if db else None, partition=0)
            return
        except BufferError:
            producer.poll(0.1)
