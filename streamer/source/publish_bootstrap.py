"""Publishing bootstrap records into a source's topic, with the agent's transactional id (which fences
a running agent), and resuming an interrupted bootstrap from its work directory (``BootstrapWork``,
``published_through``). Design: ``docs/design/source.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.serialization import MessageField, SerializationContext

from streamer.errors import StreamerError
from streamer.events.codec import EventDeserializer, EventSerializer
from streamer.events.model import (
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    Event,
    EventType,
    ProgressPayload,
    Source,
)
from streamer.filesystems import atomic_write
from streamer.kafka.client_log import with_client_log
from streamer.kafka.record_size import producer_settings, record_size, too_large
from streamer.kafka.settings import with_overrides
from streamer.kafka.topics import read_tail
from streamer.source.agent import AgentConfig
from streamer.source.errors import RecordTooLargeError
from streamer.source.topic_limit import ensure_sized_topic

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
    ensure_sized_topic(config.kafka, config.topic_name, config.max_record_bytes, config.kafka_timeout)
    serializer = EventSerializer()
    ctx = SerializationContext(config.topic_name, MessageField.VALUE)
    producer = Producer(with_client_log({
        **with_overrides(config.kafka, transactional_id=config.transactional_id, enable_idempotence=True,
                         acks="all", linger_ms=5),
        **producer_settings(config.max_record_bytes, config.compression),
    }))
    producer.init_transactions(config.kafka_timeout)  # fences the agent: the tail read next is final
    bootstrap_id = records[-1].event_id
    prev = tail_event_id(config)
    try:
        for start in range(0, len(records), per_transaction):
            chunk = records[start : start + per_transaction]
            producer.begin_transaction()
            for event in chunk:
                chained = dataclasses.replace(event, prev_event_id=prev)
                value = serializer(chained, ctx)
                key = event.db.encode() if event.db else None
                if too_large(key, value, config.max_record_bytes):  # a bootstrap is not retried: stop here
                    obj = ".".join(n for n in (event.db, event.table) if n) or None
                    raise RecordTooLargeError(event.event_id, event.event_type.value, obj,
                                              record_size(key, value), config.max_record_bytes)
                _produce(producer, config.topic_name, event.db, value)
                prev = event.event_id
            if start + per_transaction >= len(records):
                progress = Event(
                    Source(config.source_id, bootstrap_id, int(clock())),
                    EventType.PROGRESS,
                    ProgressPayload(bootstrap_id, max(head, bootstrap_id), policy),
                    ts_ms=int(clock() * 1000),
                    prev_event_id=prev,
                )
                _produce(producer, config.topic_name, None, serializer(progress, ctx))
            producer.commit_transaction(config.kafka_timeout)
            if on_published is not None:
                on_published(len(chunk))
    finally:
        producer.flush(config.kafka_timeout)
    log.info("published bootstrap %d: %d records to %s", bootstrap_id, len(records), config.topic_name)


def tail_event_id(config: AgentConfig) -> int:
    """The event id of the topic's last committed record (0 for an empty topic): what the next
    record published continues from (``Event.prev_event_id``)."""
    tail = read_tail(config.kafka, config.topic_name, n=1, timeout=config.kafka_timeout)
    if not tail or tail[-1].value is None:
        return 0
    return EventDeserializer()(tail[-1].value).event_id


def _produce(producer: Producer, topic: str, db: str | None, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=db.encode() if db else None, partition=0)
            return
        except BufferError:
            producer.poll(0.1)


# --- resuming ---------------------------------------------------------------------------------------


class BootstrapResumeError(StreamerError):
    """An interrupted bootstrap cannot be resumed as it is (the topic or the work dir disagree)."""


@dataclass(frozen=True)
class PendingBootstrap:
    """A dumped bootstrap kept in the work dir: its records (marker last) and what publishing needs."""

    records: list[Event]
    head: int
    policy: str
    finished: bool = False

    @property
    def bootstrap_id(self) -> int:
        return self.records[-1].event_id


class BootstrapWork:
    """``<dir>/bootstrap-<source id>.json`` (state) and ``.records`` (length-prefixed Avro records)."""

    def __init__(self, directory: str | Path, source_id: str, topic: str) -> None:
        self.dir = Path(directory)
        self.source_id = source_id
        self.topic = topic
        self.state_path = self.dir / f"bootstrap-{source_id}.json"
        self.records_path = self.dir / f"bootstrap-{source_id}.records"

    def save(self, records: Sequence[Event], *, head: int, policy: str) -> None:
        """Keep the records (before the first is published), then the state that names them."""
        serializer = EventSerializer()
        ctx = SerializationContext(self.topic, MessageField.VALUE)
        blob = bytearray()
        for event in records:
            value = serializer(event, ctx)
            blob += struct.pack(">I", len(value)) + value
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.records_path, bytes(blob))
        self._write_state(records[-1].event_id, len(records), head, policy, finished=False)

    def mark_finished(self) -> None:
        state = self._state()
        if state is not None:
            self._write_state(state.bootstrap_id, state.records, state.head, state.policy, finished=True)
            with contextlib.suppress(FileNotFoundError):
                self.records_path.unlink()  # a finished bootstrap is never published again

    def load(self) -> PendingBootstrap | None:
        """The kept bootstrap (None: none kept); raises if the files are not a whole bootstrap."""
        state = self._state()
        if state is None:
            return None
        if (state.source_id, state.topic) != (self.source_id, self.topic):
            raise BootstrapResumeError(
                f"{self.state_path} holds a bootstrap of source {state.source_id!r} to topic "
                f"{state.topic!r}, not {self.source_id!r} to {self.topic!r}; use another --work-dir"
            )
        bid = state.bootstrap_id
        if state.finished:
            marker = Event(Source(self.source_id, bid, 0), EventType.BOOTSTRAP_END,
                           BootstrapMarkerPayload(bid, state.records - 1))
            return PendingBootstrap([marker], state.head, state.policy, finished=True)
        try:
            blob = self.records_path.read_bytes()
        except FileNotFoundError as exc:
            raise BootstrapResumeError(f"{self.records_path} is missing: the kept bootstrap {bid} "
                                       "cannot be resumed; start a new one with --force") from exc
        deserialize = EventDeserializer()
        records: list[Event] = []
        at = 0
        while at + 4 <= len(blob):
            (size,) = struct.unpack_from(">I", blob, at)
            records.append(deserialize(blob[at + 4 : at + 4 + size]))
            at += 4 + size
        if len(records) != state.records or records[-1].event_id != bid:
            raise BootstrapResumeError(f"{self.records_path} holds {len(records)} records, not the "
                                       f"{state.records} of bootstrap {bid}; start a new one with --force")
        return PendingBootstrap(records, state.head, state.policy)

    def _state(self) -> _State | None:
        try:
            raw = json.loads(self.state_path.read_text(encoding="utf-8"))
            return _State(str(raw["source_id"]), str(raw["topic"]), int(raw["bootstrap_id"]),
                          int(raw["records"]), int(raw["head"]), str(raw["policy"]), bool(raw["finished"]))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            raise BootstrapResumeError(f"{self.state_path} is not a bootstrap state file: {exc}") from exc

    def _write_state(
        self, bootstrap_id: int, records: int, head: int, policy: str, *, finished: bool
    ) -> None:
        state = _State(self.source_id, self.topic, bootstrap_id, records, head, policy, finished)
        atomic_write(self.state_path, json.dumps(dataclasses.asdict(state), indent=1).encode())


@dataclass(frozen=True)
class _State:
    source_id: str
    topic: str
    bootstrap_id: int
    records: int  # with the marker
    head: int
    policy: str
    finished: bool


@dataclass(frozen=True)
class Published:
    """How far a bootstrap got in the topic: records 1..``through`` are there; ``finished``: its marker."""

    through: int
    finished: bool


def published_through(config: AgentConfig, bootstrap_id: int, total: int) -> Published:
    """Scan the topic's committed tail (the whole bootstrap fits in it) for the bootstrap's records.

    Refuses when other events follow its last record: an agent published after the interrupted
    bootstrap, so what is left of it can no longer be appended in order."""
    tail = read_tail(config.kafka, config.topic_name, n=total + 2, timeout=config.kafka_timeout)
    deserialize = EventDeserializer()
    through, finished, after = 0, False, 0
    for record in tail:
        if record.value is None:
            continue
        event = deserialize(record.value)
        p = event.payload
        if event.source.source_id != config.source_id:
            raise BootstrapResumeError(f"topic {config.topic_name} holds events of source "
                                       f"{event.source.source_id!r}, not {config.source_id!r}")
        if isinstance(p, BootstrapObjectPayload) and p.bootstrap_id == bootstrap_id:
            through, after = max(through, p.sequence), 0
        elif isinstance(p, BootstrapMarkerPayload) and p.bootstrap_id == bootstrap_id:
            finished, after = True, 0
        elif not isinstance(p, ProgressPayload):
            after += 1
    if through and not finished and after:
        raise BootstrapResumeError(
            f"bootstrap {bootstrap_id} was interrupted after record {through} of {total} and other events "
            f"were published after it (was the agent started?); start a new bootstrap with --force"
        )
    return Published(total if finished else through, finished)
