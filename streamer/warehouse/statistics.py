"""Pure computation of the statistics Hive keeps: basic table/partition statistics and column statistics.

Basic statistics (``numFiles``, ``numRows``, ``totalSize``) are what Hive writes into table or
partition parameters when ``hive.stats.autogather`` is on; column statistics are what
``ANALYZE TABLE ... COMPUTE STATISTICS FOR COLUMNS`` stores. Both are computed from the real data
(no sampling, exact distinct counts), so a target that replicates them can be compared exactly.
Bounds are text as :class:`ColumnStatistic` keeps them; only the fields of a column's kind are set,
as Hive's Thrift union carries only those.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence

from streamer.events.model import Column, ColumnStatistic
from streamer.warehouse.errors import WarehouseError

NUM_FILES = "numFiles"
NUM_ROWS = "numRows"
TOTAL_SIZE = "totalSize"
ACCURATE = "COLUMN_STATS_ACCURATE"  # Hive's StatsSetupConst.COLUMN_STATS_ACCURATE
BASIC_KEYS = (NUM_FILES, NUM_ROWS, TOTAL_SIZE)

_KINDS = {
    "tinyint": "LONG",
    "smallint": "LONG",
    "int": "LONG",
    "bigint": "LONG",
    "float": "DOUBLE",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "string": "STRING",
}


def kind_of(hive_type: str) -> str:
    """The ``ColumnStatistic.kind`` (Hive's ColumnStatisticsData member) of a column type."""
    try:
        return _KINDS[hive_type.lower()]
    except KeyError:
        raise WarehouseError(f"no column statistics for type {hive_type!r}") from None


def column_statistics(column: Column, values: Iterable[object]) -> ColumnStatistic:
    """Exact statistics of one column's values (``None`` is a null)."""
    kind = kind_of(column.type)
    all_values = list(values)
    present = [v for v in all_values if v is not None]
    nulls = len(all_values) - len(present)
    base = ColumnStatistic(column=column.name, type=column.type.lower(), kind=kind, num_nulls=nulls)
    if kind == "BOOLEAN":
        trues = sum(1 for v in present if v is True)
        return _with(base, num_trues=trues, num_falses=len(present) - trues)
    if kind == "STRING":
        lengths = [len(str(v).encode()) for v in present]
        avg = sum(lengths) / len(lengths) if lengths else 0.0
        return _with(base, num_distinct=len(set(present)), avg_length=avg, max_length=max(lengths, default=0))
    low, high = (min(present), max(present)) if present else (None, None)  # type: ignore[type-var]
    text = _long_text if kind == "LONG" else _double_text
    return _with(
        base,
        num_distinct=len(set(present)),
        low_value=None if low is None else text(low),
        high_value=None if high is None else text(high),
    )


def table_statistics(
    columns: Sequence[Column], rows: Sequence[Mapping[str, object]], names: Sequence[str] | None = None
) -> list[ColumnStatistic]:
    """Statistics of ``names`` (default: every column) over ``rows``, in the table's column order."""
    wanted = [c for c in columns if names is None or c.name in names]
    unknown = sorted(set(names or ()) - {c.name for c in columns})
    if unknown:
        raise WarehouseError(f"no such columns: {unknown}")
    return [column_statistics(c, [r.get(c.name) for r in rows]) for c in wanted]


def basic_statistics(file_sizes: Sequence[int], num_rows: int) -> dict[str, str]:
    """Hive's basic statistics parameters for a table or partition holding these files."""
    return {NUM_FILES: str(len(file_sizes)), NUM_ROWS: str(num_rows), TOTAL_SIZE: str(sum(file_sizes))}


def accurate(
    params: Mapping[str, str],
    *,
    basic: bool | None = None,
    columns: Iterable[str] = (),
    drop_columns: Iterable[str] | None = None,
) -> str:
    """The new ``COLUMN_STATS_ACCURATE`` value: basic stats flagged and column flags added or removed.

    ``drop_columns=None`` keeps the column flags; an empty iterable of ``drop_columns`` never
    matches, so pass the column names to remove (or every column to clear them all).
    """
    try:
        state = json.loads(params.get(ACCURATE) or "{}")
    except ValueError:
        state = {}
    if not isinstance(state, dict):
        state = {}
    if basic is not None:
        if basic:
            state["BASIC_STATS"] = "true"
        else:
            state.pop("BASIC_STATS", None)
    flags = dict(state.get("COLUMN_STATS") or {})
    flags.update(dict.fromkeys(columns, "true"))
    for name in drop_columns or ():
        flags.pop(name, None)
    if flags:
        state["COLUMN_STATS"] = dict(sorted(flags.items()))
    else:
        state.pop("COLUMN_STATS", None)
    return json.dumps(state, separators=(",", ":"))


def _with(base: ColumnStatistic, **changes: object) -> ColumnStatistic:
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _long_text(value: object) -> str:
    return str(int(value))  # type: ignore[call-overload]


def _double_text(value: object) -> str:
    return repr(float(value))  # type: ignore[arg-type]
