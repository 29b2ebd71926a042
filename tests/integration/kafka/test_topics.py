from __future__ import annotations

import socket
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.client_log import with_client_log
from streamer.kafka.errors import BrokerError
from streamer.kafka.topics import end_offsets, ensure_topic, probe_end, read_tail
from tests.integration.kafka.transactions import send, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_ensure_topic_is_idempotent(kafka_config: dict[str, Any], topic: str) -> None:
    assert ensure_topic(kafka_config, topic) is False  # the fixture created it
    assert ensure_topic(kafka_config, topic + "-new", partitions=2) is True
    assert end_offsets(kafka_config, topic + "-new") == {0: 0, 1: 0}
    assert end_offsets(kafka_config, topic + "-absent") == {}


def test_read_tail_sees_only_committed_records(kafka_config: dict[str, Any], topic: str) -> None:
    assert read_tail(kafka_config, topic) == []
    producer = txn_producer(kafka_config, f"txn-{topic}")
    send(producer, topic, [b"1", b"2"], key=b"db1")
    send(producer, topic, [b"3"], key=b"db1")
    send(producer, topic, [b"aborted-1", b"aborted-2"], key=b"db1", commit=False)

    last = read_tail(kafka_config, topic)
    assert [r.value for r in last] == [b"3"]
    assert last[0].key == b"db1" and last[0].topic == topic and last[0].timestamp is not None
    assert [r.value for r in read_tail(kafka_config, topic, n=3)] == [b"1", b"2", b"3"]
    assert [r.value for r in read_tail(kafka_config, topic, n=10)] == [b"1", b"2", b"3"]
    assert end_offsets(kafka_config, topic)[0] > last[0].offset


def test_read_tail_widens_past_many_markers(kafka_config: dict[str, Any], topic: str) -> None:
    producer = txn_producer(kafka_config, f"txn-{topic}")
    send(producer, topic, [b"first"], key=b"db1")
    for _ in range(20):
        send(producer, topic, [b"x"], key=b"db1", commit=False)
    assert [r.value for r in read_tail(kafka_config, topic)] == [b"first"]


def test_tail_of_a_multi_record_batch_is_found(kafka_config: dict[str, Any], topic: str) -> None:
    """Tansu reports the high watermark as last batch base + 1; the helpers must see past it."""
    producer = Producer(with_client_log(kafka_config))
    for i in range(5):
        producer.produce(topic, f"plain-{i}".encode())
    producer.flush(10)
    assert [r.value for r in read_tail(kafka_config, topic)] == [b"plain-4"]
    consumer = Consumer(with_client_log({**kafka_config, "group.id": "probe"}))
    try:
        reported = end_offsets(kafka_config, topic)[0]
        assert probe_end(consumer, topic, 0, reported, wait=5.0) == 5
    finally:
        consumer.close()


def test_broker_restart_loses_topics_and_failed_start_is_reported(tmp_path: Any) -> None:
    with EmbeddedBroker(log_path=tmp_path / "b.log") as own:
        config = own.client_settings()
        ensure_topic(config, "gone")
        assert end_offsets(config, "gone") == {0: 0}
        own.restart()
        assert end_offsets(config, "gone") == {}
        port = own.port
    assert not own.running
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(BrokerError, match="exited with code"):
            EmbeddedBroker(port=port, log_path=tmp_path / "c.log", start_timeout=5).start()
