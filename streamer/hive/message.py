"""The body of a notification message: its storage format, and typed access to its JSON fields.

Hive writes ``json-0.2`` (JSON text) or ``gzip(json-2.0)`` (base64 of gzip of the JSON); very old
rows have no format. Field readers accept the loose shapes Hive's Jackson output takes (string
booleans, ``null`` for absent) and raise ``ValueError`` naming the field otherwise.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from typing import Any, TypeVar

JSON_FORMAT = "json-0.2"
GZIP_FORMAT = "gzip(json-2.0)"
FORMATS = (JSON_FORMAT, GZIP_FORMAT)


def message_json(message: str | None, message_format: str | None) -> dict[str, Any]:
    """Parse a stored message into its JSON object, whatever format Hive wrote it in."""
    if message is None:
        raise ValueError("message is NULL")
    if message_format in (None, "", JSON_FORMAT):
        text = message
    elif message_format == GZIP_FORMAT:
        text = gunzip_message(message)
    else:
        raise ValueError(f"unsupported message format {message_format!r} (expected one of {FORMATS})")
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"message is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ValueError(f"message is JSON {type(body).__name__}, expected an object")
    return body


def gunzip_message(message: str) -> str:
    try:
        raw = base64.b64decode(message.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"gzip message is not valid base64: {exc}") from exc
    try:
        data = _gunzip_bounded(raw, MAX_MESSAGE_BYTES)
    except zlib.error as exc:
        raise ValueError(f"gzip message does not decompress: {exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"gzip message is not UTF-8: {exc}") from exc


MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""A decoded message larger than this is refused: Hive's largest are tens of MB; a gzip bomb is not."""


def _gunzip_bounded(raw: bytes, limit: int) -> bytes:
    """gzip.decompress that stops at ``limit`` output bytes instead of exhausting memory."""
    out = bytearray()
    while raw:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += member.decompress(raw, limit + 1 - len(out))
        if len(out) > limit or member.unconsumed_tail:
            raise ValueError(f"gzip message decompresses to more than {limit} bytes")
        if not member.eof:
            raise ValueError("gzip message is truncated")
        raw = member.unused_data
    return bytes(out)


def gzip_message(text: str) -> str:
    """Standard padded base64 of gzip of the UTF-8 text, as GzipJSONMessageEncoder writes."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")


class Fields:
    """Typed, null-tolerant getters over one message object."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    def has(self, key: str) -> bool:
        return self.body.get(key) is not None

    def _get(self, key: str, required: bool) -> Any:
        value = self.body.get(key)
        if value is None and required:
            raise ValueError(f"field {key!r} is missing")
        return value

    def str_(self, key: str, required: bool = False) -> str | None:
        value = self._get(key, required)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"field {key!r} should be a string, found {type(value).__name__}")
        return value

    def rstr(self, key: str) -> str:
        return _present(self.str_(key, required=True))

    def int_(self, key: str, required: bool = False) -> int | None:
        value = self._get(key, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"field {key!r} should be an integer, found {value!r:.40}")
        return value

    def rint(self, key: str) -> int:
        return _present(self.int_(key, required=True))

    def bool_(self, key: str) -> bool:
        """Hive writes booleans as the strings ``"true"``/``"false"`` (Boolean.toString)."""
        value = self.body.get(key)
        if value is None:
            return False
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError(f'field {key!r} should be "true" or "false", found {value!r:.40}')

    def list_(self, key: str, item: type, required: bool = False) -> list[Any] | None:
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, list):
            raise ValueError(f"field {key!r} should be a list, found {type(value).__name__}")
        for v in value:
            if isinstance(v, bool) or not isinstance(v, item):
                raise ValueError(f"field {key!r} should hold {item.__name__} items, found {v!r:.40}")
        return value

    def str_map(self, key: str, required: bool = False) -> dict[str, str] | None:
        value = self._get(key, required)
        if value is None:
            return None
        return as_str_map(value, key)


_T = TypeVar("_T")


def _present(value: _T | None) -> _T:
    """``value`` of a field read with ``required=True``, which raised had it been missing."""
    assert value is not None
    return value


def as_str_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{what} should be an object of strings, found {value!r:.60}")
    return value
