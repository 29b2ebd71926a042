"""``MemoryCatalog``'s databases and tables, with the metastore's refusals and renames."""

from __future__ import annotations

import dataclasses

from streamer.events.model import DatabaseSnapshot, TableSnapshot
from streamer.metastore.memory_store import MemoryCatalogError, MemoryStore


class MemoryTables(MemoryStore):
    """Database and table operations; a rename moves the table's partitions, statistics and constraints."""

    # --- databases ------------------------------------------------------------------------
    def list_databases(self) -> list[str]:
        return sorted(self.databases)

    def get_database(self, name: str) -> DatabaseSnapshot | None:
        return self.databases.get(name.lower())

    def create_database(self, db: DatabaseSnapshot) -> None:
        self.calls.append("create_database")
        if db.name.lower() in self.databases:
            raise MemoryCatalogError("database exists", obj=db.name)
        self.databases[db.name.lower()] = db

    def alter_database(self, name: str, db: DatabaseSnapshot, *, exists: bool = False) -> None:
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

    def get_table(self, db: str, name: str) -> TableSnapshot | None:
        return self.tables.get((db.lower(), name.lower()))

    def get_tables(self, db: str, names: list[str]) -> list[TableSnapshot]:
        self.calls.append("get_tables")
        found = (self.get_table(db, n) for n in dict.fromkeys(x.lower() for x in names))
        return [t for t in found if t is not None]

    def create_table(self, table: TableSnapshot) -> None:
        self.calls.append("create_table")
        key = (table.db.lower(), table.name.lower())
        if key[0] not in self.databases:
            raise MemoryCatalogError("no such database", obj=table.db)
        if key in self.tables:
            raise MemoryCatalogError("table exists", obj=table.qualified_name)
        self.tables[key] = table

    def alter_table(self, db: str, name: str, table: TableSnapshot) -> None:
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
