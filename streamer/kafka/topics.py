"""Topic helpers: create a topic, read its watermarks, and read its last committed records.

Every consumer here uses explicit partition assignment, never group subscription: Tansu's group
joins take ~20 s, and none of these reads needs a group. The agent recovers the last event id it
published from `read_tail` at start-up, so that read honours transactions (read_committed).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from streamer.errors import DataLossError
from streamer.kafka.client_log import with_client_log
from streamer.kafka.errors import KafkaClientError
from streamer.kafka.presence import Answers, Kind, Metadata, needs_metadata, verdict
from streamer.kafka.reachability import check_reachable
from streamer.kafka.settings import with_overrides

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Record:
    """One data record as read from a partition."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: datetime | None


def to_record(msg: Message) -> Record:
    """Copy what we need out of confluent's Message (which cannot be built by hand)."""
    ts_type, ts_ms = msg.timestamp()
    timestamp = None if ts_type == 0 or ts_ms < 0 else datetime.fromtimestamp(ts_ms / 1000, UTC)
    return Record(
        topic=str(msg.topic()),
        partition=int(msg.partition() or 0),
        offset=int(msg.offset() or 0),
        key=msg.key(),
        value=msg.value(),
        timestamp=timestamp,
    )


def ensure_topic(
    config: Mapping[str, Any],
    topic: str,
    partitions: int = 1,
    config_overrides: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> bool:
    """Create `topic` if it does not exist; True if this call created it. An existing topic is fine.

    A cluster that does not answer raises `KafkaUnreachableError` first (`check_reachable`)."""
    check_reachable(config)
    admin = AdminClient(with_client_log(config))
    new = NewTopic(topic, num_partitions=partitions, config=dict(config_overrides or {}))
    future = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[topic]
    try:
        future.result(timeout=timeout)
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise KafkaClientError(f"could not create topic {topic!r}: {exc}") from exc
    log.info("created topic %s (%d partitions)", topic, partitions)
    return True


def topic_max_message_bytes(config: Mapping[str, Any], topic: str, timeout: float = 10.0) -> int | None:
    """The topic's ``max.message.bytes`` as the broker reports it; None if it reports none."""
    admin = AdminClient(with_client_log(config))
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    except KafkaException as exc:
        raise KafkaClientError(f"could not read the configuration of topic {topic!r}: {exc}") from exc
    entry = entries.get("max.message.bytes")
    return int(entry.value) if entry is not None and entry.value not in (None, "") else None


def _consumer(config: Mapping[str, Any], **overrides: Any) -> Consumer:
    """A consumer for explicit assignment: a throwaway group id (never joined), no commits."""
    return Consumer(
        with_client_log(
            with_overrides(
                config,
                group_id=f"streamer-reader-{uuid.uuid4().hex}",
                enable_auto_commit=False,
                enable_auto_offset_store=False,
                **overrides,
            )
        )
    )


def watermarks(
    consumer: Consumer, topic: str, partition: int = 0, timeout: float = 10.0, unreachable_for: float = 60.0
) -> tuple[int, int] | None:
    """(low, high) offsets of a partition, or None if a reachable broker says it does not exist.

    librdkafka's "unknown partition" is only believed once a metadata answer of a reachable broker
    confirms it (``streamer.kafka.presence``): it also means "my metadata cache is empty because the
    broker stopped answering". A broker that cannot be reached is asked again with backoff for up to
    ``unreachable_for`` seconds (a broker restart or stall is a pause, not a reason to stop a
    replication stream); past that the call raises ``KafkaClientError``, never reports a missing topic.
    """
    deadline = time.monotonic() + unreachable_for
    delay = 0.5
    while True:
        answers, detail = _observe(consumer, topic, partition, timeout)
        found = verdict(partition, answers)
        if found.kind is Kind.HELD:
            assert found.marks is not None
            return found.marks
        if found.kind is Kind.ABSENT:
            return None
        if found.kind is Kind.FAILED:
            raise KafkaClientError(f"watermarks of {topic}[{partition}]: {detail}")
        if time.monotonic() + delay > deadline:
            raise KafkaClientError(
                f"watermarks of {topic}[{partition}]: the broker did not answer within "
                f"{unreachable_for:.0f} s ({found.why}; last error: {detail}); the broker is unreachable "
                "or stalled, which is not a sign that the topic is gone"
            )
        log.warning("broker unreachable asking for %s[%d] offsets (%s: %s); retrying in %.1f s",
                    topic, partition, found.why, detail, delay)
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def _observe(consumer: Consumer, topic: str, partition: int, timeout: float) -> tuple[Answers, str]:
    """Ask for a partition's watermarks and, when the client calls it unknown, for the topic's
    metadata; what was answered (for ``presence.verdict``) and the last error's text."""
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        return Answers(marks=(int(low), int(high))), ""
    except KafkaException as exc:
        code, detail = _code(exc), str(exc)
    if not needs_metadata(code):
        return Answers(marks_error=code), detail
    try:
        cluster = consumer.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        return Answers(marks_error=code, metadata_error=_code(exc)), f"{detail}; metadata: {exc}"
    listed = cluster.topics.get(topic)
    metadata = Metadata(
        brokers=len(cluster.brokers or {}),
        listed=listed is not None,
        topic_error=None if listed is None or listed.error is None else int(listed.error.code()),
        partitions=frozenset(listed.partitions) if listed is not None else frozenset(),
    )
    return Answers(marks_error=code, metadata=metadata), detail


def _code(exc: KafkaException) -> int | None:
    error = exc.args[0] if exc.args else None
    return int(error.code()) if isinstance(error, KafkaError) else None


def end_offsets(config: Mapping[str, Any], topic: str, timeout: float = 10.0) -> dict[int, int]:
    """Partition -> high watermark (next offset to be written); empty if the topic does not exist."""
    consumer = _consumer(config)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return {}
        out: dict[int, int] = {}
        for partition in sorted(metadata.partitions):
            marks = watermarks(consumer, topic, partition, timeout)
            if marks is not None:
                out[partition] = marks[1]
        return out
    finally:
        consumer.close()


def is_data(msg: Message, topic: str, partition: int, position: int, doing: str = "") -> bool:
    """True for a data record; False for an end-of-partition event; raises on a consumer error.

    Offsets that vanished under the reader (retention, a recreated topic) raise DataLossError when
    the consumer's `auto.offset.reset` is `error`.
    """
    err = msg.error()
    if err is None:
        return True
    if err.code() == KafkaError._PARTITION_EOF:
        return False
    if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        raise DataLossError(
            f"data loss on topic {topic!r} partition {partition}: offset {position} is out "
            f"of range{doing} ({err.str()})"
        )
    raise KafkaClientError(f"reading {topic}[{partition}] at offset {position}: {err.str()}")


def iter_range(
    consumer: Consumer,
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    batch: int = 1000,
    poll: float = 0.05,
    idle_timeout: float = 30.0,
    clip: bool = True,
    check: Callable[[Message], None] | None = None,
) -> Iterator[Message]:
    """Data messages with start <= offset < end, read with explicit assignment, in offset order.

    Offsets taken by transaction markers or aborted records yield nothing, so the loop runs until
    the consumer's position reaches `end`, not until it has counted records. Short polls keep a
    small range fast (a long consume timeout would be paid on every call). Offsets that vanished
    under the reader (retention, a recreated topic) raise DataLossError when the consumer's
    `auto.offset.reset` is `error`. With clip=False, records past `end` that arrive in the same
    fetches are yielded too (for callers that want the true tail; see `probe_end`). `check` sees
    every message it could yield (consumer errors too) before anything else, and raises to refuse
    one (`record_limit.check_message`).
    """
    consumer.assign([TopicPartition(topic, partition, start)])
    position = start
    last_progress = time.monotonic()
    while position < end:
        for msg in consumer.consume(batch, poll):
            if check is not None and (not clip or int(msg.offset() or 0) < end):
                check(msg)
            if not is_data(msg, topic, partition, position, f" while reading up to {end}"):
                continue
            if not clip or int(msg.offset() or 0) < end:
                yield msg
        current = consumer.position([TopicPartition(topic, partition)])[0].offset
        if current != OFFSET_INVALID and current > position:
            position = current
            last_progress = time.monotonic()
        elif time.monotonic() - last_progress > idle_timeout:
            raise KafkaClientError(
                f"reading {topic}[{partition}] stalled at offset {position} (wanted up to {end}) for "
                f"{idle_timeout:.0f}s: an open transaction or an unreachable broker"
            )


def read_range(
    consumer: Consumer,
    topic: str,
    partition: int,
    start: int,
    end: int,
    idle_timeout: float = 30.0,
    clip: bool = True,
) -> list[Message]:
    """`iter_range` as a list, for small ranges."""
    return list(iter_range(consumer, topic, partition, start, end, idle_timeout=idle_timeout, clip=clip))


def probe_end(consumer: Consumer, topic: str, partition: int, high: int, wait: float = 0.02) -> int:
    """The real end of a partition given its reported high watermark `high` (best effort).

    Tansu reports the high watermark as the base offset of the last record batch + 1, which
    undercounts when a producer sent several records in one batch (transactional producers end with
    a one-record marker batch, so they are unaffected). Fetching from `high - 1` returns that whole
    batch and moves the consumer's position past it. If the fetch does not finish within `wait`,
    `high` is returned unchanged. The consumer's isolation level bounds what counts as the end.
    """
    if high <= 0:
        return high
    consumer.assign([TopicPartition(topic, partition, high - 1)])
    deadline = time.monotonic() + wait
    position = OFFSET_INVALID
    try:
        while True:
            consumer.consume(10_000, min(0.01, wait))
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position >= high or time.monotonic() >= deadline:
                break
    finally:
        consumer.unassign()
    return max(high, position)


def read_tail(
    config: Mapping[str, Any], topic: str, n: int = 1, partition: int = 0, timeout: float = 10.0
) -> list[Record]:
    """The last `n` committed data records of a partition, oldest first; [] if none or no topic.

    Transaction markers and aborted records occupy offsets, so the window is widened (doubling)
    until it holds `n` data records or covers the whole partition. A broker that does not answer
    at all raises `KafkaUnreachableError` within the connect timeout (`check_reachable`).
    """
    if n <= 0:
        return []
    check_reachable(config)
    # The bound comes from a read_uncommitted probe: some brokers (Tansu) report a bogus last stable
    # offset while a transaction is open; the committed read below then stops at the real one.
    probe = _consumer(config)
    try:
        marks = watermarks(probe, topic, partition, timeout)
    finally:
        probe.close()
    if marks is None:
        return []
    consumer = _consumer(config, isolation_level="read_committed", auto_offset_reset="earliest")
    try:
        low, high = marks
        window = max(2 * n, 8)
        while True:
            start = max(low, high - window)
            messages = read_range(consumer, topic, partition, start, high, idle_timeout=timeout, clip=False)
            if len(messages) >= n or start == low:
                return [to_record(m) for m in messages[-n:]]
            window *= 2
    finally:
        consumer.close()
