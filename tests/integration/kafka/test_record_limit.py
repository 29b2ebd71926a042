"""The `streamer_kafka` source refuses a record over its limit where it reads it (both readers).

Real records on the embedded broker, read by the source's own code without Spark: a record just
over the limit (librdkafka delivers it; the source refuses it before it becomes a row) and a zstd
bomb (24 MB of zeros, a few KB on the wire; librdkafka stops decompressing it at the limit).
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

from streamer.kafka.batch_reader import BatchReader
from streamer.kafka.client_log import with_client_log
from streamer.kafka.record_limit import OversizedRecordError, batch_bytes
from streamer.kafka.record_size import producer_settings
from streamer.kafka.spark_source import KafkaDriverReader, read_offset_range
from streamer.kafka.spark_source_options import SourceOptions, parse_options

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LIMIT = 2 << 20  # the source's maxRecordBytes here
KEY = b"db"
BOMB = 24_000_000  # bytes of zeros: ~1 KB of zstd


def _publish(config: dict[str, Any], topic: str, values: list[bytes], compression: str) -> None:
    """Each value in a batch of its own (a refused batch holds only its record), as the agent
    publishes: compressed, up to a limit far above the source's."""
    producer = Producer(with_client_log({**config, **producer_settings(64 << 20, compression)}))
    for value in values:
        producer.produce(topic, value, key=KEY, partition=0)
        assert producer.flush(60) == 0


def _options(config: dict[str, Any], topic: str, reader: str) -> SourceOptions:
    return parse_options({"bootstrap.servers": config["bootstrap.servers"], "topic": topic,
                          "reader": reader, "waitMs": "2000", "maxRecordBytes": str(LIMIT)})


def _read_driver(opts: SourceOptions) -> tuple[list[bytes], int, OversizedRecordError]:
    """What the driver reader delivers before it refuses, the end offset of its last read, the refusal."""
    reader = KafkaDriverReader(opts)
    values: list[bytes] = []
    try:
        offset = reader.initialOffset()
        for _ in range(20):
            try:
                rows, end = reader.read(offset)
            except OversizedRecordError as refused:
                return values, offset["offset"], refused
            values += [bytes(row[2]) for row in rows]
            offset = end
        raise AssertionError(f"never refused; read {len(values)} records up to {offset}")
    finally:
        reader.stop()


@pytest.mark.parametrize("compression", ["zstd", "gzip"])
def test_a_record_just_over_the_limit_ends_the_read_before_it_and_is_refused_with_its_size(
    kafka_config: dict[str, Any], topic: str, compression: str
) -> None:
    at_limit = b"\0" * (LIMIT - len(KEY))  # key and value: exactly the limit, read
    over = b"\0" * (LIMIT - len(KEY) + 1)
    _publish(kafka_config, topic, [b"r0", b"r1", at_limit, over, b"after"], compression)

    values, stopped_at, refused = _read_driver(_options(kafka_config, topic, "driver"))
    assert values == [b"r0", b"r1", at_limit]  # the records before it are delivered, it never
    assert stopped_at == 3
    assert (refused.topic, refused.partition, refused.offset, refused.size) == (topic, 0, 3, LIMIT + 1)
    assert f"offset 3: it holds {LIMIT + 1:,} bytes" in str(refused)

    # the task reader (and a batch re-read after a restart): the range before it reads, one over it
    # fails at it
    task = _options(kafka_config, topic, "task")
    assert [bytes(row[2]) for row in read_offset_range(task, 0, 3)] == [b"r0", b"r1", at_limit]
    with pytest.raises(OversizedRecordError) as info:
        list(read_offset_range(task, 0, 5))
    assert (info.value.offset, info.value.size) == (3, LIMIT + 1)

    # the job's driver reading a micro-batch's logged range itself (--batch-read driver): the same
    batch = BatchReader(task)
    try:
        assert [value for _, value in batch.read(0, 3)] == [b"r0", b"r1", at_limit]
        with pytest.raises(OversizedRecordError) as info:
            batch.read(3, 5)
        assert (info.value.offset, info.value.size) == (3, LIMIT + 1)
    finally:
        batch.close()


def test_a_zstd_bomb_is_never_decompressed_past_the_limit(kafka_config: dict[str, Any], topic: str) -> None:
    _publish(kafka_config, topic, [b"r0", b"\0" * BOMB, b"after"], "zstd")

    values, stopped_at, refused = _read_driver(_options(kafka_config, topic, "driver"))
    assert values == [b"r0"] and stopped_at == 1
    assert (refused.offset, refused.size, refused.limit) == (1, None, LIMIT)
    assert refused.compressed is not None and refused.compressed < 10_000  # what crossed the network
    assert f"offset 1: its zstd record batch of {refused.compressed:,} bytes decompresses to more than " \
           f"{batch_bytes(LIMIT):,} bytes" in str(refused)

    with pytest.raises(OversizedRecordError) as info:
        list(read_offset_range(_options(kafka_config, topic, "task"), 0, 3))
    assert (info.value.offset, info.value.size) == (1, None)

    batch = BatchReader(_options(kafka_config, topic, "driver"))  # the job's driver (--batch-read driver)
    try:
        assert batch.read(0, 1) == [(0, b"r0")]
        with pytest.raises(OversizedRecordError) as info:
            batch.read(1, 3)
        assert (info.value.offset, info.value.size) == (1, None)
        assert batch.read(0, 1) == [(0, b"r0")]  # after a failed read it is assigned again
        with pytest.raises(OversizedRecordError) as info:  # reading on past a range (--batch-follow)
            batch.read_on(10, 1.0)
        assert (info.value.offset, info.value.size) == (1, None)
        assert not batch.reading  # forgotten: the next range is assigned and checked again
        batch.seek(0)
        assert batch.read_on(10, 1.0) == [(0, b"r0")]  # the records before a refused one first
        with pytest.raises(OversizedRecordError):
            batch.read_on(10, 1.0)
    finally:
        batch.close()


def test_verify_reads_the_topic_under_the_same_limit(kafka_config: dict[str, Any], topic: str) -> None:
    """`streamer verify` (and the job's --verify-every) read the whole topic too: a record over the
    limit stops them at its offset instead of being decoded (issue 38 item 10)."""
    from streamer.target.dr.verify import VerifySettings, read_topic

    _publish(kafka_config, topic, [b"\0" * (LIMIT + 1)], "zstd")
    settings = VerifySettings(hms_uri="thrift://unused:9083", state_dir="/unused",
                              bootstrap_servers=kafka_config["bootstrap.servers"], topic=topic,
                              max_record_bytes=LIMIT)
    with pytest.raises(OversizedRecordError) as info:
        list(read_topic(settings))
    assert info.value.offset == 0
