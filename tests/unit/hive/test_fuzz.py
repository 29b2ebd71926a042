"""Hostile rows never crash the decoder: every failure is a DecodeError naming the event."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.errors import DecodeError, UnknownEventTypeError
from streamer.events.model import EventType
from streamer.hive.decode import decode_row
from streamer.hive.notification import NotificationRow

FIXTURES = Path(__file__).parents[2] / "fixtures" / "hive-messages"  # real messages, in the repository
BODIES = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.json"))]
TYPES = [t.value for t in EventType if t is not EventType.PROGRESS]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _decode_only_fails_cleanly(row: NotificationRow) -> None:
    try:
        decode_row(row)
    except DecodeError as exc:
        assert exc.event_id == row.event_id and exc.cause


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(TYPES), st.sampled_from(BODIES), st.integers(0, 5000), st.data())
def test_truncated_and_mutated_messages(etype: str, body: str, cut: int, data: st.DataObject) -> None:
    text = body[: cut % (len(body) + 1)]
    _decode_only_fails_cleanly(NotificationRow(3, 0, etype, text, "json-0.2"))
    obj = json.loads(body)
    if obj:
        key = data.draw(st.sampled_from(sorted(obj)))
        obj[key] = data.draw(json_values)
        _decode_only_fails_cleanly(NotificationRow(4, 0, etype, json.dumps(obj), None))


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(TYPES),
    st.dictionaries(
        st.sampled_from(
            [
                "db",
                "table",
                "tableObjJson",
                "files",
                "partitions",
                "partitionListJson",
                "txnid",
                "fromTxnId",
                "toTxnId",
                "txnIds",
                "colStatsJson",
                "functionObjJson",
                "dbJson",
                "writeIds",
                "txnIdList",
                "writeIdList",
                "replace",
                "isTruncateOp",
                "primaryKeyListJson",
                "partitionFiles",
                "keyValues",
                "partitionObjAfterJson",
            ]
        ),
        json_values | st.sampled_from(['{"1":{"str":1}}', '{"1":{"lst":["str",2,"a"]}}', "[", '{"x":1}']),
        max_size=6,
    ),
)
def test_wrong_types_in_known_fields(etype: str, body: dict[str, object]) -> None:
    _decode_only_fails_cleanly(NotificationRow(5, 0, etype, json.dumps(body), "json-0.2"))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64), st.booleans())
def test_invalid_base64_gzip_utf8(raw: bytes, wrap: bool) -> None:
    payload = gzip.compress(raw) if wrap else raw
    for text in (base64.b64encode(payload).decode(), raw.decode("latin-1")):
        _decode_only_fails_cleanly(NotificationRow(6, 0, "CREATE_TABLE", text, "gzip(json-2.0)"))


def test_unknown_format_and_type_are_named() -> None:
    with pytest.raises(DecodeError, match="avro"):
        decode_row(NotificationRow(1, 0, "CREATE_TABLE", "{}", "avro"))
    with pytest.raises(UnknownEventTypeError, match="CREATE_CATALOG") as info:
        decode_row(NotificationRow(2, 0, "CREATE_CATALOG", "{}", "json-0.2"))
    assert info.value.event_id == 2


def test_huge_open_txn_range_is_rejected() -> None:
    with pytest.raises(DecodeError, match="range"):
        decode_row(NotificationRow(1, 0, "OPEN_TXN", '{"fromTxnId":1,"toTxnId":99999999999}', "json-0.2"))


def test_gzip_bomb_is_refused_without_exhausting_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import base64
    import gzip

    from streamer.hive import message

    monkeypatch.setattr(message, "MAX_MESSAGE_BYTES", 1_000_000)
    bomb = base64.b64encode(gzip.compress(b"{" + b" " * 5_000_000 + b"}")).decode()
    with pytest.raises(ValueError, match="more than 1000000 bytes"):
        message.gunzip_message(bomb)
    fine = base64.b64encode(gzip.compress(b'{"a": 1}') + gzip.compress(b"")).decode()  # two members
    assert message.gunzip_message(fine) == '{"a": 1}'
    with pytest.raises(ValueError, match="truncated"):
        message.gunzip_message(base64.b64encode(gzip.compress(b'{"a": 1}')[:-6]).decode())
