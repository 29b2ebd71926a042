"""Metastore Thrift objects (as TJSON text) <-> the snapshots of :mod:`streamer.events.model`.

Readers accept what any Hive version writes (missing optional fields become defaults); writers
produce what a Hive 4 metastore writes for the same object, so both directions round-trip. The
objects' fields are mapped by the table in :mod:`streamer.hive.fields` (which the Thrift API's
conversion shares), column statistics included.
"""

from __future__ import annotations

from typing import Any, TypeVar

from streamer.events import model as ev
from streamer.hive import fields, tjson

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


# --- column statistics ------------------------------------------------------------------------


def column_stats_from_tjson(text: str) -> tuple[dict[str, Any], list[ev.ColumnStatistic]]:
    """The ColumnStatisticsDesc (as a dict keyed by Thrift name) and one ``ColumnStatistic`` per column."""
    d = tjson.loads(fields.COLUMN_STATISTICS.struct, text)
    stats = [fields.load(fields.COLUMN_STATISTICS_OBJ, o) for o in d.get("statsObj") or []]
    return d.get("statsDesc") or {}, stats


def column_stats_to_tjson(desc: dict[str, Any], stats: list[ev.ColumnStatistic]) -> str:
    """``desc`` (keyed by Thrift name) and ``stats`` as the TJSON of a ColumnStatistics struct."""
    return to_tjson(fields.COLUMN_STATISTICS, {"statsDesc": desc, "statsObj": stats})
