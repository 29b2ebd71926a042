"""Garbage on the wire: every malformed record is a CodecError with a cause, quickly, never a crash."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.errors import CodecError
from streamer.events.codec import SINGLE_OBJECT_MARKER, decode_event, encode_event
from streamer.events.model import Event, EventType, OpenTxnPayload, Source
from streamer.events.schemas import load_event_schema
from tests.strategies import events

pytestmark = pytest.mark.timeout(120)
HEADER = SINGLE_OBJECT_MARKER + load_event_schema().fingerprint


def _decodes_or_codec_error(data: bytes) -> None:
    """Garbage may happen to be a valid event; anything else must be a CodecError (checked by pytest)."""
    try:
        event = decode_event(data)
    except CodecError as exc:
        assert str(exc)
    else:
        assert isinstance(event, Event)


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes(data: bytes) -> None:
    _decodes_or_codec_error(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_valid_header_with_a_random_body(body: bytes) -> None:
    _decodes_or_codec_error(HEADER + body)


@settings(max_examples=60, deadline=None)
@given(events(), st.data())
def test_every_truncation_fails(event: Event, data: st.DataObject) -> None:
    encoded = encode_event(event)
    cut = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
    with pytest.raises(CodecError):
        decode_event(encoded[:cut])


@settings(max_examples=80, deadline=None)
@given(events(), st.data())
def test_corrupted_bytes(event: Event, data: st.DataObject) -> None:
    encoded = bytearray(encode_event(event))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        at = data.draw(st.integers(min_value=len(HEADER), max_value=len(encoded) - 1))
        encoded[at] = data.draw(st.integers(min_value=0, max_value=255))
    _decodes_or_codec_error(bytes(encoded))


@pytest.mark.parametrize(
    ("data", "cause"),
    [
        (b"", "empty record"),
        (b"\xc3", "starts with 0xc3"),
        (b"\xc3\x02" + bytes(8), "expected 0xc301"),
        (b"{}", "not an event record"),
        (b"\xc3\x01\x00\x01", "truncated record"),
        (SINGLE_OBJECT_MARKER + bytes(8) + b"\x00", "unknown writer schema fingerprint 0000000000000000"),
        (b"\x00\x00\x00\x00\x01\x02", "no schema_registry_url"),
        (HEADER, "ends early"),
    ],
)
def test_malformed_framing(data: bytes, cause: str) -> None:
    with pytest.raises(CodecError, match=cause):
        decode_event(data)


def test_none_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="tombstone"):
        decode_event(None)  # type: ignore[arg-type]


def test_trailing_bytes_are_rejected() -> None:
    encoded = encode_event(Event(Source("s", 1, 1), EventType.OPEN_TXN, OpenTxnPayload(txn_ids=[1])))
    with pytest.raises(CodecError, match="1 trailing bytes"):
        decode_event(encoded + b"\x00")


@pytest.mark.parametrize("count", [2**40, -(2**40), 2**62, -1])
def test_huge_collection_counts_fail_fast(count: int) -> None:
    """A forged array count must hit the end of the record, not allocate or loop for it."""
    empty = encode_event(Event(Source("s", 1, 1), EventType.OPEN_TXN, OpenTxnPayload(txn_ids=[])))
    # The body ends: txn_ids block terminator, then null db, table, ts_ms, prev_event_id (one byte each).
    assert empty.endswith(b"\x00\x00\x00\x00\x00")
    with pytest.raises(CodecError, match="ends early"):
        decode_event(empty[:-5] + _zigzag(count))


@pytest.mark.parametrize("length", [-3, 2**62])
def test_forged_string_lengths_fail(length: int) -> None:
    with pytest.raises(CodecError):
        decode_event(HEADER + _zigzag(length) + b"abcdef" * 3)


def test_invalid_utf8_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="UnicodeDecodeError"):
        decode_event(HEADER + _zigzag(2) + b"\xff\xfe")


def test_payload_that_does_not_belong_to_the_event_type_is_refused_both_ways() -> None:
    import dataclasses

    from streamer.events.codec import decode_event, encode_event
    from streamer.events.model import (
        CreateTablePayload,
        Event,
        EventType,
        OpenTxnPayload,
        Source,
        TableSnapshot,
    )

    payload = CreateTablePayload(TableSnapshot("t", "d"))
    good = Event(Source("s", 1, 0), EventType.CREATE_TABLE, payload, "d", "t")
    assert decode_event(encode_event(good)) == good
    bad = dataclasses.replace(good, payload=OpenTxnPayload([1]))
    with pytest.raises(CodecError, match="does not belong to CREATE_TABLE"):
        encode_event(bad)
