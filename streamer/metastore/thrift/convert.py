"""Conversion between streamer's snapshots and the Hive 2.3 metastore's Thrift objects.

Pure code, no I/O, so every field's mapping can be checked without a server. Databases, tables,
partitions, functions and keys follow the field table of ``streamer.hive.fields`` (shared with the
TJSON of Hive's messages): fields Hive 2.3's generated classes lack are not sent and come back as
``None``. Column statistics too (bounds stay text); where Hive 2.3 takes another form (a decimal's
scale), the table says so (``Field.thrift_write``). See docs/design/metastore.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, TypeVar

from hmsclient.genthrift.hive_metastore import ttypes as tt

from streamer.errors import StreamerError
from streamer.events import model as ev
from streamer.hive import fields
from streamer.hive.tjson import TJSONError

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


# --- column statistics: the union of fields.COLUMN_STATISTICS_DATA --------------------------


def to_thrift_decimal(text: str | None) -> tt.Decimal | None:
    return None if text is None else to_thrift(fields.DECIMAL, fields.decimal_value_hive23(text))


def from_thrift_decimal(d: tt.Decimal | None) -> str | None:
    return None if d is None else fields.decimal_text(from_thrift(fields.DECIMAL, d))


def to_thrift_date(text: str | None) -> tt.Date | None:
    return None if text is None else to_thrift(fields.DATE, fields.days_value(text))


def from_thrift_date(d: tt.Date | None) -> str | None:
    return None if d is None else fields.count_text(from_thrift(fields.DATE, d))


def _supported(s: ev.ColumnStatistic) -> ev.ColumnStatistic:
    member = fields.union_member(fields.COLUMN_STATISTICS_DATA, s.kind)
    if member is None or member.of is None or not hasattr(tt, member.of.name):  # TIMESTAMP: Hive 3 on
        raise UnsupportedStatisticError(
            f"column {s.column}: statistics of kind {s.kind} are not supported by this metastore (Hive 2.3)"
        )
    return s


def to_stats_obj(s: ev.ColumnStatistic) -> tt.ColumnStatisticsObj:
    """One column's statistics, in the union member matching ``s.kind``."""
    return to_thrift(fields.COLUMN_STATISTICS_OBJ, _supported(s))


def from_stats_obj(o: tt.ColumnStatisticsObj) -> ev.ColumnStatistic:
    try:
        return from_thrift(fields.COLUMN_STATISTICS_OBJ, o)
    except TJSONError as exc:  # no union member set
        raise UnsupportedStatisticError(f"column {o.colName}: statistics of an unknown kind") from exc


def to_column_statistics(
    db: str, table: str, part_name: str | None, stats: Iterable[ev.ColumnStatistic]
) -> tt.ColumnStatistics:
    desc = {"isTblLevel": part_name is None, "dbName": db, "tableName": table, "partName": part_name}
    objs = [_supported(s) for s in stats]
    return to_thrift(fields.COLUMN_STATISTICS, {"statsDesc": desc, "statsObj": objs})
