"""``HmsCatalog``'s databases and tables: reads, creates, alters (renames included) and drops.

Missing objects read as ``None`` and dropping a missing one does nothing; see
docs/design/metastore.md for what the metastore changes on its own.
"""

from __future__ import annotations

from streamer.events.model import DatabaseSnapshot, TableSnapshot
from streamer.metastore import convert
from streamer.metastore.thrift_calls import KEEP_STATS, CatalogError, ThriftConnection


class DatabaseTableCalls(ThriftConnection):
    """The database and table operations of ``Catalog`` over Thrift."""

    # --- databases ----------------------------------------------------------------------

    def list_databases(self) -> list[str]:
        return list(self._call("databases", lambda c: c.get_all_databases()))

    def get_database(self, name: str) -> DatabaseSnapshot | None:
        db = self._get(name, lambda c: c.get_database(name))
        return None if db is None else convert.from_database(db)

    def create_database(self, db: DatabaseSnapshot) -> None:
        self._call(db.name, lambda c: c.create_database(convert.to_database(db)))

    def alter_database(self, name: str, db: DatabaseSnapshot, *, exists: bool = False) -> None:
        if not exists and self.get_database(name) is None:  # Hive 2.3 silently ignores a missing one
            raise CatalogError("does not exist on the target", obj=name)
        self._must(name, lambda c: c.alter_database(name, convert.to_database(db)))

    def drop_database(self, name: str) -> None:
        """Drop with everything left in it (the source had emptied it); never deletes files."""
        if self.get_database(name) is None:  # Hive 2.3 answers a missing one with an NPE
            return
        self._drop(name, lambda c: c.drop_database(name, False, True))

    # --- tables -------------------------------------------------------------------------

    def list_tables(self, db: str) -> list[str]:
        if self.get_database(db) is None:
            return []
        return list(self._call(db, lambda c: c.get_all_tables(db)))

    def get_table(self, db: str, name: str) -> TableSnapshot | None:
        t = self._get(f"{db}.{name}", lambda c: c.get_table(db, name))
        return None if t is None else convert.from_table(t)

    def get_tables(self, db: str, names: list[str]) -> list[TableSnapshot]:
        """Those of ``names`` that exist, one round trip (Hive's ``get_table_objects_by_name``)."""
        if not names:
            return []
        try:
            found = self._get(db, lambda c: c.get_table_objects_by_name(db, names))
        except CatalogError:  # Hive 2.3 declares no exception for it: a missing database is "unknown result"
            if self.get_database(db) is None:
                return []
            raise
        return [convert.from_table(t) for t in found or []]

    def create_table(self, table: TableSnapshot) -> None:
        obj = table.qualified_name
        self._must(
            obj, lambda c: c.create_table_with_environment_context(convert.to_table(table), KEEP_STATS)
        )

    def alter_table(self, db: str, name: str, table: TableSnapshot) -> None:
        """Replace the table's definition; a different db/name in ``table`` renames it."""
        obj = f"{db}.{name}"
        if (db, name) != (table.db, table.name):
            obj += f" -> {table.qualified_name}"
        self._must(
            obj,
            lambda c: c.alter_table_with_environment_context(db, name, convert.to_table(table), KEEP_STATS),
        )

    def drop_table(self, db: str, name: str) -> None:
        """Drop the table's metadata; its files stay (they are the applier's business)."""
        self._drop(f"{db}.{name}", lambda c: c.drop_table(db, name, False))
