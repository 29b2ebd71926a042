"""Metastore Thrift objects (as TJSON text) <-> the snapshots of :mod:`streamer.events.model`.

Readers accept what any Hive version writes (missing optional fields become defaults); writers
produce what a Hive 4 metastore writes for the same object, so both directions round-trip. The
objects' fields are mapped by the table in :mod:`streamer.hive.fields` (which the Thrift API's
conversion shares); column statistics, a union of per-kind structs, are mapped here.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from streamer.events import model as ev
from streamer.hive import fields, tjson
from streamer.hive.tjson import TJSONError

T = TypeVar("T")


def from_tjson(obj: fields.HiveObject[T], text: str) -> T:
    """The snapshot of one ``obj`` struct (``fields.TABLE``, ``fields.CONSTRAINTS[kind]``...) in TJSON."""
    return fields.load(obj, tjson.loads(obj.struct, text))


def to_tjson(obj: fields.HiveObject[T], snapshot: T) -> str:
    """``snapshot`` as the TJSON text of an ``obj`` struct, as Hive 4 writes it."""
    return tjson.dumps(obj.struct, fields.dump(obj, snapshot))


# --- constraints ------------------------------------------------------------------------------

# kind -> the message key listing constraints of that kind
CONSTRAINT_KEYS: dict[str, str] = {
    "PRIMARY_KEY": "primaryKeyListJson",
    "FOREIGN_KEY": "foreignKeyListJson",
    "UNIQUE": "uniqueConstraintListJson",
    "NOT_NULL": "notNullConstraintListJson",
    "DEFAULT": "defaultConstraintListJson",
    "CHECK": "checkConstraintListJson",
}


def _required(d: dict[str, Any], key: str, what: str) -> Any:
    if d.get(key) is None:
        raise TJSONError(f"{what}: required field {key!r} is missing")
    return d[key]


# --- column statistics ------------------------------------------------------------------------

_STATS_KINDS = {
    "BOOLEAN": "booleanStats",
    "LONG": "longStats",
    "DOUBLE": "doubleStats",
    "STRING": "stringStats",
    "BINARY": "binaryStats",
    "DECIMAL": "decimalStats",
    "DATE": "dateStats",
    "TIMESTAMP": "timestampStats",
}
_BOUND_KEYS = {"DATE": "daysSinceEpoch", "TIMESTAMP": "secondsSinceEpoch"}


def _bound_from(kind: str, v: Any) -> str | None:
    if v is None:
        return None
    if kind == "DECIMAL":
        unscaled = int.from_bytes(v["unscaled"], "big", signed=True) if v.get("unscaled") else 0
        return str(Decimal(unscaled).scaleb(-v.get("scale", 0)))
    if kind in _BOUND_KEYS:
        return str(v.get(_BOUND_KEYS[kind], 0))
    return repr(v) if kind == "DOUBLE" else str(v)


def _bound_to(kind: str, text: str | None) -> Any:
    if text is None:
        return None
    if kind == "DECIMAL":
        try:
            sign, digits, exponent = Decimal(text).as_tuple()
        except InvalidOperation as exc:
            raise ValueError(f"invalid decimal statistic {text!r}") from exc
        if not isinstance(exponent, int):
            raise ValueError(f"decimal statistic {text!r} is not finite")
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        size = unscaled.bit_length() // 8 + 1
        return {"unscaled": unscaled.to_bytes(size, "big", signed=True), "scale": -exponent}
    if kind in _BOUND_KEYS:
        return {_BOUND_KEYS[kind]: int(text)}
    return float(text) if kind == "DOUBLE" else int(text)


def column_stats_from_tjson(text: str) -> tuple[dict[str, Any], list[ev.ColumnStatistic]]:
    """The ColumnStatisticsDesc (as a dict) and one ``ColumnStatistic`` per column."""
    d = tjson.loads(tjson.COLUMN_STATISTICS, text)
    stats = []
    for obj in d.get("statsObj") or []:
        data = _required(obj, "statsData", "ColumnStatisticsObj")
        if len(data) != 1:
            raise TJSONError("ColumnStatisticsData: a union needs exactly one known member")
        ((member, s),) = data.items()
        kind = next(k for k, m in _STATS_KINDS.items() if m == member)
        stats.append(
            ev.ColumnStatistic(
                column=_required(obj, "colName", "ColumnStatisticsObj"),
                type=obj.get("colType") or "",
                kind=kind,
                num_nulls=s.get("numNulls"),
                num_distinct=s.get("numDVs"),
                low_value=_bound_from(kind, s.get("lowValue")),
                high_value=_bound_from(kind, s.get("highValue")),
                avg_length=s.get("avgColLen"),
                max_length=s.get("maxColLen"),
                num_trues=s.get("numTrues"),
                num_falses=s.get("numFalses"),
                bit_vectors=s.get("bitVectors"),
            )
        )
    return d.get("statsDesc") or {}, stats


def column_stats_to_tjson(desc: dict[str, Any], stats: list[ev.ColumnStatistic]) -> str:
    objs = []
    for s in stats:
        data = {
            "numNulls": s.num_nulls,
            "numDVs": s.num_distinct,
            "lowValue": _bound_to(s.kind, s.low_value),
            "highValue": _bound_to(s.kind, s.high_value),
            "avgColLen": s.avg_length,
            "maxColLen": s.max_length,
            "numTrues": s.num_trues,
            "numFalses": s.num_falses,
            "bitVectors": s.bit_vectors,
        }
        if s.kind not in _STATS_KINDS:
            raise ValueError(f"unknown column statistics kind {s.kind!r}")
        objs.append({"colName": s.column, "colType": s.type, "statsData": {_STATS_KINDS[s.kind]: data}})
    return tjson.dumps(tjson.COLUMN_STATISTICS, {"statsDesc": desc, "statsObj": objs})
