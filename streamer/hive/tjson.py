"""Thrift's TJSONProtocol, read and written without generated classes.

Hive embeds metastore objects (Table, Partition, ...) in its messages as TJSONProtocol text: structs
keyed by field id, every value tagged with its wire type. Decoding is driven by small struct specs
(field id -> name, type) so that unknown ids, which newer Hive versions add, are skipped. The readers
return plain dicts keyed by field name; :mod:`streamer.hive.objects` turns them into snapshots.
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


# --- Hive metastore struct specs (hive_metastore.thrift field ids) -----------------------------

FIELD_SCHEMA = Struct("FieldSchema", {1: ("name", STR), 2: ("type", STR), 3: ("comment", STR)})
SERDE_INFO = Struct(
    "SerDeInfo", {1: ("name", STR), 2: ("serializationLib", STR), 3: ("parameters", MapOf(STR, STR))}
)
ORDER = Struct("Order", {1: ("col", STR), 2: ("order", I32)})
STORAGE_DESCRIPTOR = Struct(
    "StorageDescriptor",
    {
        1: ("cols", ListOf(FIELD_SCHEMA)),
        2: ("location", STR),
        3: ("inputFormat", STR),
        4: ("outputFormat", STR),
        5: ("compressed", BOOL),
        6: ("numBuckets", I32),
        7: ("serdeInfo", SERDE_INFO),
        8: ("bucketCols", ListOf(STR)),
        9: ("sortCols", ListOf(ORDER)),
        10: ("parameters", MapOf(STR, STR)),
        12: ("storedAsSubDirectories", BOOL),
    },
)
TABLE = Struct(
    "Table",
    {
        1: ("tableName", STR),
        2: ("dbName", STR),
        3: ("owner", STR),
        4: ("createTime", I32),
        5: ("lastAccessTime", I32),
        6: ("retention", I32),
        7: ("sd", STORAGE_DESCRIPTOR),
        8: ("partitionKeys", ListOf(FIELD_SCHEMA)),
        9: ("parameters", MapOf(STR, STR)),
        10: ("viewOriginalText", STR),
        11: ("viewExpandedText", STR),
        12: ("tableType", STR),
        14: ("temporary", BOOL),
        15: ("rewriteEnabled", BOOL),
        17: ("catName", STR),
        18: ("ownerType", I32),
        19: ("writeId", I64),
    },
)
PARTITION = Struct(
    "Partition",
    {
        1: ("values", ListOf(STR)),
        2: ("dbName", STR),
        3: ("tableName", STR),
        4: ("createTime", I32),
        5: ("lastAccessTime", I32),
        6: ("sd", STORAGE_DESCRIPTOR),
        7: ("parameters", MapOf(STR, STR)),
        9: ("catName", STR),
        10: ("writeId", I64),
    },
)
DATABASE = Struct(
    "Database",
    {
        1: ("name", STR),
        2: ("description", STR),
        3: ("locationUri", STR),
        4: ("parameters", MapOf(STR, STR)),
        6: ("ownerName", STR),
        7: ("ownerType", I32),
        8: ("catalogName", STR),
        9: ("createTime", I32),
        10: ("managedLocationUri", STR),
    },
)
RESOURCE_URI = Struct("ResourceUri", {1: ("resourceType", I32), 2: ("uri", STR)})
FUNCTION = Struct(
    "Function",
    {
        1: ("functionName", STR),
        2: ("dbName", STR),
        3: ("className", STR),
        4: ("ownerName", STR),
        5: ("ownerType", I32),
        6: ("createTime", I32),
        7: ("functionType", I32),
        8: ("resourceUris", ListOf(RESOURCE_URI)),
        9: ("catName", STR),
    },
)

_PRIMS = {p.tag: p for p in (BOOL, I16, I32, I64, DBL, STR, BIN)}
_FLAGS = "enable_cstr:tf validate_cstr:tf rely_cstr:tf"


def _constraint(name: str, fields: str) -> Struct:
    """A constraint struct from ``"name[:type] ..."`` in field-id order (type defaults to str)."""
    specs = [f.partition(":") for f in fields.split()]
    return Struct(name, {i + 1: (n, _PRIMS[t or "str"]) for i, (n, _, t) in enumerate(specs)})


SQL_PRIMARY_KEY = _constraint(
    "SQLPrimaryKey", f"table_db table_name column_name key_seq:i32 pk_name {_FLAGS} catName"
)
SQL_FOREIGN_KEY = _constraint(
    "SQLForeignKey",
    "pktable_db pktable_name pkcolumn_name fktable_db fktable_name fkcolumn_name key_seq:i32"
    f" update_rule:i32 delete_rule:i32 fk_name pk_name {_FLAGS} catName",
)
SQL_UNIQUE = _constraint(
    "SQLUniqueConstraint", f"catName table_db table_name column_name key_seq:i32 uk_name {_FLAGS}"
)
SQL_NOT_NULL = _constraint(
    "SQLNotNullConstraint", f"catName table_db table_name column_name nn_name {_FLAGS}"
)
SQL_DEFAULT = _constraint(
    "SQLDefaultConstraint", f"catName table_db table_name column_name default_value dc_name {_FLAGS}"
)
SQL_CHECK = _constraint(
    "SQLCheckConstraint", f"catName table_db table_name column_name check_expression dc_name {_FLAGS}"
)

_DECIMAL = Struct("Decimal", {1: ("unscaled", BIN), 3: ("scale", I16)})
_DATE = Struct("Date", {1: ("daysSinceEpoch", I64)})
_TIMESTAMP = Struct("Timestamp", {1: ("secondsSinceEpoch", I64)})


def _ranged(name: str, bound: TType) -> Struct:
    return Struct(
        name,
        {
            1: ("lowValue", bound),
            2: ("highValue", bound),
            3: ("numNulls", I64),
            4: ("numDVs", I64),
            5: ("bitVectors", BIN),
        },
    )


COLUMN_STATS_DATA = Struct(
    "ColumnStatisticsData",
    {
        1: (
            "booleanStats",
            Struct(
                "BooleanColumnStatsData",
                {1: ("numTrues", I64), 2: ("numFalses", I64), 3: ("numNulls", I64), 4: ("bitVectors", BIN)},
            ),
        ),
        2: ("longStats", _ranged("LongColumnStatsData", I64)),
        3: ("doubleStats", _ranged("DoubleColumnStatsData", DBL)),
        4: (
            "stringStats",
            Struct(
                "StringColumnStatsData",
                {
                    1: ("maxColLen", I64),
                    2: ("avgColLen", DBL),
                    3: ("numNulls", I64),
                    4: ("numDVs", I64),
                    5: ("bitVectors", BIN),
                },
            ),
        ),
        5: (
            "binaryStats",
            Struct(
                "BinaryColumnStatsData",
                {1: ("maxColLen", I64), 2: ("avgColLen", DBL), 3: ("numNulls", I64), 4: ("bitVectors", BIN)},
            ),
        ),
        6: ("decimalStats", _ranged("DecimalColumnStatsData", _DECIMAL)),
        7: ("dateStats", _ranged("DateColumnStatsData", _DATE)),
        8: ("timestampStats", _ranged("TimestampColumnStatsData", _TIMESTAMP)),
    },
)
COLUMN_STATS_OBJ = Struct(
    "ColumnStatisticsObj", {1: ("colName", STR), 2: ("colType", STR), 3: ("statsData", COLUMN_STATS_DATA)}
)
COLUMN_STATS_DESC = Struct(
    "ColumnStatisticsDesc",
    {
        1: ("isTblLevel", BOOL),
        2: ("dbName", STR),
        3: ("tableName", STR),
        4: ("partName", STR),
        5: ("lastAnalyzed", I64),
        6: ("catName", STR),
    },
)
COLUMN_STATISTICS = Struct(
    "ColumnStatistics",
    {1: ("statsDesc", COLUMN_STATS_DESC), 2: ("statsObj", ListOf(COLUMN_STATS_OBJ)), 4: ("engine", STR)},
)
