"""The source agent loop: notification log → decode → enrich → filter → Avro → Kafka, exactly once.

Each ``run_once`` reads one contiguous batch after the last published event id and publishes it in
one Kafka transaction, ending with a PROGRESS record (the last id passed and the source's head), so
progress advances past filtered events and consumers learn the lag. The last published id lives
only in the topic: at start-up (and after any doubtful commit) the agent fences older producers
with the same ``transactional.id`` and reads the topic's last committed record. A crash at any
point therefore neither loses nor duplicates an event id in the read_committed stream.

An event that cannot be decoded, enriched or encoded halts the agent at that event: the events
before it are published, nothing after it is. An event of a type this streamer does not know (a
newer Hive's) is no such failure: it is published as an opaque ``UNKNOWN`` event that halts only
the database it names on each target; one that names no database (a catalog-level object such as
Hive 4's data connectors) has nothing to halt and nothing streamer replicates, so it is passed
over with a WARNING naming its id and type and counted in ``streamer_source_events_skipped_total``.
Events of another metastore catalog than ``AgentConfig.catalog`` (``CAT_NAME``, e.g. HDP's
``spark``) are passed over like filtered ones: they never reach a same-named database of a target.

Every record names the event id of the record before it in the topic (``Event.prev_event_id``),
so a target can tell that none is missing (``streamer.target.state.chain``).
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.serialization import MessageField, SerializationContext

from streamer import metrics
from streamer.errors import CodecError, ConfigError, DecodeError, StreamerError
from streamer.events.codec import EventDeserializer, EventSerializer
from streamer.events.model import BootstrapObjectPayload, Event, EventType, ProgressPayload, Source
from streamer.hive.decode import decode_row, is_known_type, opaque_event
from streamer.hive.notification import DEFAULT_CATALOG, NotificationRow, in_catalog
from streamer.kafka.errors import KafkaClientError
from streamer.kafka.naming import topic_or_default
from streamer.kafka.settings import masked, with_overrides
from streamer.kafka.topics import ensure_topic, read_tail
from streamer.source.enrich import Enricher, EnrichSettings
from streamer.source.errors import UnfinishedBootstrapError
from streamer.source.gaps import ContiguousReader
from streamer.source.policy import PolicySet
from streamer.source.policy_record import policy_record
from streamer.source.reader import NotificationReader

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentConfig:
    """Everything the loop needs besides its reader; ``kafka`` is a validated librdkafka config."""

    source_id: str
    kafka: dict[str, Any]
    topic: str | None = None
    batch_size: int = 500
    poll_interval: float = 1.0
    gap_settle_seconds: float = 5.0
    enrich: EnrichSettings = field(default_factory=EnrichSettings)
    start_after: int | None = None
    kafka_timeout: float = 30.0
    max_backoff: float = 30.0
    catalog: str = DEFAULT_CATALOG  # events of other metastore catalogs are passed over

    @property
    def topic_name(self) -> str:
        return topic_or_default(self.topic, self.source_id)

    @property
    def transactional_id(self) -> str:
        return f"streamer-source-{self.source_id}"


@dataclass(frozen=True)
class _Prepared:
    event_id: int
    event_type: str
    key: bytes | None
    value: bytes | None  # None: passed over (``passed`` says why)
    passed: str | None = None  # "policy", "catalog" (another metastore catalog), "unknown" (no database)
    opaque_db: str | None = None  # published as UNKNOWN: the database it halts on targets


class ProducerFencedError(StreamerError):
    """Another agent took over this source's transactional id; two agents must never run at once."""


class SourceAgent:
    """One source's agent. ``start()`` then ``run_once()`` repeatedly (or ``run()``)."""

    def __init__(
        self,
        config: AgentConfig,
        reader: NotificationReader,
        policy: PolicySet | None = None,
        *,
        serializer: EventSerializer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if config.batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {config.batch_size}")
        self.config = config
        self.reader = reader
        self.policy = policy or PolicySet.parse([])
        self.serializer = serializer or EventSerializer()
        self.enricher = Enricher(config.enrich, reader)
        self.contiguous = ContiguousReader(reader, config.gap_settle_seconds)
        self._clock = clock
        self._producer: Producer | None = None
        self._ctx = SerializationContext(config.topic_name, MessageField.VALUE)
        self.last_id = 0
        self.started = False

    # --- life cycle ---

    def start(self) -> None:
        """Create the topic if missing, fence older producers, and learn the last published id."""
        ensure_topic(self.config.kafka, self.config.topic_name, timeout=self.config.kafka_timeout)
        self._new_producer()
        self.last_id = self.recover_last_id(refuse_unfinished_bootstrap=True)
        metrics.SOURCE_LAST_EVENT_ID.set(self.last_id)
        self._warn_if_policy_matches_nothing()
        # a PROGRESS record at once: consumers learn the source head (lag) before the next change
        self._publish([], max(self.last_id, self.reader.head_event_id()))
        self.started = True
        log.info("source %s publishes to %s after event id %d (policy: %s)", self.config.source_id,
                 self.config.topic_name, self.last_id, self.policy)

    def _warn_if_policy_matches_nothing(self) -> None:
        if not self.policy.policies:
            return
        known = self.reader.databases()
        if known and not any(self.policy.includes_db(db) for db in known):
            log.warning(
                "replication policy %s matches none of the source's databases (%s): nothing will be "
                "published until such a database appears", self.policy, ", ".join(sorted(known)[:20]),
            )

    def close(self) -> None:
        """Drop the producer without committing; an open transaction is aborted by the next owner."""
        producer, self._producer = self._producer, None
        self.started = False
        if producer is not None:
            try:
                producer.purge()
                with warnings.catch_warnings():  # a failed abort of a fenced producer is expected here
                    warnings.simplefilter("ignore", RuntimeWarning)
                    producer.close()
            except (KafkaException, RuntimeError) as exc:
                log.debug("closing the producer: %s", exc)

    def recover_last_id(self, *, refuse_unfinished_bootstrap: bool = False) -> int:
        """The last event id in the topic's committed tail (0, or ``start_after``, if it is empty).

        ``start_after`` is for an empty topic: a topic that already holds events past it is continued
        (a restarted agent keeps its setting); one that ends before it is refused (``ConfigError``),
        since the events in between would never be published.

        With ``refuse_unfinished_bootstrap`` a tail inside a bootstrap (records, no marker yet: a
        ``streamer bootstrap`` was interrupted) raises ``UnfinishedBootstrapError``.
        """
        tail = read_tail(self.config.kafka, self.config.topic_name, n=1, timeout=self.config.kafka_timeout)
        if not tail:
            return self.config.start_after or 0
        last = self._tail_id(tail[-1], refuse_unfinished_bootstrap)
        start_after = self.config.start_after
        if start_after is not None and last < start_after:
            raise ConfigError(
                f"topic {self.config.topic_name} already ends at event {last}, before --start-after "
                f"{start_after}: events {last + 1}..{start_after} would never be published. --start-after "
                "only applies to an empty topic; publish to a new topic, or drop --start-after to "
                f"continue after {last}"
            )
        return last

    def _tail_id(self, record: Any, refuse_unfinished_bootstrap: bool) -> int:
        if record.value is None:
            raise KafkaClientError(f"topic {self.config.topic_name}: last record at offset {record.offset} "
                                   "has no value; is this topic streamer's?")
        try:
            event = EventDeserializer()(record.value)
        except CodecError as exc:
            raise KafkaClientError(f"topic {self.config.topic_name}: last record at offset {record.offset} "
                                   f"is not a streamer event ({exc}); is this topic streamer's?") from exc
        if event.source.source_id != self.config.source_id:
            raise ConfigError(f"topic {self.config.topic_name} holds events of source "
                              f"{event.source.source_id!r}, not {self.config.source_id!r}")
        if isinstance(event.payload, ProgressPayload):
            return event.payload.last_event_id
        if refuse_unfinished_bootstrap and isinstance(event.payload, BootstrapObjectPayload):
            p = event.payload
            raise UnfinishedBootstrapError(self.config.topic_name, p.bootstrap_id, p.sequence, p.total)
        return event.event_id

    # --- one step ---

    def run_once(self) -> int:
        """Publish the next batch; the number of source events it passed (0 when caught up)."""
        if not self.started:
            self.start()
        rows = self.contiguous.read_after(self.last_id, self.config.batch_size)
        if not rows:
            self._observe_head(self.reader.head_event_id())
            return 0
        head = max(self.reader.head_event_id(), rows[-1].event_id)
        prepared, failure = self._prepare(rows)
        if prepared:
            try:
                self._publish(prepared, head)
            except KafkaException as exc:
                self._after_failed_commit(exc, prepared)
                return 0
        if failure is not None:
            metrics.SOURCE_ERRORS.labels("decode").inc()
            raise failure
        return len(prepared)

    def run(self, *, once: bool = False, stop: threading.Event | None = None) -> None:
        """Loop until ``stop`` is set (or, with ``once``, until caught up). Broker outages are retried."""
        stop = stop or threading.Event()
        backoff = 1.0
        while not stop.is_set():
            try:
                passed = self.run_once()
                backoff = 1.0
            except (KafkaException, KafkaClientError) as exc:
                if isinstance(exc, KafkaException):
                    self._raise_if_fenced(exc)
                metrics.SOURCE_ERRORS.labels("kafka").inc()
                log.error("Kafka at %s is unavailable (%s); retrying in %.0f s",
                          self.config.kafka.get("bootstrap.servers"), exc, backoff)
                self.close()
                stop.wait(backoff)
                backoff = min(backoff * 2, self.config.max_backoff)
                continue
            if passed == 0:
                if once:
                    return
                stop.wait(self.config.poll_interval)

    # --- internals ---

    def _prepare(self, rows: list[NotificationRow]) -> tuple[list[_Prepared], StreamerError | None]:
        """Decode, enrich, filter and encode rows, stopping at the first one that fails.

        Each published record names the id of the one published before it (``prev_event_id``): the
        last id already in the topic for the first, PROGRESS included (its id is ``self.last_id``)."""
        out: list[_Prepared] = []
        now_ms = int(self._clock() * 1000)
        prev = self.last_id
        for row in rows:
            if not in_catalog(row, self.config.catalog):
                out.append(_Prepared(row.event_id, row.event_type, None, None, "catalog"))
                continue
            try:
                if is_known_type(row.event_type):
                    event = self.enricher(decode_row(row, self.config.source_id))
                else:
                    event = opaque_event(row, self.config.source_id)
                    if event.db is None:
                        out.append(_Prepared(row.event_id, row.event_type, None, None, "unknown"))
                        continue
                selected = self.policy.select(replace(event, ts_ms=now_ms))
                if selected is not None:
                    selected = replace(selected, prev_event_id=prev)
                value = None if selected is None else self.serializer(selected, self._ctx)
            except DecodeError as exc:
                return out, exc
            except CodecError as exc:
                return out, DecodeError(f"cannot encode: {exc}", event_id=row.event_id,
                                        event_type=row.event_type, obj=_obj(row))
            if selected is None:
                out.append(_Prepared(row.event_id, row.event_type, None, None, "policy"))
                continue
            key = selected.db.encode() if selected.db else None
            opaque_db = selected.db if selected.event_type is EventType.UNKNOWN else None
            out.append(_Prepared(row.event_id, row.event_type, key, value, opaque_db=opaque_db))
            prev = row.event_id
        return out, None

    def _publish(self, prepared: list[_Prepared], head: int) -> None:
        producer = self._producer_now()
        last = prepared[-1].event_id if prepared else self.last_id
        prev = next((p.event_id for p in reversed(prepared) if p.value is not None), self.last_id)
        started = time.monotonic()
        producer.begin_transaction()
        for item in prepared:
            if item.value is not None:
                self._produce(producer, item.key, item.value)
        progress = Event(
            source=Source(self.config.source_id, last, int(self._clock())),
            event_type=EventType.PROGRESS,
            payload=ProgressPayload(last, head, policy_record(self.policy)),
            ts_ms=int(self._clock() * 1000),
            prev_event_id=prev,
        )
        self._produce(producer, None, self.serializer(progress, self._ctx))
        producer.commit_transaction(self.config.kafka_timeout)
        metrics.SOURCE_PUBLISH_SECONDS.observe(time.monotonic() - started)
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
        self.last_id = last
        self._observe_head(head)
        log.debug("published events ..%d (%d of %d, rest filtered)", last, published, len(prepared))

    def _produce(self, producer: Producer, key: bytes | None, value: bytes) -> None:
        while True:
            try:
                producer.produce(self.config.topic_name, value=value, key=key, partition=0)
                return
            except BufferError:
                producer.poll(0.1)  # local queue full: let deliveries drain

    def _after_failed_commit(self, exc: KafkaException, prepared: list[_Prepared]) -> None:
        """The transaction's fate may be unknown: fence it with a new producer and trust the topic."""
        self._raise_if_fenced(exc)
        metrics.SOURCE_ERRORS.labels("commit").inc()
        log.warning("publishing events %d..%d failed (%s); recreating the producer and re-reading the "
                    "topic tail", prepared[0].event_id, prepared[-1].event_id, exc)
        self.close()
        self._new_producer()
        self.last_id = self.recover_last_id()
        self.started = True
        metrics.SOURCE_LAST_EVENT_ID.set(self.last_id)
        log.info("resuming after event id %d", self.last_id)

    def _raise_if_fenced(self, exc: KafkaException) -> None:
        error = exc.args[0] if exc.args else None
        fenced = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
        if isinstance(error, KafkaError) and error.code() in fenced:
            raise ProducerFencedError(
                f"another agent took over transactional id {self.config.transactional_id} on "
                f"{self.config.topic_name}; stop one of them"
            ) from exc

    def _new_producer(self) -> None:
        config = with_overrides(
            self.config.kafka,
            transactional_id=self.config.transactional_id,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
        )
        log.debug("producer config %s", masked(config))
        producer = Producer(config)
        producer.init_transactions(self.config.kafka_timeout)
        self._producer = producer

    def _producer_now(self) -> Producer:
        if self._producer is None:
            self._new_producer()
        assert self._producer is not None
        return self._producer

    def _observe_head(self, head: int) -> None:
        metrics.SOURCE_LAST_EVENT_ID.set(self.last_id)
        metrics.SOURCE_HEAD_EVENT_ID.set(head)
        metrics.SOURCE_LAG_EVENTS.set(max(0, head - self.last_id))


def _obj(row: NotificationRow) -> str | None:
    return ".".join(n for n in (row.db_name, row.table_name) if n and n.strip() and n != "null") or None
