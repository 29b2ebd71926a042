"""A target's position is visible to Kafka lag tools: the source commits it to a consumer group.

Issue 40 item 3: targets never committed offsets to a consumer group, so a stopped target's lag was
visible nowhere. With option ``commitGroup`` the ``streamer_kafka`` source commits the end of each
completed micro-batch: never past a batch that is still being applied (the sink checks it while it
runs), up to the topic's end once the stream is idle (Spark's own ``commit`` comes only when a next
batch is planned), and it stays there when the query stops while the topic moves on.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import DataFrame, SparkSession

from streamer.kafka.client_log import with_client_log
from streamer.kafka.settings import with_overrides
from streamer.kafka.topics import end_offsets
from tests.integration.kafka.transactions import send, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _committed(config: dict[str, Any], group: str, topic: str) -> int:
    """The group's committed offset of partition 0 (-1001: none), as a lag tool reads it."""
    consumer = Consumer(with_client_log(with_overrides(config, group_id=group, enable_auto_commit=False)))
    try:
        return int(consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        consumer.close()


def _produce(config: dict[str, Any], topic: str, values: list[bytes], txn_id: str) -> None:
    producer = txn_producer(config, txn_id)
    for value in values:  # one transaction each: its commit marker takes an offset too
        send(producer, topic, [value])


class GroupCheckingSink:
    """foreachBatch sink that records, while each batch is applied, where the group stands."""

    def __init__(self, config: dict[str, Any], group: str, topic: str) -> None:
        self.config, self.group, self.topic = config, group, topic
        self.values: list[bytes] = []
        self.ahead: list[tuple[int, int]] = []  # (group offset, first offset of the batch) when ahead

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = df.orderBy("offset").collect()
        if not rows:
            return
        committed = _committed(self.config, self.group, self.topic)
        if committed > rows[0].offset:
            self.ahead.append((committed, rows[0].offset))
        time.sleep(0.5)  # a batch that takes a while: the group must not move meanwhile
        committed = _committed(self.config, self.group, self.topic)
        if committed > rows[0].offset:
            self.ahead.append((committed, rows[0].offset))
        self.values += [bytes(row.value) for row in rows]


def _wait(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.parametrize("reader", ["driver", "task"])
def test_the_consumed_offset_reaches_a_consumer_group_after_each_batch(
    spark: SparkSession, kafka_config: dict[str, Any], topic: str, tmp_path: Path, reader: str
) -> None:
    group = f"streamer-target-test-{reader}-{topic}"
    first = [f"a{i}".encode() for i in range(5)]
    _produce(kafka_config, topic, first, f"p-{topic}")
    sink = GroupCheckingSink(kafka_config, group, topic)
    query = (
        spark.readStream.format("streamer_kafka")
        .option("bootstrap.servers", kafka_config["bootstrap.servers"])
        .option("topic", topic)
        .option("reader", reader)
        .option("waitMs", "200")
        .option("maxEventsPerTrigger", "4")
        .option("commitGroup", group)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        _wait(lambda: sink.values == first, "the first records applied")
        end = end_offsets(kafka_config, topic)[0]
        # idle now: the group reaches the topic's end (commit markers included), lag 0 for lag tools
        _wait(lambda: _committed(kafka_config, group, topic) == end, f"the group at offset {end}")
        more = [f"b{i}".encode() for i in range(3)]
        _produce(kafka_config, topic, more, f"p-{topic}")
        _wait(lambda: sink.values == first + more, "the next records applied")
        end = end_offsets(kafka_config, topic)[0]
        _wait(lambda: _committed(kafka_config, group, topic) == end, f"the group at offset {end}")
        assert query.exception() is None
    finally:
        query.stop()
    assert not sink.ahead, f"the group was ahead of a batch being applied: {sink.ahead}"

    # a stopped target: the topic moves on, the group stays, and lag tools see the difference
    stopped_at = _committed(kafka_config, group, topic)
    _produce(kafka_config, topic, [b"c0", b"c1"], f"p-{topic}")
    assert _committed(kafka_config, group, topic) == stopped_at
    assert end_offsets(kafka_config, topic)[0] - stopped_at == 4  # two records, two commit markers

