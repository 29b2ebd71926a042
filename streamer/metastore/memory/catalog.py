"""An in-memory ``Catalog`` for tests of the applier, with the metastore's semantics that matter.

Like ``HmsCatalog``: reads of missing objects return ``None``, drops of missing objects do nothing,
creating an existing object raises, altering a missing one raises, and ``alter_table`` with another
db/name renames the table together with its partitions, statistics and constraints. Unlike the
metastore it never touches files and adds no parameters of its own, so tests can compare exactly.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from streamer.errors import ApplyError
from streamer.events import model as ev

TableKey = tuple[str, str]
StatsKey = tuple[str, str, tuple[str, ...] | None]


class MemoryCatalogError(ApplyError):
    """A call the metastore would refuse (object exists, object missing, database not empty)."""


class MemoryCatalog:
    """``Catalog`` in dicts of snapshots keyed by lower-case names (``databases``, ``tables``, ...);
    ``calls`` names every change made, ``dump`` gives everything for tests to compare."""

    def __init__(self) -> None:
        self.databases: dict[str, ev.DatabaseSnapshot] = {}
        self.tables: dict[TableKey, ev.TableSnapshot] = {}
        self.partitions: dict[TableKey, dict[tuple[str, ...], ev.PartitionSnapshot]] = defaultdict(dict)
        self.functions: dict[TableKey, ev.FunctionSnapshot] = {}
        self.constraints: dict[TableKey, list[ev.Constraint]] = defaultdict(list)
        self.statistics: dict[StatsKey, dict[str, ev.ColumnStatistic]] = defaultdict(dict)
        self.calls: list[str] = []  # operation names, for tests that count catalog round trips

    def _table(self, db: str, table: str) -> TableKey:
        key = (db.lower(), table.lower())
        if key not in self.tables:
            raise MemoryCatalogError("no such table", obj=f"{db}.{table}")
        return key

    # --- databases ------------------------------------------------------------------------
    def list_databases(self) -> list[str]:
        return sorted(self.databases)

    def get_database(self, name: str) -> ev.DatabaseSnapshot | None:
        return self.databases.get(name.lower())

    def create_database(self, db: ev.DatabaseSnapshot) -> None:
        self.calls.append("create_database")
        if db.name.lower() in self.databases:
            raise MemoryCatalogError("database exists", obj=db.name)
        self.databases[db.name.lower()] = db

    def alter_database(self, name: str, db: ev.DatabaseSnapshot, *, exists: bool = False) -> None:
        self.calls.append("alter_database")
        if name.lower() not in self.databases:
            raise MemoryCatalogError("no such database", obj=name)
        self.databases[name.lower()] = dataclasses.replace(db, name=name.lower())

    def drop_database(self, name: str) -> None:
        self.calls.append("drop_database")
        if self.list_tables(name) or any(k[0] == name.lower() for k in self.functions):
            raise MemoryCatalogError("database is not empty", obj=name)
        self.databases.pop(name.lower(), None)

    # --- tables ---------------------------------------------------------------------------
    def list_tables(self, db: str) -> list[str]:
        return sorted(t for d, t in self.tables if d == db.lower())

    def get_table(self, db: str, name: str) -> ev.TableSnapshot | None:
        return self.tables.get((db.lower(), name.lower()))

    def get_tables(self, db: str, names: list[str]) -> list[ev.TableSnapshot]:
        self.calls.append("get_tables")
        found = (self.get_table(db, n) for n in dict.fromkeys(x.lower() for x in names))
        return [t for t in found if t is not None]

    def create_table(self, table: ev.TableSnapshot) -> None:
        self.calls.append("create_table")
        key = (table.db.lower(), table.name.lower())
        if key[0] not in self.databases:
            raise MemoryCatalogError("no such database", obj=table.db)
        if key in self.tables:
            raise MemoryCatalogError("table exists", obj=table.qualified_name)
        self.tables[key] = table

    def alter_table(self, db: str, name: str, table: ev.TableSnapshot) -> None:
        self.calls.append("alter_table")
        old = (db.lower(), name.lower())
        new = (table.db.lower(), table.name.lower())
        if old not in self.tables:
            raise MemoryCatalogError("no such table", obj=f"{db}.{name}")
        if old != new:
            if new in self.tables:
                raise MemoryCatalogError("rename target exists", obj=table.qualified_name)
            if new[0] not in self.databases:
                raise MemoryCatalogError("no such database", obj=table.db)
            del self.tables[old]
            parts = self.partitions.pop(old, {})
            self.partitions[new] = {
                v: dataclasses.replace(p, db=table.db, table=table.name) for v, p in parts.items()
            }
            self.constraints[new] = [
                dataclasses.replace(c, db=table.db, table=table.name) for c in self.constraints.pop(old, [])
            ]
            for key in [k for k in self.statistics if k[:2] == old]:
                self.statistics[(new[0], new[1], key[2])] = self.statistics.pop(key)
        self.tables[new] = table

    def drop_table(self, db: str, name: str) -> None:
        self.calls.append("drop_table")
        key = (db.lower(), name.lower())
        self.tables.pop(key, None)
        self.partitions.pop(key, None)
        self.constraints.pop(key, None)
        for k in [k for k in self.statistics if k[:2] == key]:
            del self.statistics[k]

    # --- partitions -----------------------------------------------------------------------
    def list_partitions(self, db: str, table: str) -> list[ev.PartitionSnapshot]:
        return [p for _, p in sorted(self.partitions.get((db.lower(), table.lower()), {}).items())]

    def get_partition(self, db: str, table: str, values: list[str]) -> ev.PartitionSnapshot | None:
        return self.partitions.get((db.lower(), table.lower()), {}).get(tuple(values))

    def add_partitions(self, db: str, table: str, partitions: list[ev.PartitionSnapshot]) -> None:
        self.calls.append("add_partitions")
        key = self._table(db, table)
        existing = self.partitions[key]
        for p in partitions:
            if tuple(p.values) in existing:
                raise MemoryCatalogError("partition exists", obj=f"{db}.{table}{p.values}")
        for p in partitions:
            existing[tuple(p.values)] = p

    def alter_partitions(self, db: str, table: str, partitions: list[ev.PartitionSnapshot]) -> None:
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
    def get_function(self, db: str, name: str) -> ev.FunctionSnapshot | None:
        return self.functions.get((db.lower(), name.lower()))

    def create_function(self, function: ev.FunctionSnapshot) -> None:
        self.calls.append("create_function")
        key = (function.db.lower(), function.name.lower())
        if key in self.functions:
            raise MemoryCatalogError("function exists", obj=f"{function.db}.{function.name}")
        self.functions[key] = function

    def drop_function(self, db: str, name: str) -> None:
        self.calls.append("drop_function")
        self.functions.pop((db.lower(), name.lower()), None)

    # --- constraints and statistics -------------------------------------------------------
    def add_constraints(self, constraints: list[ev.Constraint]) -> None:
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
        self, db: str, table: str, partition_values: list[str] | None, stats: list[ev.ColumnStatistic]
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
