"""Thrift's TJSONProtocol, read and written without generated classes.

Hive embeds metastore objects (Table, Partition, ...) in its messages as TJSONProtocol text: structs
keyed by field id, every value tagged with its wire type. Decoding is driven by small struct specs
(field id -> name, type) so that unknown ids, which newer Hive versions add, are skipped. The readers
return plain dicts keyed by field name; :mod:`streamer.hive.fields` turns them into snapshots.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from typing import Any

from streamer.errors import StreamerError


class TJSONError(StreamerError, ValueError):
    """The text is not the TJSONProtocol form of the expected struct; says where and why."""


@dataclass(frozen=True)
class Prim:
    """A scalar: ``tf i8 i16 i32 i64 dbl str`` or ``bin`` (binary, a base64 ``str`` on the wire)."""

    tag: str


@dataclass(frozen=True)
class ListOf:
    elem: TType
    tag: str = "lst"  # or "set"


@dataclass(frozen=True)
class MapOf:
    key: TType
    value: TType


@dataclass(frozen=True)
class Struct:
    """A struct or union; ``fields`` maps field id -> (name, type)."""

    name: str
    fields: dict[int, tuple[str, TType]]


TType = Prim | ListOf | MapOf | Struct

BOOL, I16, I32, I64, DBL, STR, BIN = (Prim(t) for t in ("tf", "i16", "i32", "i64", "dbl", "str", "bin"))
_INT_TAGS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def wire_tag(t: TType) -> str:
    if isinstance(t, Prim):
        return "str" if t.tag == "bin" else t.tag
    if isinstance(t, ListOf):
        return t.tag
    if isinstance(t, MapOf):
        return "map"
    return "rec"


# --- reading ----------------------------------------------------------------------------------


def loads(spec: Struct, text: str) -> dict[str, Any]:
    """Parse TJSON text of one ``spec`` struct into a dict keyed by field name."""
    if not isinstance(text, str):
        raise TJSONError(f"{spec.name}: expected TJSON text, found {type(text).__name__}")
    try:
        tree = json.loads(text)
    except ValueError as exc:
        raise TJSONError(f"{spec.name}: not JSON ({exc})") from exc
    return read_struct(spec, tree, spec.name)


def read_struct(spec: Struct, obj: Any, path: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TJSONError(f"{path}: expected a struct object, found {type(obj).__name__}")
    out: dict[str, Any] = {}
    for key, tagged in obj.items():
        try:
            fid = int(key)
        except ValueError as exc:
            raise TJSONError(f"{path}: field id {key!r} is not a number") from exc
        field = spec.fields.get(fid)
        if field is None:
            continue  # newer Hive versions add fields; they are not needed
        name, ftype = field
        out[name] = _read_tagged(ftype, tagged, f"{path}.{name}")
    return out


def _read_tagged(t: TType, tagged: Any, path: str) -> Any:
    expected = wire_tag(t)
    if not isinstance(tagged, dict) or len(tagged) != 1:
        raise TJSONError(f"{path}: expected {{{expected!r}: value}}, found {tagged!r:.80}")
    ((tag, value),) = tagged.items()
    if tag != expected:
        raise TJSONError(f"{path}: expected type {expected!r}, found {tag!r}")
    return _read_bare(t, value, path)


def _read_bare(t: TType, value: Any, path: str) -> Any:
    if isinstance(t, Struct):
        return read_struct(t, value, path)
    if isinstance(t, Prim):
        return _read_prim(t.tag, value, path)
    if isinstance(t, ListOf):
        return _read_list(t, value, path)
    return _read_map(t, value, path)


def _read_prim(tag: str, value: Any, path: str) -> Any:
    if tag == "tf":
        if value in (0, 1) and not isinstance(value, float):
            return bool(value)
    elif tag in _INT_TAGS:
        if isinstance(value, int) and not isinstance(value, bool):
            bits = _INT_TAGS[tag]
            if -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
                return value
    elif tag == "dbl":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and value in _SPECIAL_DOUBLES:
            return _SPECIAL_DOUBLES[value]
    elif tag == "str":
        if isinstance(value, str):
            return value
    elif tag == "bin" and isinstance(value, str):
        try:
            return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise TJSONError(f"{path}: invalid base64 binary") from exc
    raise TJSONError(f"{path}: invalid {tag} value {value!r:.80}")


def _read_list(t: ListOf, value: Any, path: str) -> list[Any]:
    if not isinstance(value, list) or len(value) < 2:
        raise TJSONError(f"{path}: expected [elemType, count, ...], found {value!r:.80}")
    elem_tag, count, *items = value
    if elem_tag != wire_tag(t.elem):
        raise TJSONError(f"{path}: expected elements of type {wire_tag(t.elem)!r}, found {elem_tag!r}")
    if count != len(items):
        raise TJSONError(f"{path}: count {count!r} but {len(items)} elements")
    return [_read_bare(t.elem, item, f"{path}[{i}]") for i, item in enumerate(items)]


def _read_map(t: MapOf, value: Any, path: str) -> dict[Any, Any]:
    if not isinstance(value, list) or len(value) != 4 or not isinstance(value[3], dict):
        raise TJSONError(f"{path}: expected [keyType, valueType, count, {{...}}], found {value!r:.80}")
    key_tag, value_tag, count, items = value
    if (key_tag, value_tag) != (wire_tag(t.key), wire_tag(t.value)):
        raise TJSONError(f"{path}: unexpected map types {key_tag!r}, {value_tag!r}")
    if count != len(items):
        raise TJSONError(f"{path}: count {count!r} but {len(items)} entries")
    return {_read_key(t.key, k, path): _read_bare(t.value, v, f"{path}[{k!r}]") for k, v in items.items()}


def _read_key(t: TType, key: str, path: str) -> Any:
    if isinstance(t, Prim) and t.tag in _INT_TAGS:
        try:
            return int(key)
        except ValueError as exc:
            raise TJSONError(f"{path}: map key {key!r} is not an integer") from exc
    if t == STR:
        return key
    raise TJSONError(f"{path}: unsupported map key type {wire_tag(t)!r}")


# --- writing ----------------------------------------------------------------------------------


def dumps(spec: Struct, value: dict[str, Any]) -> str:
    """TJSON text of ``value`` (a dict keyed by field name; ``None`` fields are left out)."""
    return json.dumps(write_struct(spec, value), separators=(",", ":"), ensure_ascii=False)


def write_struct(spec: Struct, value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fid in sorted(spec.fields):
        name, ftype = spec.fields[fid]
        v = value.get(name)
        if v is not None:
            out[str(fid)] = {wire_tag(ftype): _write_bare(ftype, v)}
    return out


def _write_bare(t: TType, v: Any) -> Any:
    if isinstance(t, Struct):
        return write_struct(t, v)
    if isinstance(t, ListOf):
        return [wire_tag(t.elem), len(v), *(_write_bare(t.elem, e) for e in v)]
    if isinstance(t, MapOf):
        entries = {str(k): _write_bare(t.value, x) for k, x in v.items()}
        return [wire_tag(t.key), wire_tag(t.value), len(v), entries]
    if t.tag == "tf":
        return 1 if v else 0
    if t.tag == "bin":
        return base64.b64encode(v).decode("ascii")
    if t.tag == "dbl" and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v
