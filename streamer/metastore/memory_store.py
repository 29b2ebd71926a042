"""The state of ``MemoryCatalog``: plain dicts of snapshots keyed by lower-case names, and a dump.

The operations on it live in ``memory_tables`` and ``memory_parts``; ``memory_catalog`` joins them.
"""

from __future__ import annotations

from collections import defaultdict

from streamer.errors import ApplyError
from streamer.events.model import (
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FunctionSnapshot,
    PartitionSnapshot,
    TableSnapshot,
)

TableKey = tuple[str, str]
StatsKey = tuple[str, str, tuple[str, ...] | None]


class MemoryCatalogError(ApplyError):
    """A call the metastore would refuse (object exists, object missing, database not empty)."""


class MemoryStore:
    """Every object of an in-memory catalog, and the names of the calls made to it."""

    def __init__(self) -> None:
        self.databases: dict[str, DatabaseSnapshot] = {}
        self.tables: dict[TableKey, TableSnapshot] = {}
        self.partitions: dict[TableKey, dict[tuple[str, ...], PartitionSnapshot]] = defaultdict(dict)
        self.functions: dict[TableKey, FunctionSnapshot] = {}
        self.constraints: dict[TableKey, list[Constraint]] = defaultdict(list)
        self.statistics: dict[StatsKey, dict[str, ColumnStatistic]] = defaultdict(dict)
        self.calls: list[str] = []  # operation names, for tests that count catalog round trips

    def _table(self, db: str, table: str) -> TableKey:
        key = (db.lower(), table.lower())
        if key not in self.tables:
            raise MemoryCatalogError("no such table", obj=f"{db}.{table}")
        return key

    def close(self) -> None:
        pass

    # --- for tests ------------------------------------------------------------------------
    def dump(self) -> dict[str, object]:
        """Everything, in a form tests compare with ``==``."""
        return {
            "databases": dict(self.databases),
            "tables": dict(self.tables),
            "partitions": {k: dict(v) for k, v in self.partitions.items() if v},
            "functions": dict(self.functions),
            "constraints": {k: sorted(v, key=repr) for k, v in self.constraints.items() if v},
            "statistics": {k: dict(v) for k, v in self.statistics.items() if v},
        }
