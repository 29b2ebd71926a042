"""The driver's own read of a micro-batch's range (``--batch-read driver``), against a real broker and
real Spark: the records are those a plain ``read_committed`` consumer and Spark's collect give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import DataFrame, SparkSession

from streamer import metrics
from streamer.kafka.batch_reader import BatchReader
from streamer.kafka.spark_source import register
from streamer.kafka.spark_source_options import SourceOptions, parse_options
from streamer.target.job.batch_source import batch_records
from tests.integration.kafka.transactions import send, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _fill(config: dict[str, Any], topic: str) -> None:
    """Committed transactions of several sizes with aborted ones between: markers and aborted records
    take offsets that no reader returns."""
    producer = txn_producer(config, f"fill-{topic}")
    for i, size in enumerate((3, 1, 4, 2, 1, 5)):
        send(producer, topic, [f"v{i}-{j}".encode() for j in range(size)])
        if i % 2 == 0:  # aborted records that reached the broker (flushed before the abort)
            producer.begin_transaction()
            for _ in range(i + 1):
                producer.produce(topic, b"aborted", key=b"db")
            producer.flush(10)
            producer.abort_transaction(10)


def _plain_read(config: dict[str, Any], topic: str) -> tuple[list[tuple[int, bytes]], int]:
    """Every committed record and the high watermark, read by a bare librdkafka consumer."""
    consumer = Consumer({**config, "group.id": f"plain-{topic}", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes]] = []
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "the topic's end was not reached"
            if msg.error() is not None:
                break  # partition EOF
            out.append((int(msg.offset() or 0), bytes(msg.value() or b"")))
        return out, int(high)
    finally:
        consumer.close()


def _opts(config: dict[str, Any], topic: str) -> SourceOptions:
    return parse_options({"bootstrap.servers": config["bootstrap.servers"], "topic": topic})


def test_ranges_read_on_and_again_give_what_a_read_committed_consumer_gives(
    kafka_config: dict[str, Any], topic: str
) -> None:
    _fill(kafka_config, topic)
    expected, high = _plain_read(kafka_config, topic)
    # 16 committed records, and aborted ones where the broker returns them to read_committed readers
    # (Tansu does): the reader must give exactly what the plain consumer gives; markers take offsets
    assert len(expected) >= 16 and high == 16 + 6 + 9 + 3

    reader = BatchReader(_opts(kafka_config, topic))
    try:
        assert reader.read(5, 5) == []
        for step in (1, 2, 3, 7, high):  # consecutive ranges, ends on records, markers, aborted ones
            got: list[tuple[int, bytes]] = []
            for start in range(0, high, step):
                got += reader.read(start, min(start + step, high))
            assert got == expected, step
        for start, end in ((4, 11), (0, 3), (11, high), (2, high - 1)):  # out of order: assigned again
            assert reader.read(start, end) == [r for r in expected if start <= r[0] < end]
    finally:
        reader.close()


class _Compare:
    """foreachBatch: the records ``batch_records`` gives, next to the rows Spark collects."""

    def __init__(self, records: Any) -> None:
        self.records = records
        self.batches: list[tuple[int, list[tuple[int, bytes]], list[tuple[int, bytes]]]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        got = self.records(df, batch_id)
        collected = sorted((int(r.offset), bytes(r.value)) for r in df.select("offset", "value").collect())
        self.batches.append((batch_id, got, collected))


def _reads(via: str) -> float:
    count = metrics.TARGET_REGISTRY.get_sample_value("streamer_target_batch_read_seconds_count", {"via": via})
    return count or 0.0


def test_a_micro_batch_read_by_the_driver_is_the_one_spark_collects(
    spark: SparkSession, kafka_config: dict[str, Any], topic: str, tmp_path: Path
) -> None:
    _fill(kafka_config, topic)
    expected, _ = _plain_read(kafka_config, topic)
    register(spark)
    checkpoint = str(tmp_path / "checkpoint")
    options = {"bootstrap.servers": kafka_config["bootstrap.servers"], "topic": topic,
               "maxEventsPerTrigger": "3", "reader": "driver"}
    closers: list[Any] = []
    sink = _Compare(batch_records(checkpoint, options, "driver", closers))
    kafka_before, spark_before = _reads("kafka"), _reads("spark")
    source = spark.readStream.format("streamer_kafka")
    for key, value in options.items():
        source = source.option(key, value)
    query = (source.load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
        for close in closers:
            close()
    assert query.exception() is None
    with_rows = [b for b in sink.batches if b[2]]
    assert len(with_rows) >= 5
    for batch_id, got, collected in sink.batches:
        assert got == collected, batch_id
    assert [r for b in sink.batches for r in b[1]] == expected
    # the first batch's start is not logged: collected through Spark; every later one read by the driver
    assert _reads("spark") - spark_before == 1
    assert _reads("kafka") - kafka_before == len(sink.batches) - 1
