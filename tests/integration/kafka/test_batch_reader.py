"""The driver's own read of a micro-batch's range (``--batch-read driver``) and of the records after it
(``--batch-follow``), against a real broker and real Spark: the records are those a plain
``read_committed`` consumer and Spark's collect give, each handed out once."""

from __future__ import annotations

import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import DataFrame, SparkSession

from streamer import metrics
from streamer.kafka.batch_reader import BatchReader
from streamer.kafka.spark_source import register
from streamer.kafka.spark_source_options import SourceOptions, parse_options
from streamer.target.job.batch_source import BatchSource
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


def _read_on_to_the_end(reader: BatchReader, limit: int) -> list[tuple[int, bytes]]:
    """Everything ``read_on`` gives until a read finds nothing more, each read at most ``limit``."""
    out: list[tuple[int, bytes]] = []
    while got := reader.read_on(limit, 1.0):
        assert len(got) <= limit
        out += got
    return out


def _started(spark: SparkSession, options: dict[str, str], sink: Any, checkpoint: str, **trigger: Any) -> Any:
    """A streaming query of the ``streamer_kafka`` source with ``options`` into ``sink`` (foreachBatch)."""
    register(spark)
    source = spark.readStream.format("streamer_kafka")
    for key, value in options.items():
        source = source.option(key, value)
    return (source.load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
            .trigger(**trigger).start())


def test_ranges_read_on_and_again_give_what_a_read_committed_consumer_gives(
    kafka_config: dict[str, Any], topic: str
) -> None:
    _fill(kafka_config, topic)
    expected, high = _plain_read(kafka_config, topic)
    # 16 committed records, and aborted ones where the broker returns them to read_committed readers
    # (Tansu does): the reader must give exactly what the plain consumer gives; markers take offsets
    assert len(expected) >= 16 and high == 16 + 6 + 9 + 3

    with closing(BatchReader(_opts(kafka_config, topic))) as reader:
        assert reader.read(5, 5) == []
        for step in (1, 2, 3, 7, high):  # consecutive ranges, ends on records, markers, aborted ones
            got: list[tuple[int, bytes]] = []
            for start in range(0, high, step):
                got += reader.read(start, min(start + step, high))
            assert got == expected, step
        for start, end in ((4, 11), (0, 3), (11, high), (2, high - 1)):  # out of order: assigned again
            assert reader.read(start, end) == [r for r in expected if start <= r[0] < end]


def test_reading_on_hands_each_record_out_once(kafka_config: dict[str, Any], topic: str) -> None:
    _fill(kafka_config, topic)
    expected, high = _plain_read(kafka_config, topic)
    with closing(BatchReader(_opts(kafka_config, topic))) as reader:
        assert reader.read_on(10, 0.1) == []  # nowhere to read on from yet
        first = reader.read(0, 4)
        on = _read_on_to_the_end(reader, 3)  # at most 3 at a time: the rest is kept, in order
        assert first + on == expected
        # Spark's next ranges cover what was read on: nothing again, then on from where it ended
        assert reader.read(4, 10) == []
        assert reader.read(10, high) == []
        send(txn_producer(kafka_config, f"more-{topic}"), topic, [b"late-1", b"late-2"])
        later, new_high = _plain_read(kafka_config, topic)
        assert reader.read(high, new_high) == later[len(expected):]
        assert [v for _, v in later[len(expected):]] == [b"late-1", b"late-2"]
        # a failed apply of what was read on: the next range is read whole again
        assert reader.read_on(5, 0.2) == []
        reader.forget()
        assert reader.read(4, new_high) == [r for r in later if r[0] >= 4]


def test_reading_on_from_a_seek(kafka_config: dict[str, Any], topic: str) -> None:
    _fill(kafka_config, topic)
    expected, _ = _plain_read(kafka_config, topic)
    with closing(BatchReader(_opts(kafka_config, topic))) as reader:
        reader.seek(expected[3][0])  # a range read some other way (Spark's collect) ended there
        assert _read_on_to_the_end(reader, 100) == expected[3:]


class _Compare:
    """foreachBatch: the records ``BatchSource`` gives, next to the rows Spark collects."""

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
    checkpoint = str(tmp_path / "checkpoint")
    options = {"bootstrap.servers": kafka_config["bootstrap.servers"], "topic": topic,
               "maxEventsPerTrigger": "3", "reader": "driver"}
    batch_source = BatchSource(checkpoint, options, "driver")
    sink = _Compare(batch_source.records)
    kafka_before, spark_before = _reads("kafka"), _reads("spark")
    query = _started(spark, options, sink, checkpoint, availableNow=True)
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
        batch_source.close()
    assert query.exception() is None
    with_rows = [b for b in sink.batches if b[2]]
    assert len(with_rows) >= 5
    for batch_id, got, collected in sink.batches:
        assert got == collected, batch_id
    assert [r for b in sink.batches for r in b[1]] == expected
    # the first batch's start is not logged: collected through Spark; every later one read by the driver
    assert _reads("spark") - spark_before == 1
    assert _reads("kafka") - kafka_before == len(sink.batches) - 1


class _Follow:
    """foreachBatch as the target job's: the batch's records, then those that arrive (``follow``)."""

    def __init__(self, source: BatchSource) -> None:
        self.source = source
        self.applied: list[tuple[int, bytes]] = []
        self.from_batches = 0
        self.followed = 0

    def apply(self, records: list[tuple[int, bytes]]) -> None:
        self.applied += records

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        read = self.source.records(df, batch_id)
        self.from_batches += len(read)
        self.apply(read)
        before = len(self.applied)
        self.source.follow(batch_id, self.apply, lambda: False)
        self.followed += len(self.applied) - before


def test_a_micro_batch_follows_the_records_after_it_once_each(
    spark: SparkSession, kafka_config: dict[str, Any], topic: str, tmp_path: Path
) -> None:
    send(txn_producer(kafka_config, f"first-{topic}"), topic, [b"first"])
    checkpoint = str(tmp_path / "checkpoint")
    options = {"bootstrap.servers": kafka_config["bootstrap.servers"], "topic": topic, "reader": "driver",
               "waitMs": "100"}
    # a span far longer than the test: the live records come by follow, and only stop() ends it
    follow = _Follow(BatchSource(checkpoint, options, "driver", follow_seconds=60.0))
    query = _started(spark, options, follow, checkpoint, processingTime="0 seconds")

    def produce() -> None:
        producer = txn_producer(kafka_config, f"live-{topic}")
        for i in range(40):
            send(producer, topic, [f"live-{i}".encode()], commit=i % 7 != 3)  # some aborted
            time.sleep(0.05)

    writer = threading.Thread(target=produce)
    try:
        deadline = time.monotonic() + 120
        while not follow.applied and time.monotonic() < deadline:
            time.sleep(0.05)
        writer.start()
        writer.join(60)
        expected, _ = _plain_read(kafka_config, topic)
        while len(follow.applied) < len(expected) and time.monotonic() < deadline and query.isActive:
            time.sleep(0.05)
        started = time.monotonic()
        follow.source.stop()
        query.stop()
        stopped_in = time.monotonic() - started
    finally:
        follow.source.stop()
        query.stop()
        follow.source.close()
    assert query.exception() is None
    # every committed record once, in order, whether a batch's range or a follow brought it
    assert follow.applied == expected
    assert len(expected) == 1 + 40 - 6
    assert follow.followed > 0 and follow.from_batches > 0
    assert stopped_in < 1.0  # a follow ends at stop(), not at its deadline
