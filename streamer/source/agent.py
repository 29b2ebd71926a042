"""The source agent: notification log -> decode -> enrich -> filter -> Avro -> Kafka, exactly once.

Design (transactions, recovery, unknown events, the event chain): ``docs/design/source.md``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from streamer import metrics
from streamer.errors import ConfigError, StreamerError
from streamer.events.codec import EventSerializer
from streamer.hive.notification import DEFAULT_CATALOG, NotificationRow
from streamer.kafka.errors import KafkaClientError
from streamer.kafka.naming import topic_or_default
from streamer.kafka.record_size import DEFAULT_COMPRESSION, DEFAULT_MAX_RECORD_BYTES
from streamer.source.enrich import FROM_READER, Enricher, EnrichSettings
from streamer.source.errors import ProducerFencedError as ProducerFencedError  # re-exported
from streamer.source.gaps import ContiguousReader
from streamer.source.insert_files import Locator
from streamer.source.policy import PolicySet
from streamer.source.prepare import Prepared, Preparer, cut_at_oversized, failure_kind
from streamer.source.producer import TransactionalProducer
from streamer.source.publish import publish_batch, refused_as_too_large
from streamer.source.reader import NotificationReader
from streamer.source.tail import last_published_id
from streamer.source.topic_limit import ensure_sized_topic
from streamer.source.watch import WATCH_SECONDS, WatchCatalog, Watcher
from streamer.source.watch_cycle import hive_database, watch_catalog_for, watch_cycle

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
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES  # a larger record stops the agent (never retried)
    compression: str = DEFAULT_COMPRESSION
    watch_seconds: float = WATCH_SECONDS  # tables whose writers log nothing, listed this often (0: off)

    @property
    def topic_name(self) -> str:
        return topic_or_default(self.topic, self.source_id)

    @property
    def transactional_id(self) -> str:
        return f"streamer-source-{self.source_id}"


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
        locator: Locator | None = FROM_READER,
        watch_catalog: WatchCatalog | None = FROM_READER,
    ) -> None:
        """``locator``: where INSERTs without files are located (default: through the reader,
        ``insert_files.locator_for``; ``source run`` passes the Thrift metastore when given both
        ``--notification-db`` and ``--hms-uri``). ``watch_catalog``: where the tables whose writers
        log nothing are found (``streamer.source.watch``; default: the reader's Thrift metastore)."""
        if config.batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {config.batch_size}")
        self.config = config
        self.reader = reader
        self.policy = policy or PolicySet.parse([])
        self.serializer = serializer or EventSerializer()
        self.enricher = Enricher(config.enrich, reader, locator=locator)
        self.contiguous = ContiguousReader(reader, config.gap_settle_seconds)
        self.preparer = Preparer(self.enricher, self.serializer, config.topic_name)
        self.producer = TransactionalProducer(config.kafka, config.transactional_id, config.topic_name,
                                              config.kafka_timeout, max_record_bytes=config.max_record_bytes,
                                              compression=config.compression)
        self._clock = clock
        self.last_id = 0
        self.position_known = False  # last_id was read from the topic (lag means something)
        self.head = 0  # the source's newest event id, as last read
        self.started = False
        self.watcher: Watcher | None = None
        if config.watch_seconds > 0:
            catalog = watch_catalog_for(reader) if watch_catalog is FROM_READER else watch_catalog
            if catalog is not None:
                self.watcher = Watcher(catalog, self.policy, config.enrich)
            elif watch_catalog is FROM_READER and hive_database(reader):
                log.warning("no Thrift metastore to find the tables whose writers log nothing (Spark "
                            "datasource tables, Hive Parquet/ORC tables Spark writes): they are not "
                            "watched, and their writes reach no target; give --hms-uri as well "
                            "(streamer.source.watch)")
        self._watched_at = float("-inf")

    # --- life cycle ---

    def start(self) -> None:
        """Create the topic if missing, fence older producers, and learn the last published id."""
        ensure_sized_topic(self.config.kafka, self.config.topic_name, self.config.max_record_bytes,
                           self.config.kafka_timeout)
        self.producer.open()
        self.last_id = self.recover_last_id(refuse_unfinished_bootstrap=True)
        self.position_known = True
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
        self.started = False
        self.producer.close()
        self.enricher.close()
        if self.watcher is not None:
            self.watcher.close()

    def recover_last_id(self, *, refuse_unfinished_bootstrap: bool = False) -> int:
        """The last event id in the topic's committed tail (``streamer.source.tail.last_published_id``)."""
        return last_published_id(self.config.kafka, self.config.topic_name, self.config.source_id,
                                  timeout=self.config.kafka_timeout, start_after=self.config.start_after,
                                  refuse_unfinished_bootstrap=refuse_unfinished_bootstrap)

    # --- one step ---

    def run_once(self) -> int:
        """Publish the next batch; the number of source events it passed (0 when caught up)."""
        if not self.started:
            self.start()
        rows = self.contiguous.read_after(self.last_id, self.config.batch_size)
        if self.watcher is not None:
            self.watcher.note(rows)
        if not rows:
            self._observe_head(self.reader.head_event_id())
            return 0
        head = max(self.reader.head_event_id(), rows[-1].event_id)
        self._observe_head(head)  # read, not yet published: lag, even if the publish below hangs
        prepared, failure = self._prepare(rows)
        if prepared:
            try:
                self._publish(prepared, head)
            except KafkaException as exc:
                self._after_failed_commit(exc, prepared)
                return 0
        if failure is not None:
            metrics.SOURCE_ERRORS.labels(failure_kind(failure)).inc()
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
                    self.producer.raise_if_fenced(exc)
                metrics.SOURCE_ERRORS.labels("kafka").inc()
                log.error("Kafka at %s is unavailable (%s); retrying in %.0f s",
                          self.config.kafka.get("bootstrap.servers"), exc, backoff)
                self.close()
                self._observe_backlog()
                stop.wait(backoff)
                backoff = min(backoff * 2, self.config.max_backoff)
                continue
            if passed == 0:
                try:
                    self.watch_if_due(force=once)
                except (KafkaException, KafkaClientError) as exc:
                    if isinstance(exc, KafkaException):
                        self.producer.raise_if_fenced(exc)
                    metrics.SOURCE_ERRORS.labels("kafka").inc()
                    log.error("Kafka at %s is unavailable (%s); retrying in %.0f s",
                              self.config.kafka.get("bootstrap.servers"), exc, backoff)
                    self.close()
                    stop.wait(backoff)
                    continue
                if once:
                    return
                stop.wait(self.config.poll_interval)

    def watch_if_due(self, *, force: bool = False) -> int:
        """One watch cycle (``streamer.source.watch_cycle``) when ``--watch-seconds`` have passed since
        the last (``force``: now); the number of replaces it published."""
        if self.watcher is None or not self.started:
            return 0
        now = time.monotonic()
        if not force and now - self._watched_at < self.config.watch_seconds:
            return 0
        self._watched_at = now
        return watch_cycle(self, self.watcher)

    # --- internals ---

    def _prepare(self, rows: list[NotificationRow]) -> tuple[list[Prepared], StreamerError | None]:
        """Decode, enrich, filter and encode rows, stopping at the first one that fails or is too large;
        the first published record follows ``self.last_id`` in the event chain."""
        prepared, failure = self.preparer.prepare(rows, source_id=self.config.source_id,
                                                  catalog=self.config.catalog, policy=self.policy,
                                                  prev=self.last_id, now_ms=int(self._clock() * 1000))
        prepared, oversized = cut_at_oversized(prepared, self.config.max_record_bytes)
        return prepared, oversized or failure

    def _publish(self, prepared: list[Prepared], head: int) -> None:
        self.last_id = publish_batch(self.producer, self.preparer, prepared, source_id=self.config.source_id,
                                     policy=self.policy, after=self.last_id, head=head, clock=self._clock)
        self._observe_head(head)

    def _after_failed_commit(self, exc: KafkaException, prepared: list[Prepared]) -> None:
        """The transaction's fate may be unknown: fence it with a new producer and trust the topic (a
        record the broker refused as too large stops the agent: every retry would be refused too)."""
        self.producer.raise_if_fenced(exc)
        too_large = refused_as_too_large(self.producer, prepared)
        if too_large is not None:
            metrics.SOURCE_ERRORS.labels("record_too_large").inc()
            raise too_large from exc
        metrics.SOURCE_ERRORS.labels("commit").inc()
        log.warning("publishing events %d..%d failed (%s); recreating the producer and re-reading the "
                    "topic tail", prepared[0].event_id, prepared[-1].event_id, exc)
        self.close()
        self.producer.open()
        self.last_id = self.recover_last_id()
        self.position_known = True
        self.started = True
        metrics.SOURCE_LAST_EVENT_ID.set(self.last_id)
        log.info("resuming after event id %d", self.last_id)

    def _observe_head(self, head: int) -> None:
        self.head = head
        metrics.SOURCE_LAST_EVENT_ID.set(self.last_id)
        metrics.SOURCE_HEAD_EVENT_ID.set(head)
        metrics.SOURCE_LAG_EVENTS.set(source_lag(head, self.last_id))

    def _observe_backlog(self) -> None:
        """While Kafka is out the loop never reaches a publish, which is where lag is refreshed: read
        the source's head here so that lag grows with every event the source writes meanwhile.

        Nothing is shown before the agent has once read its position from the topic (lag against an
        unknown position would be the whole log); ``streamer_source_errors_total{kind="kafka"}``
        tells that case. A metastore that fails too leaves lag as last seen, with a warning."""
        if not self.position_known:
            return
        try:
            head = self.reader.head_event_id()
        except Exception as exc:  # any reader's error; the next read raises it properly
            log.warning("reading the source's newest event id failed too (%s); lag stays at %d events",
                        exc, source_lag(self.head, self.last_id))
            return
        self._observe_head(max(head, self.last_id))


def source_lag(head: int, last_published: int) -> int:
    """Events the source has written and the agent has not published (never negative)."""
    return max(0, head - last_published)

