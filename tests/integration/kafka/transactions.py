"""Transactional producers for the Kafka tests: committed and aborted batches, as the agent writes."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer

from streamer.kafka.client_log import with_client_log


def txn_producer(config: dict[str, Any], txn_id: str) -> Producer:
    """An idempotent producer with ``txn_id``, its transactions initialised (fencing an older one)."""
    producer = Producer(with_client_log({**config, "enable.idempotence": True, "transactional.id": txn_id}))
    producer.init_transactions(10)
    return producer


def send(
    producer: Producer, topic: str, values: list[bytes], *, key: bytes = b"db", commit: bool = True
) -> None:
    """``values`` in one transaction, committed or aborted."""
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, key=key)
    if commit:
        producer.commit_transaction(10)
    else:
        producer.abort_transaction(10)
