"""Rows and partitions: grouping rows by their partition keys, typing partition values back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamer.warehouse.objects as objects
from streamer.events.model import TableSnapshot
from streamer.hive.files import parse_partition_name
from streamer.warehouse.errors import WarehouseError

Row = Mapping[str, object]


def group_rows(
    tbl: TableSnapshot, rows: Sequence[Row], partition: Mapping[str, object] | None
) -> list[tuple[list[str], Sequence[Row]]]:
    """(partition values, rows) per target: [] values for an unpartitioned table; rows grouped by
    their partition keys (which are removed) when a partitioned table gets no ``partition``."""
    if not tbl.partition_keys:
        if partition:
            raise WarehouseError(f"table {tbl.qualified_name} is not partitioned")
        return [([], rows)]
    if partition is not None:
        return [(objects.partition_values(tbl.partition_keys, partition), rows)]
    keys = [k.name for k in tbl.partition_keys]
    groups: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        if any(k not in row for k in keys):
            raise WarehouseError(f"row {dict(row)} lacks partition keys {keys} of {tbl.qualified_name}")
        groups.setdefault(tuple(str(row[k]) for k in keys), []).append(
            {c: v for c, v in row.items() if c not in keys}
        )
    return [(list(values), group) for values, group in sorted(groups.items())]


def typed_spec(tbl: TableSnapshot, name: str | None) -> dict[str, object]:
    """The partition keys of partition ``name`` (None: none) with values typed by key type."""
    if name is None:
        return {}
    spec = parse_partition_name(name)
    return {k.name: typed(k.type, spec[k.name.lower()]) for k in tbl.partition_keys}


def typed(hive_type: str, value: str) -> object:
    t = hive_type.lower()
    if t in ("tinyint", "smallint", "int", "bigint"):
        return int(value)
    if t in ("float", "double"):
        return float(value)
    if t == "boolean":
        return value.lower() == "true"
    return value
