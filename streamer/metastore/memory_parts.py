"""``MemoryCatalog``'s partitions, functions, constraints and column statistics."""

from __future__ import annotations

from streamer.events.model import ColumnStatistic, Constraint, FunctionSnapshot, PartitionSnapshot
from streamer.metastore.memory_store import MemoryCatalogError, MemoryStore


class MemoryParts(MemoryStore):
    """The operations on objects that belong to a table or a database, besides tables themselves."""

    # --- partitions -----------------------------------------------------------------------
    def list_partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        return [p for _, p in sorted(self.partitions.get((db.lower(), table.lower()), {}).items())]

    def get_partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None:
        return self.partitions.get((db.lower(), table.lower()), {}).get(tuple(values))

    def add_partitions(self, db: str, table: str, partitions: list[PartitionSnapshot]) -> None:
        self.calls.append("add_partitions")
        key = self._table(db, table)
        existing = self.partitions[key]
        for p in partitions:
            if tuple(p.values) in existing:
                raise MemoryCatalogError("partition exists", obj=f"{db}.{table}{p.values}")
        for p in partitions:
            existing[tuple(p.values)] = p

    def alter_partitions(self, db: str, table: str, partitions: list[PartitionSnapshot]) -> None:
        self.calls.append("alter_partitions")
        key = self._table(db, table)
        existing = self.partitions[key]
        for p in partitions:
            if tuple(p.values) not in existing:
                raise MemoryCatalogError("no such partition", obj=f"{db}.{table}{p.values}")
        for p in partitions:
            existing[tuple(p.values)] = p

    def drop_partitions(
        self, db: str, table: str, values: list[list[str]], keys: list[str] | None = None
    ) -> None:
        self.calls.append("drop_partitions")
        existing = self.partitions.get((db.lower(), table.lower()), {})
        for v in values:
            existing.pop(tuple(v), None)
            self.statistics.pop((db.lower(), table.lower(), tuple(v)), None)

    # --- functions ------------------------------------------------------------------------
    def get_function(self, db: str, name: str) -> FunctionSnapshot | None:
        return self.functions.get((db.lower(), name.lower()))

    def create_function(self, function: FunctionSnapshot) -> None:
        self.calls.append("create_function")
        key = (function.db.lower(), function.name.lower())
        if key in self.functions:
            raise MemoryCatalogError("function exists", obj=f"{function.db}.{function.name}")
        self.functions[key] = function

    def drop_function(self, db: str, name: str) -> None:
        self.calls.append("drop_function")
        self.functions.pop((db.lower(), name.lower()), None)

    # --- constraints and statistics -------------------------------------------------------
    def add_constraints(self, constraints: list[Constraint]) -> None:
        self.calls.append("add_constraints")
        for c in constraints:
            key = self._table(c.db, c.table)
            if any(x.name == c.name and x.column == c.column for x in self.constraints[key]):
                raise MemoryCatalogError("constraint exists", obj=f"{c.db}.{c.table}.{c.name}")
        for c in constraints:
            self.constraints[(c.db.lower(), c.table.lower())].append(c)

    def drop_constraint(self, db: str, table: str, name: str) -> None:
        self.calls.append("drop_constraint")
        key = (db.lower(), table.lower())
        self.constraints[key] = [c for c in self.constraints.get(key, []) if c.name != name]

    def update_column_statistics(
        self, db: str, table: str, partition_values: list[str] | None, stats: list[ColumnStatistic]
    ) -> None:
        self.calls.append("update_column_statistics")
        self._table(db, table)
        key = (db.lower(), table.lower(), tuple(partition_values) if partition_values else None)
        for s in stats:
            self.statistics[key][s.column] = s

    def delete_column_statistics(
        self, db: str, table: str, partition_values: list[str] | None, column: str | None
    ) -> None:
        self.calls.append("delete_column_statistics")
        key = (db.lower(), table.lower(), tuple(partition_values) if partition_values else None)
        if column is None:
            self.statistics.pop(key, None)
        elif key in self.statistics:
            self.statistics[key].pop(column, None)
            if not self.statistics[key]:
                del self.statistics[key]
