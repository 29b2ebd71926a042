"""The target's record limit: which records it refuses, what it sets on librdkafka, what it says."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Message
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import ConfigError, StreamerError
from streamer.kafka.record_limit import (
    BAD_COMPRESSION,
    DEFAULT_TARGET_MAX_RECORD_BYTES,
    MAX_TARGET_MAX_RECORD_BYTES,
    MIN_TARGET_MAX_RECORD_BYTES,
    OversizedRecordError,
    batch_bytes,
    check_limit,
    client_refusal,
    consumer_settings,
    message_refusal,
    refusal,
)
from streamer.kafka.record_size import DEFAULT_MAX_RECORD_BYTES, producer_settings
from streamer.kafka.spark_source_options import parse_options
from streamer.target.job.failure import Outcome, Recheck, failure_error

LIMIT = 2 << 20
# what librdkafka's consumer reports for a zstd batch it stopped decompressing (seen against Tansu)
ZSTD_REFUSED = ("Decompression (codec 0x4) of message at 7 of 2533 bytes failed: "
                "Local: Invalid compressed data")


@given(size=st.integers(0, 3 * LIMIT), offset=st.integers(0, 2**40))
def test_a_record_is_refused_exactly_when_it_is_over_the_limit(size: int, offset: int) -> None:
    refused = refusal("events", 0, offset, size, LIMIT)
    assert (refused is not None) == (size > LIMIT)
    if refused is not None:
        assert isinstance(refused, StreamerError)
        assert (refused.topic, refused.partition, refused.offset, refused.size) == ("events", 0, offset, size)
        text = str(refused)
        assert f"offset {offset}" in text and f"{size:,} bytes" in text and f"{LIMIT:,}" in text
        assert "--max-record-bytes" in text and "'events' partition 0" in text


def test_a_consumed_record_counts_its_key_and_value() -> None:
    fits = Message(topic="t", partition=0, offset=3, key=b"db", value=b"v" * (LIMIT - 2))
    over = Message(topic="t", partition=0, offset=4, key=b"db", value=b"v" * (LIMIT - 1))
    empty = Message(topic="t", partition=0, offset=5, key=None, value=None)
    assert message_refusal(fits, LIMIT) is None and message_refusal(empty, LIMIT) is None
    refused = message_refusal(over, LIMIT)
    assert refused is not None and (refused.offset, refused.size) == (4, LIMIT + 1)


def test_a_zstd_batch_librdkafka_stopped_decompressing_is_a_refusal_naming_offset_and_size() -> None:
    assert BAD_COMPRESSION == KafkaError._BAD_COMPRESSION
    refused = client_refusal("events", 0, 7, BAD_COMPRESSION, ZSTD_REFUSED, LIMIT)
    assert refused is not None
    assert (refused.offset, refused.size, refused.compressed) == (7, None, 2533)
    assert f"more than {batch_bytes(LIMIT):,} bytes" in str(refused) and "2,533 bytes" in str(refused)
    msg = Message(topic="events", partition=0, offset=7, error=KafkaError(BAD_COMPRESSION, ZSTD_REFUSED))
    assert str(message_refusal(msg, LIMIT)) == str(refused)
    # librdkafka bounds no other codec: a gzip batch it could not decompress is corrupt, not large
    gzip = ZSTD_REFUSED.replace("codec 0x4", "codec 0x1")
    assert client_refusal("events", 0, 7, BAD_COMPRESSION, gzip, LIMIT) is None
    assert client_refusal("events", 0, 7, KafkaError._TRANSPORT, ZSTD_REFUSED, LIMIT) is None


@pytest.mark.parametrize("limit", [MIN_TARGET_MAX_RECORD_BYTES, LIMIT, 50 << 20,
                                   DEFAULT_TARGET_MAX_RECORD_BYTES, MAX_TARGET_MAX_RECORD_BYTES])
@pytest.mark.parametrize("config", [{}, {"queued.max.messages.kbytes": 1024}, {"fetch.max.bytes": 99_000_000},
                                    {"receive.message.max.bytes": 2_000_000_000}])
def test_consumer_settings_bound_decompression_and_librdkafka_takes_them(
    limit: int, config: dict[str, int]
) -> None:
    settings = consumer_settings(limit, config)
    # librdkafka's zstd buffer grows threefold per attempt: with three batches' room, every size it
    # tries for a batch the agent's producer may send with the same limit is within the setting
    receive = settings["receive.message.max.bytes"]
    batch = producer_settings(limit, "zstd")["message.max.bytes"]
    assert batch == batch_bytes(limit) and limit < batch <= limit + 64 * 1024
    assert receive == 3 * batch
    # a real librdkafka consumer accepts the combination (it checks fetch/receive sizes when created)
    Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", **config, **settings}).close()


def test_fetch_size_is_left_alone_where_it_already_fits() -> None:
    assert "fetch.max.bytes" not in consumer_settings(DEFAULT_TARGET_MAX_RECORD_BYTES, {})
    assert "fetch.max.bytes" not in consumer_settings(LIMIT, {"queued.max.messages.kbytes": 1024})
    assert consumer_settings(LIMIT, {})["fetch.max.bytes"] == LIMIT


def test_the_default_reads_every_record_the_agent_publishes_by_default() -> None:
    assert DEFAULT_TARGET_MAX_RECORD_BYTES >= DEFAULT_MAX_RECORD_BYTES
    assert check_limit(DEFAULT_TARGET_MAX_RECORD_BYTES) == DEFAULT_TARGET_MAX_RECORD_BYTES


@pytest.mark.parametrize("limit", [0, 1024, MIN_TARGET_MAX_RECORD_BYTES - 1, MAX_TARGET_MAX_RECORD_BYTES + 1])
def test_limits_librdkafka_cannot_take_are_refused_naming_the_flag(limit: int) -> None:
    with pytest.raises(ConfigError, match="--max-record-bytes"):
        check_limit(limit)


def test_the_source_option() -> None:
    base = {"topic": "t", "bootstrap.servers": "k:9092"}
    assert parse_options(base).max_record_bytes == DEFAULT_TARGET_MAX_RECORD_BYTES
    assert parse_options({**base, "maxRecordBytes": str(LIMIT)}).max_record_bytes == LIMIT
    with pytest.raises(ConfigError, match="--max-record-bytes"):
        parse_options({**base, "maxRecordBytes": "1000"})


@pytest.mark.parametrize("error", [
    OversizedRecordError("streamer.s.events", 0, 123, 75_500_000, LIMIT),
    OversizedRecordError("streamer.s.events", 2, 9, None, LIMIT, compressed=2533),
    OversizedRecordError("t", 0, 9, None, LIMIT),
])
def test_a_failed_query_carrying_the_refusal_stops_the_job_with_it(error: OversizedRecordError) -> None:
    """The driver reader raises in Spark's source process: the job sees the query's text only."""
    failure = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: Traceback (most recent call last):\n"
        '  File "spark_source.py", line 300, in read\n'
        f"streamer.kafka.record_limit.OversizedRecordError: {error}\n"
    )
    held = Recheck(Outcome.HELD, offset=error.offset, marks=(0, 200))
    found = failure_error(failure, held, "'t' partition 0")
    assert isinstance(found, OversizedRecordError)
    assert str(found) == str(error)
    assert (found.topic, found.partition, found.offset, found.size, found.limit, found.compressed) == (
        error.topic, error.partition, error.offset, error.size, error.limit, error.compressed)
    # a loss the broker confirms still wins: the records are gone whatever their size
    lost = failure_error(failure, Recheck(Outcome.LOST, "data loss on topic 't' ...", 5), "'t' partition 0")
    assert not isinstance(lost, OversizedRecordError)


def _run_flags(*extra: str) -> list[str]:
    return ["--bootstrap-servers", "k:9092", "--hms-uri", "thrift://h:9083", "--warehouse-root", "/wh",
            "--state-dir", "/state", *extra]


def test_target_run_takes_the_flag_into_its_settings_and_refuses_what_librdkafka_cannot_take() -> None:
    import click

    from streamer.target.commands import run_cmd, run_settings

    with run_cmd.make_context("run", _run_flags()) as ctx:
        assert run_settings(ctx.params).trust.max_record_bytes == DEFAULT_TARGET_MAX_RECORD_BYTES
    with run_cmd.make_context("run", _run_flags("--max-record-bytes", str(LIMIT))) as ctx:
        assert run_settings(ctx.params).trust.max_record_bytes == LIMIT
    for bad in (MIN_TARGET_MAX_RECORD_BYTES - 1, MAX_TARGET_MAX_RECORD_BYTES + 1):
        with pytest.raises(click.BadParameter) as info:
            run_cmd.make_context("run", _run_flags("--max-record-bytes", str(bad)))
        assert "--max-record-bytes" in info.value.format_message()
