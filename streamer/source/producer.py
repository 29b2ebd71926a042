"""The agent's Kafka producer: idempotent, transactional, one partition, fenced by its successor."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from streamer.kafka.client_log import ClientLog, with_client_log
from streamer.kafka.record_size import DEFAULT_COMPRESSION, DEFAULT_MAX_RECORD_BYTES, producer_settings
from streamer.kafka.settings import masked, with_overrides
from streamer.source.errors import ProducerFencedError

log = logging.getLogger("streamer.source.agent")  # the agent's producer: its lines under the agent's name

_FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


class TransactionalProducer:
    """One producer with the source's ``transactional.id``; ``open`` fences every older one."""

    def __init__(
        self,
        kafka: dict[str, Any],
        transactional_id: str,
        topic: str,
        timeout: float,
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        compression: str = DEFAULT_COMPRESSION,
    ) -> None:
        self.kafka = kafka
        self.transactional_id = transactional_id
        self.topic = topic
        self.timeout = timeout
        self.max_record_bytes = max_record_bytes
        self.compression = compression
        self.client_log = ClientLog()
        self._producer: Producer | None = None
        self._refused: list[tuple[int, KafkaError]] = []  # (record index, error) of failed deliveries

    def open(self) -> None:
        """A new producer; its ``init_transactions`` fences older producers with the same id."""
        config = with_overrides(
            self.kafka,
            transactional_id=self.transactional_id,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
        )
        # the record size limit wins over a -X message.max.bytes: the agent checks records against it
        config.update(producer_settings(self.max_record_bytes, self.compression))
        log.debug("producer config %s", masked(config))
        producer = Producer(with_client_log(config, self.client_log))
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
        """``(key, value)`` records to partition 0 in one transaction, committed before this returns.

        A commit that fails after the broker refused records leaves their indexes in ``refused``."""
        producer = self.ready()
        self._refused = []
        producer.begin_transaction()
        for index, (key, value) in enumerate(records):
            self._produce(producer, key, value, index)
        producer.commit_transaction(self.timeout)

    def refused(self) -> list[tuple[int, KafkaError]]:
        """(index in the last ``send``, error) of each record the broker refused to take."""
        if self._producer is not None:
            self._producer.poll(0)  # serve delivery reports a failed commit left queued
        return list(self._refused)

    def _produce(self, producer: Producer, key: bytes | None, value: bytes, index: int) -> None:
        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                self._refused.append((index, err))

        while True:
            try:
                producer.produce(self.topic, value=value, key=key, partition=0, on_delivery=delivered)
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
