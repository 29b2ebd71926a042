"""The record size limit: what the agent publishes, where it stops, and the settings that follow."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import ConfigError, StreamerError
from streamer.kafka.record_size import (
    COMPRESSIONS,
    DEFAULT_COMPRESSION,
    DEFAULT_MAX_RECORD_BYTES,
    producer_settings,
    topic_config,
)
from streamer.source.errors import RecordTooLargeError
from streamer.source.prepare import Prepared, cut_at_oversized, failure_kind

LIMIT = 1000


@st.composite
def batches(draw: st.DrawFn) -> list[Prepared]:
    """Prepared records of increasing event ids: some passed over (no value), some of any size."""
    sizes = draw(st.lists(st.one_of(st.none(), st.integers(0, 2 * LIMIT)), max_size=30))
    keys = draw(st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=len(sizes),
                         max_size=len(sizes)))
    return [
        Prepared(100 + i, "ADD_PARTITION", key, None if size is None else b"v" * size, obj="db.t")
        for i, (size, key) in enumerate(zip(sizes, keys, strict=True))
    ]


def _size(item: Prepared) -> int:
    assert item.value is not None
    return len(item.value) + len(item.key or b"")


@given(batches())
def test_the_batch_is_cut_just_before_the_first_record_over_the_limit(prepared: list[Prepared]) -> None:
    kept, error = cut_at_oversized(prepared, LIMIT)
    assert prepared[: len(kept)] == kept
    assert all(item.value is None or _size(item) <= LIMIT for item in kept)
    if error is None:
        assert kept == prepared
        return
    culprit = prepared[len(kept)]
    assert culprit.value is not None and _size(culprit) > LIMIT
    assert (error.event_id, error.size, error.limit) == (culprit.event_id, _size(culprit), LIMIT)
    assert failure_kind(error) == "record_too_large"


def test_the_error_names_event_object_size_limit_and_the_setting_to_raise() -> None:
    big = Prepared(42, "ADD_PARTITION", b"sales", b"x" * 1_400_000, obj="sales.orders")
    kept, error = cut_at_oversized([Prepared(41, "INSERT", b"sales", b"small"), big], 1_000_000)
    assert [p.event_id for p in kept] == [41]
    assert isinstance(error, StreamerError)
    text = str(error)
    for part in ("event 42", "ADD_PARTITION", "sales.orders", "1,400,005 bytes", "1,000,000",
                 "--max-record-bytes"):
        assert part in text, part


def test_a_decode_failure_keeps_its_kind() -> None:
    assert failure_kind(StreamerError("bad row")) == "decode"


def test_broker_refusal_names_the_topic_setting() -> None:
    text = str(RecordTooLargeError(7, "ALTER_TABLE", "db.t", 5_000_000, None, by="broker"))
    assert "event 7" in text and "max.message.bytes" in text and "5,000,000" in text


@given(st.integers(1024, 500_000_000), st.sampled_from(COMPRESSIONS))
def test_producer_and_topic_take_a_record_of_the_limit(limit: int, compression: str) -> None:
    producer = producer_settings(limit, compression)
    assert producer["compression.type"] == compression
    assert producer["message.max.bytes"] >= limit  # librdkafka counts the whole uncompressed batch
    assert int(topic_config(limit)["max.message.bytes"]) >= limit


def test_defaults_cover_hive_s_largest_messages_and_compress() -> None:
    assert DEFAULT_MAX_RECORD_BYTES >= 32 * 1024 * 1024
    assert producer_settings(DEFAULT_MAX_RECORD_BYTES, DEFAULT_COMPRESSION)["compression.type"] != "none"


@pytest.mark.parametrize("limit", [0, 1023, 2_000_000_000])
def test_limits_librdkafka_cannot_take_are_refused(limit: int) -> None:
    with pytest.raises(ConfigError, match="--max-record-bytes"):
        producer_settings(limit, "zstd")


def test_an_unknown_codec_is_refused() -> None:
    with pytest.raises(ConfigError, match="--compression"):
        producer_settings(LIMIT * 2, "brotli")
