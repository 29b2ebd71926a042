"""Hostile bytes for both decoders (Hive notification rows, Avro records): typed errors, quickly.

Complements tests/unit/hive/test_fuzz.py and tests/unit/events/test_codec_errors.py with what an
attacker controls end to end: invalid UTF-8 (raw and inside gzip), oversized and deeply nested
messages, unknown event types, and Avro records whose fields carry the wrong types. Each call runs
under a per-call time limit (SIGALRM) as well as pytest's, so a hang fails with the input named.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import gzip
import io
import json
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.errors import CodecError, DecodeError, StreamerError
from streamer.events.codec import SINGLE_OBJECT_MARKER, decode_event, encode_event
from streamer.events.model import Event, EventType, OpenTxnPayload, Source
from streamer.events.schemas import load_event_schema
from streamer.hive.decode import decode_row
from streamer.hive.notification import NotificationRow
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState

pytestmark = pytest.mark.timeout(300)
LIMIT_S = 5
TYPES = [t.value for t in EventType if t is not EventType.PROGRESS]
SCHEMA = load_event_schema()


@contextlib.contextmanager
def deadline(what: str) -> Iterator[None]:
    def fail(*_: object) -> None:
        raise AssertionError(f"no answer within {LIMIT_S} s for {what[:200]!r}")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _typed(call: Callable[[], Any], errors: tuple[type[StreamerError], ...], what: str) -> Any:
    """The call's result, or None when it failed with one of ``errors`` (anything else fails the test)."""
    with deadline(what):
        try:
            return call()
        except errors as exc:
            assert str(exc)
            return None


def _row(event_type: str, message: str, fmt: str | None = "json-0.2") -> NotificationRow:
    return NotificationRow(7, 1_700_000_000, event_type, message, fmt, "db", "tbl")


def _gzip(data: bytes) -> str:
    return base64.b64encode(gzip.compress(data, mtime=0)).decode("ascii")


# --- Hive notification rows ------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(TYPES), st.binary(max_size=300), st.sampled_from(["json-0.2", "gzip(json-2.0)", None]))
def test_invalid_utf8_and_random_bytes(event_type: str, raw: bytes, fmt: str | None) -> None:
    message = _gzip(raw) if fmt and fmt.startswith("gzip") else raw.decode("latin-1")
    _typed(lambda: decode_row(_row(event_type, message, fmt)), (DecodeError,), message)


@pytest.mark.parametrize("event_type", ["CREATE_TABLE", "INSERT", "ADD_PARTITION"])
def test_invalid_utf8_inside_gzip_is_a_decode_error(event_type: str) -> None:
    message = _gzip(b'{"db": "\xff\xfe", "table": "t"}')
    with pytest.raises(DecodeError) as info:
        decode_row(_row(event_type, message, "gzip(json-2.0)"))
    assert info.value.event_id == 7


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=40).filter(lambda t: t not in TYPES),
       st.sampled_from(["{}", '{"db":"d"}']))
def test_unknown_event_types_are_typed(event_type: str, body: str) -> None:
    with pytest.raises(DecodeError):
        decode_row(_row(event_type, body))


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deeply_nested_messages_do_not_crash(depth: int) -> None:
    message = '{"db": ' + "[" * depth + "]" * depth + "}"
    _typed(lambda: decode_row(_row("CREATE_TABLE", message)), (DecodeError,), f"nesting {depth}")


def test_oversized_messages_answer_in_time() -> None:
    huge_name = "x" * 5_000_000
    body = json.dumps({"server": "", "servicePrincipal": "", "db": huge_name, "table": "t", "timestamp": 1,
                       "tableObjJson": "{" + '"1":{"str":"' + huge_name + '"}' + "}"})
    for fmt, message in (("json-0.2", body), ("gzip(json-2.0)", _gzip(body.encode()))):
        _typed(lambda m=message, f=fmt: decode_row(_row("CREATE_TABLE", m, f)), (DecodeError,), "oversized")  # type: ignore[misc]


def test_gzip_bomb_answers_in_time() -> None:
    bomb = _gzip(b"[" + b" " * 50_000_000 + b"]")
    assert len(bomb) < 200_000
    _typed(lambda: decode_row(_row("CREATE_TABLE", bomb, "gzip(json-2.0)")), (DecodeError,), "gzip bomb")


# --- Avro records ------------------------------------------------------------------------------------


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=0, max_size=400))
def test_avro_body_garbage_after_a_valid_header(body: bytes) -> None:
    data = SINGLE_OBJECT_MARKER + SCHEMA.fingerprint + body
    got = _typed(lambda: decode_event(data), (CodecError,), repr(data))
    assert got is None or isinstance(got, Event)


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=64))
def test_avro_invalid_utf8_in_strings(junk: bytes) -> None:
    # a varint length then bytes that may not be UTF-8, where the envelope's first string is read
    length = len(junk)
    data = SINGLE_OBJECT_MARKER + SCHEMA.fingerprint + bytes([length * 2 & 0x7F]) + junk + b"\x00" * 16
    got = _typed(lambda: decode_event(data), (CodecError,), repr(data))
    assert got is None or isinstance(got, Event)


@pytest.mark.parametrize("n", [1, 10, 2**31, 2**62])
def test_avro_huge_lengths_do_not_allocate_or_hang(n: int) -> None:
    zigzag = (n << 1) ^ (n >> 63)
    varint = bytearray()
    while zigzag & ~0x7F:
        varint.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    varint.append(zigzag)
    data = SINGLE_OBJECT_MARKER + SCHEMA.fingerprint + bytes(varint) + b"abc"
    assert _typed(lambda: decode_event(data), (CodecError,), f"length {n}") is None


@pytest.mark.parametrize("event_type", ["EVIL_EVENT", "", "open_txn", "CREATE_TABLE", "\u202e"])
def test_avro_record_with_an_unknown_or_mismatched_event_type(event_type: str) -> None:
    """A known payload under an unknown (or another payload's) event type: typed error, never a crash."""
    event = Event(Source("s", 5, 1_700_000_000), EventType.OPEN_TXN, OpenTxnPayload([1]))
    header = SINGLE_OBJECT_MARKER + SCHEMA.fingerprint
    datum = fastavro.schemaless_reader(io.BytesIO(encode_event(event)[len(header):]), SCHEMA.parsed)
    datum["event_type"] = event_type
    out = io.BytesIO()
    fastavro.schemaless_writer(out, SCHEMA.parsed, datum)
    got = _typed(lambda: decode_event(header + out.getvalue()), (CodecError,), event_type)
    if got is None or got.event_type == EventType.OPEN_TXN:
        return
    # The codec does not check that the payload fits the event type (finding, issue 6): the applier
    # must then refuse it with a typed error naming the event, not crash or apply something else.
    with tempfile.TemporaryDirectory() as tmp:
        state = TargetState(Path(tmp) / "state")
        paths = TargetPaths(tmp + "/wh")
        applier = Applier(MemoryCatalog(), FileCopier(max_workers=1), paths, "s", state=state)
        mismatched = dataclasses.replace(got, db="a", table="t")
        run_plan(applier, plan([mismatched], applier.load_progress(), state.halts()), state)
        assert state.halts()["a"].event_id == 5
