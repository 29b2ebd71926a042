from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.client_log import with_client_log
from streamer.kafka.topics import ensure_topic
from tests.integration.kafka.transactions import send, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture(params=["task", "driver"])
def reader(request: pytest.FixtureRequest) -> str:
    """Both readers of the source: a Spark task per batch, and the long-lived driver-side consumer."""
    return str(request.param)


class Collector:
    """foreachBatch sink that keeps every micro-batch's rows in order, on the driver."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = df.orderBy("offset").collect()
        if rows:
            self.batches.append(rows)

    @property
    def values(self) -> list[bytes]:
        return [bytes(row.value) for batch in self.batches for row in batch]


def _produce(
    config: dict[str, Any], topic: str, values: list[bytes], txn_id: str, commit: bool = True
) -> None:
    send(txn_producer(config, txn_id), topic, values, commit=commit)


def _stream(
    spark: SparkSession, config: dict[str, Any], topic: str, checkpoint: Path, sink: Collector, **options: str
) -> Any:
    source = (
        spark.readStream.format("streamer_kafka")
        .option("bootstrap.servers", config["bootstrap.servers"])
        .option("topic", topic)
    )
    for key, value in options.items():
        source = source.option(key, value)
    return source.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))


def _run_available_now(writer: Any) -> None:
    query: StreamingQuery = writer.trigger(availableNow=True).start()
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]


def test_batches_are_bounded_ordered_committed_and_resume_from_checkpoint(
    spark: SparkSession, kafka_config: dict[str, Any], topic: str, tmp_path: Path, reader: str
) -> None:
    values = [f"v{i:02d}".encode() for i in range(7)]
    _produce(kafka_config, topic, values[:4], f"a-{topic}")
    _produce(kafka_config, topic, [b"aborted"] * 2, f"a-{topic}", commit=False)
    _produce(kafka_config, topic, values[4:], f"a-{topic}")

    first = Collector()
    ckpt = tmp_path / "ckpt"
    first_run = _stream(spark, kafka_config, topic, ckpt, first, maxEventsPerTrigger="6", reader=reader)
    _run_available_now(first_run)
    assert first.values == values
    assert len(first.batches) >= 2 and all(len(batch) <= 6 for batch in first.batches)
    row = first.batches[0][0]
    assert row.key == "db" and row.timestamp is not None
    offsets = [r.offset for batch in first.batches for r in batch]
    assert offsets == sorted(set(offsets))

    more = [b"w1", b"w2"]
    _produce(kafka_config, topic, more, f"a-{topic}")
    second = Collector()
    # the other reader resumes from this one's checkpoint: both store partition offsets
    other = "task" if reader == "driver" else "driver"
    again = _stream(spark, kafka_config, topic, ckpt, second, maxEventsPerTrigger="6", reader=other)
    _run_available_now(again)
    assert second.values == more  # continues after the checkpoint: nothing twice, nothing lost


def test_continuous_query_picks_up_new_records_quickly(
    spark: SparkSession, kafka_config: dict[str, Any], topic: str, tmp_path: Path, reader: str
) -> None:
    sink = Collector()
    writer = _stream(
        spark, kafka_config, topic, tmp_path / "ckpt", sink, startingOffsets="latest", reader=reader,
        waitMs="200",
    )
    query = writer.trigger(processingTime="100 milliseconds").start()
    try:
        deadline = time.monotonic() + 60
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.1)
        # one multi-record batch: Tansu under-reports its high mark
        plain = Producer(with_client_log(kafka_config))
        plain.produce(topic, b"live-1")
        plain.produce(topic, b"live-2")
        plain.flush(10)
        while sink.values != [b"live-1", b"live-2"] and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.1)
        assert sink.values == [b"live-1", b"live-2"]
    finally:
        query.stop()


def test_topic_lost_in_broker_restart_fails_the_query_clearly(
    spark: SparkSession, tmp_path: Path, reader: str
) -> None:
    with EmbeddedBroker(log_path=tmp_path / "broker.log") as own:
        config = own.client_settings()
        ensure_topic(config, "lost")
        _produce(config, "lost", [b"1", b"2", b"3"], "c-lost")
        sink = Collector()
        ckpt = tmp_path / "ckpt"
        _run_available_now(_stream(spark, config, "lost", ckpt, sink, reader=reader))
        assert sink.values == [b"1", b"2", b"3"]

        own.restart()  # memory storage: the topic is gone
        with pytest.raises(StreamingQueryException, match="partition does not exist"):
            _run_available_now(_stream(spark, config, "lost", ckpt, Collector(), reader=reader))
        ensure_topic(config, "lost")
        _produce(config, "lost", [b"new"], "c-lost")  # recreated, but shorter than the checkpoint
        with pytest.raises(StreamingQueryException) as failure:
            _run_available_now(_stream(spark, config, "lost", ckpt, Collector(), reader=reader))
        message = str(failure.value)
        assert "DataLossError" in message
        assert "data loss on topic 'lost' partition 0" in message
        assert "recreated" in message


def test_driver_reader_bounds_reads_continues_and_replays_ranges(
    kafka_config: dict[str, Any], topic: str
) -> None:
    """The driver reader without Spark: what Spark's simple-reader wrapper calls, in its order."""
    from streamer.kafka.spark_source import KafkaDriverReader
    from streamer.kafka.spark_source_options import parse_options

    values = [f"d{i}".encode() for i in range(5)]
    _produce(kafka_config, topic, values[:3], f"d-{topic}")
    _produce(kafka_config, topic, [b"aborted"], f"d-{topic}", commit=False)
    _produce(kafka_config, topic, values[3:], f"d-{topic}")
    opts = parse_options(
        {"bootstrap.servers": kafka_config["bootstrap.servers"], "topic": topic, "reader": "driver",
         "maxEventsPerTrigger": "2", "waitMs": "2000"}
    )
    reader = KafkaDriverReader(opts)
    try:
        offset = reader.initialOffset()
        seen: list[bytes] = []
        ranges = []
        while len(seen) < len(values):
            rows, end = reader.read(offset)
            batch = list(rows)
            assert end["offset"] - offset["offset"] <= 2  # bounded like maxEventsPerTrigger
            assert batch or end != offset, "records are waiting: every read must make progress"
            ranges.append((offset, end, batch))
            seen += [bytes(r[2]) for r in batch]
            offset = end
        assert seen == values  # in order, aborted record skipped, nothing twice
        for _ in range(3):  # the last commit marker may still be ahead: passing it yields no row
            started = time.monotonic()
            rows, end = reader.read(offset)
            assert list(rows) == []
            if end == offset:
                break
            offset = end
        # nothing new: the read waited (waitMs) and kept the offset
        assert end == offset and time.monotonic() - started >= 1.0
        for start, stop, batch in ranges:  # a batch planned before a restart, read again
            assert list(reader.readBetweenOffsets(start, stop)) == batch
    finally:
        reader.stop()


def test_driver_reader_checks_for_data_loss_where_it_did_not_read_on_or_found_nothing(
    kafka_config: dict[str, Any], topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that continues at the consumer's own position and gets records makes no watermark
    round trip; a read from anywhere else (a start, a restart, a replanned batch) gets the full
    check; one that found nothing only compares the watermarks (a lost topic: test_faults.py)."""
    from streamer.kafka import spark_source
    from streamer.kafka.spark_source_options import parse_options

    _produce(kafka_config, topic, [b"a", b"b", b"c"], f"c-{topic}")
    checks: list[int] = []
    real = spark_source.checked_start

    def counting(consumer: Any, opts: Any, first: int) -> int:
        checks.append(first)
        return real(consumer, opts, first)

    monkeypatch.setattr(spark_source, "checked_start", counting)
    opts = parse_options({"bootstrap.servers": kafka_config["bootstrap.servers"], "topic": topic,
                          "reader": "driver", "maxEventsPerTrigger": "1", "waitMs": "500"})
    reader = spark_source.KafkaDriverReader(opts)
    try:
        offset = reader.initialOffset()
        _, second = reader.read(offset)
        _, third = reader.read(second)  # reads on where the first read ended
        assert checks == [offset["offset"]]
        rows, end = reader.read(offset)  # back to the start, as after a restart
        assert [bytes(r[2]) for r in rows] == [b"a"]
        assert checks == [offset["offset"], offset["offset"]]
        assert third["offset"] > second["offset"] > offset["offset"]
        for _ in range(6):  # read on to the end (the commit marker yields no row)
            rows, after = reader.read(end)
            if after == end:
                break
            end = after
        assert list(rows) == [] and after == end
        # a read that found nothing is checked against the watermarks, which hold its offset here:
        # one round trip, no full check (the full one, with its probe, is for a suspected loss)
        assert len(checks) == 2
    finally:
        reader.stop()
