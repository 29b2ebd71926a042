"""Conversion between streamer's snapshots and the Hive 2.3 metastore's Thrift objects.

Pure code, no I/O, so every field's mapping can be checked without a server. Databases, tables,
partitions, functions and keys follow the field table of ``streamer.hive.fields`` (shared with the
TJSON of Hive's messages): fields Hive 2.3's generated classes lack are not sent and come back as
``None``. Column statistics keep bounds as text, as ``streamer.hive.objects`` writes them. See
docs/design/metastore.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any, TypeVar

from hmsclient.genthrift.hive_metastore import ttypes as tt

from streamer.errors import StreamerError
from streamer.events import model as ev
from streamer.hive import fields

_EPOCH = dt.date(1970, 1, 1)
T = TypeVar("T")


class UnsupportedStatisticError(StreamerError, ValueError):
    """A statistic kind that Hive 2.3's Thrift API cannot carry."""


# --- objects: driven by the field table of streamer.hive.fields ------------------------------


def _get(obj: Any, name: str) -> Any:
    return getattr(obj, name, None)  # a field Hive 2.3's class lacks reads as missing


def _make(obj: fields.HiveObject, values: dict[str, Any]) -> Any:
    """The generated class of ``obj`` with the fields it has (Hive 2.3 lacks catalogs, write ids, ...)."""
    cls = getattr(tt, obj.name)
    known = {spec[2] for spec in cls.thrift_spec if spec}
    if obj is fields.STORAGE_DESCRIPTOR:  # Hive 2.3's server expects skew information, even empty
        values = {**values, "skewedInfo": tt.SkewedInfo(skewedColNames=[], skewedColValues=[],
                                                         skewedColValueLocationMaps={})}
    return cls(**{k: v for k, v in values.items() if k in known})


def to_thrift(obj: fields.HiveObject[T], snapshot: T) -> Any:
    """``snapshot`` as the generated class of ``obj`` (``fields.TABLE``, ``fields.DATABASE``, ...).

    Raises ``ValueError`` naming what Hive cannot take (e.g. a function resource type it does not know)."""
    return fields.dump(obj, snapshot, _make)


def from_thrift(obj: fields.HiveObject[T], thrift: Any) -> T:
    """The snapshot of a metastore answer of ``obj``'s class (``None``: every field missing)."""
    return fields.load(obj, thrift, _get, strict=False)


def to_partition(p: ev.PartitionSnapshot, db: str, table: str) -> tt.Partition:
    """The partition as a Thrift object of the table ``db.table`` (its own names are not used)."""
    return to_thrift(fields.PARTITION, dataclasses.replace(p, db=db, table=table))


def to_foreign_key(c: ev.Constraint) -> tt.SQLForeignKey:
    if not (c.ref_db and c.ref_table and c.ref_column):
        raise ValueError(f"foreign key {c.name} on {c.db}.{c.table} names no referenced column")
    return to_thrift(fields.SQL_FOREIGN_KEY, c)


# --- column statistics ----------------------------------------------------------------------


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)


def _float(text: str | None) -> float | None:
    return None if text is None else float(text)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def to_thrift_decimal(text: str | None) -> tt.Decimal | None:
    if text is None:
        return None
    sign, digits, exponent = Decimal(text).as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"decimal statistic {text!r} is not finite")
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -exponent
    if scale < 0:  # Hive's Decimal has a non-negative scale
        unscaled, scale = unscaled * 10**-scale, 0
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return tt.Decimal(unscaled=unscaled.to_bytes(length, "big", signed=True), scale=scale)


def from_thrift_decimal(d: tt.Decimal | None) -> str | None:
    if d is None:
        return None
    unscaled = int.from_bytes(d.unscaled, "big", signed=True)
    return str(Decimal(unscaled).scaleb(-d.scale))


def to_thrift_date(text: str | None) -> tt.Date | None:
    if text is None:
        return None
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return tt.Date(daysSinceEpoch=int(stripped))
    return tt.Date(daysSinceEpoch=(dt.date.fromisoformat(stripped) - _EPOCH).days)


def from_thrift_date(d: tt.Date | None) -> str | None:
    return None if d is None else str(d.daysSinceEpoch)


# One field of a Thrift statistics struct: its name, ours, and the conversions to and from Thrift.
_StatField = tuple[str, str, Callable[[Any], Any], Callable[[Any], Any]]


def _same(value: Any) -> Any:
    return value


def _or_zero(value: Any) -> Any:
    return value or 0


def _or_zero_float(value: Any) -> Any:
    return value or 0.0


def _bounds(to: Callable[[Any], Any], back: Callable[[Any], Any]) -> tuple[_StatField, ...]:
    return ("lowValue", "low_value", to, back), ("highValue", "high_value", to, back)


_NULLS: _StatField = ("numNulls", "num_nulls", _or_zero, _same)
_DISTINCT: _StatField = ("numDVs", "num_distinct", _or_zero, _same)
_BITS: _StatField = ("bitVectors", "bit_vectors", _same, _same)
_LENGTHS: tuple[_StatField, ...] = (
    ("maxColLen", "max_length", _or_zero, _same), ("avgColLen", "avg_length", _or_zero_float, _same)
)
_TRUES_FALSES: tuple[_StatField, ...] = (
    ("numTrues", "num_trues", _or_zero, _same), ("numFalses", "num_falses", _or_zero, _same)
)

# kind -> the ColumnStatisticsData union member, its Thrift struct and fields (checked in this order)
_STAT_KINDS: dict[str, tuple[str, type, tuple[_StatField, ...]]] = {
    "BOOLEAN": ("booleanStats", tt.BooleanColumnStatsData, (*_TRUES_FALSES, _NULLS, _BITS)),
    "LONG": ("longStats", tt.LongColumnStatsData, (*_bounds(_int, _text), _NULLS, _DISTINCT, _BITS)),
    "DOUBLE": ("doubleStats", tt.DoubleColumnStatsData, (*_bounds(_float, _text), _NULLS, _DISTINCT, _BITS)),
    "STRING": ("stringStats", tt.StringColumnStatsData, (*_LENGTHS, _NULLS, _DISTINCT, _BITS)),
    "BINARY": ("binaryStats", tt.BinaryColumnStatsData, (*_LENGTHS, _NULLS, _BITS)),
    "DECIMAL": (
        "decimalStats",
        tt.DecimalColumnStatsData,
        (*_bounds(to_thrift_decimal, from_thrift_decimal), _NULLS, _DISTINCT, _BITS),
    ),
    "DATE": (
        "dateStats",
        tt.DateColumnStatsData,
        (*_bounds(to_thrift_date, from_thrift_date), _NULLS, _DISTINCT, _BITS),
    ),
}


def to_stats_data(s: ev.ColumnStatistic) -> tt.ColumnStatisticsData:
    """One column's statistics in the Thrift union member matching ``s.kind``."""
    kind = _STAT_KINDS.get(s.kind.upper())
    if kind is None:
        raise UnsupportedStatisticError(
            f"column {s.column}: statistics of kind {s.kind} are not supported by this metastore (Hive 2.3)"
        )
    member, struct, stat_fields = kind
    data = struct(**{theirs: to(getattr(s, ours)) for theirs, ours, to, _ in stat_fields})
    return tt.ColumnStatisticsData(**{member: data})


def to_stats_obj(s: ev.ColumnStatistic) -> tt.ColumnStatisticsObj:
    return tt.ColumnStatisticsObj(colName=s.column, colType=s.type, statsData=to_stats_data(s))


def from_stats_obj(o: tt.ColumnStatisticsObj) -> ev.ColumnStatistic:
    for kind, (member, _, stat_fields) in _STAT_KINDS.items():
        data = getattr(o.statsData, member)
        if data is not None:
            values = {ours: back(getattr(data, theirs)) for theirs, ours, _, back in stat_fields}
            return ev.ColumnStatistic(column=o.colName, type=o.colType, kind=kind, **values)
    raise UnsupportedStatisticError(f"column {o.colName}: statistics of an unknown kind")


def to_column_statistics(
    db: str, table: str, part_name: str | None, stats: Iterable[ev.ColumnStatistic]
) -> tt.ColumnStatistics:
    desc = tt.ColumnStatisticsDesc(
        isTblLevel=part_name is None, dbName=db, tableName=table, partName=part_name
    )
    return tt.ColumnStatistics(statsDesc=desc, statsObj=[to_stats_obj(s) for s in stats])
