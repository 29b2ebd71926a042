"""The agent's Kafka producer: idempotent, transactional, one partition, fenced by its successor."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from streamer.kafka.settings import masked, with_overrides
from streamer.source.errors import ProducerFencedError

log = logging.getLogger("streamer.source.agent")  # the agent's producer: its lines under the agent's name

_FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


class TransactionalProducer:
    """One producer with the source's ``transactional.id``; ``open`` fences every older one."""

    def __init__(self, kafka: dict[str, Any], transactional_id: str, topic: str, timeout: float) -> None:
        self.kafka = kafka
        self.transactional_id = transactional_id
        self.topic = topic
        self.timeout = timeout
        self._producer: Producer | None = None

    def open(self) -> None:
        """A new producer; its ``init_transactions`` fences older producers with the same id."""
        config = with_overrides(
            self.kafka,
            transactional_id=self.transactional_id,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
        )
        log.debug("producer config %s", masked(config))
        producer = Producer(config)
        producer.init_transactions(self.timeout)
        self._producer = producer

    def ready(self) -> Producer:
        """The open producer, opened first if there is none."""
        if self._producer is None:
            self.open()
        assert self._producer is not None
        return self._producer

    def close(self) -> None:
        """Drop the producer without committing; an open transaction is aborted by the next owner."""
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.purge()
                with warnings.catch_warnings():  # a failed abort of a fenced producer is expected here
                    warnings.simplefilter("ignore", RuntimeWarning)
                    producer.close()
            except (KafkaException, RuntimeError) as exc:
                log.debug("closing the producer: %s", exc)

    def send(self, records: Iterable[tuple[bytes | None, bytes]]) -> None:
        """``(key, value)`` records to partition 0 in one transaction, committed before this returns."""
        producer = self.ready()
        producer.begin_transaction()
        for key, value in records:
            self._produce(producer, key, value)
        producer.commit_transaction(self.timeout)

    def _produce(self, producer: Producer, key: bytes | None, value: bytes) -> None:
        while True:
            try:
                producer.produce(self.topic, value=value, key=key, partition=0)
                return
            except BufferError:
                producer.poll(0.1)  # local queue full: let deliveries drain

    def raise_if_fenced(self, exc: KafkaException) -> None:
        """``ProducerFencedError`` if ``exc`` says another producer took over the transactional id."""
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() in _FENCED:
            raise ProducerFencedError(
                f"another agent took over transactional id {self.transactional_id} on {self.topic}; stop "
                "one of them"
            ) from exc
