"""Records of Hive's largest messages, through the real agent and the embedded Tansu broker.

A 5,000-partition ADD_PARTITION is a 4.6 MB notification message. Before, librdkafka refused it
(``message.max.bytes``, 1 MB) and the agent retried the same batch for ever; now it is compressed
and published within the limit, and a record over the limit stops the agent with one error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamer import metrics
from streamer.events.codec import decode_event
from streamer.events.model import AddPartitionPayload, Column, EventType
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.spark_source import KafkaDriverReader, read_offset_range
from streamer.kafka.spark_source_options import parse_options
from streamer.kafka.topics import end_offsets
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.enrich import EnrichSettings
from streamer.source.errors import RecordTooLargeError
from streamer.source.reader import SqlNotificationReader
from streamer.warehouse import Warehouse

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 5000


@pytest.fixture
def agents() -> Iterator[list[SourceAgent]]:
    opened: list[SourceAgent] = []
    yield opened
    for agent in opened:
        agent.close()
        agent.reader.close()


def _agent(broker: EmbeddedBroker, wh: Warehouse, topic: str, tmp_path: Path, opened: list[SourceAgent],
           kafka: dict[str, Any] | None = None, **kw: Any) -> SourceAgent:
    config = AgentConfig("src", kafka or broker.client_settings(), topic=topic,
                         enrich=EnrichSettings(cmroot=str(tmp_path / "cmroot")), **kw)
    agent = SourceAgent(config, SqlNotificationReader(wh.store.url))
    opened.append(agent)
    return agent


def test_a_large_add_partition_is_published_compressed_and_one_over_the_limit_stops_the_agent(
    broker: EmbeddedBroker, sqlite_warehouse: Warehouse, topic: str, tmp_path: Path,
    agents: list[SourceAgent],
) -> None:
    wh = sqlite_warehouse
    wh.create_database("sales")
    wh.create_table("sales", "orders", [Column("id", "bigint")], partition_keys=[Column("day", "string")])
    wh.add_partitions("sales", "orders", [{"day": f"d{i:06d}"} for i in range(PARTITIONS)])  # event 3
    wh.create_database("hr")  # event 4: nothing after the large one is lost
    errors = metrics.SOURCE_ERRORS.labels("record_too_large")
    before = errors._value.get()

    # over the limit: one typed error naming event, size, limit and setting; no endless retry
    small = _agent(broker, wh, topic, tmp_path, agents, max_record_bytes=1_000_000)
    with pytest.raises(RecordTooLargeError) as info:
        small.run(once=True)
    assert info.value.event_id == 3 and info.value.size > 1_000_000
    assert "event 3 (ADD_PARTITION sales.orders)" in str(info.value)
    assert "1,000,000" in str(info.value) and "--max-record-bytes" in str(info.value)
    assert errors._value.get() == before + 1
    assert _event_ids(broker, topic) == [1, 2]  # the events before it, and nothing else

    # within the default limit: published compressed, and read back by the target's Kafka source
    stats: list[dict[str, Any]] = []
    kafka = {**broker.client_settings(), "statistics.interval.ms": 100,
             "stats_cb": lambda text: stats.append(json.loads(text))}
    agent = _agent(broker, wh, topic, tmp_path, agents, kafka=kafka)
    agent.run(once=True)
    assert _event_ids(broker, topic) == [1, 2, 3, 4]
    agent.producer.ready().poll(0.5)  # the statistics are served by poll
    sent = stats[-1]
    assert sent["txmsg_bytes"] > 1_500_000  # over librdkafka's default message.max.bytes (1 MB)
    assert sent["tx_bytes"] < sent["txmsg_bytes"] / 4, "records are compressed on the wire"
    high = end_offsets(broker.client_settings(), topic)[0]
    options = parse_options({"topic": topic, "kafka.bootstrap.servers": broker.bootstrap_servers})
    for values in (_task_values(options, high), _driver_values(topic, broker, high)):
        large = [decode_event(v) for v in values if decode_event(v).event_type is EventType.ADD_PARTITION]
        assert len(large) == 1 and isinstance(large[0].payload, AddPartitionPayload)
        assert len(large[0].payload.partitions) == PARTITIONS


def _event_ids(broker: EmbeddedBroker, topic: str) -> list[int]:
    options = parse_options({"topic": topic, "kafka.bootstrap.servers": broker.bootstrap_servers})
    high = end_offsets(broker.client_settings(), topic)[0]
    events = [decode_event(v) for v in _task_values(options, high)]
    return [e.event_id for e in events if e.event_type is not EventType.PROGRESS]


def _task_values(options: Any, high: int) -> list[bytes]:
    """What a Spark task of the ``streamer_kafka`` source reads."""
    return [row[2] for row in read_offset_range(options, 0, high)]


def _driver_values(topic: str, broker: EmbeddedBroker, high: int) -> list[bytes]:
    """What the driver reader (the target job's default) reads, trigger after trigger up to ``high``."""
    options = parse_options({"topic": topic, "kafka.bootstrap.servers": broker.bootstrap_servers,
                             "waitMs": "5000"})
    reader = KafkaDriverReader(options)
    values: list[bytes] = []
    offset = 0
    try:
        for _trigger in range(50):
            rows, end = reader.read({"topic": topic, "partition": 0, "offset": offset})
            values += [row[2] for row in rows]
            offset = end["offset"]
            if offset >= high:
                break
        return values
    finally:
        reader.stop()
