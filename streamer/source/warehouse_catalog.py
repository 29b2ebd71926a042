"""``SourceCatalog`` over the bundled warehouse: the reads a bootstrap dump makes of it.

A Hive source would implement the same protocol over the metastore's Thrift API plus its
filesystem's checksums; the bundled warehouse answers from its own metadata tables and files.
"""

from __future__ import annotations

from streamer.events.model import (
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    TableSnapshot,
)
from streamer.source.bootstrap import Vanished
from streamer.warehouse import Warehouse
from streamer.warehouse import catalog as wh_catalog
from streamer.warehouse.errors import NoSuchObjectError
from streamer.warehouse.snapshots import from_json
from streamer.warehouse.tablemeta import TABLE_LEVEL


class WarehouseCatalog:
    """Reads of a ``Warehouse``; objects that vanish mid-read raise ``Vanished``."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.wh = warehouse

    def current_event_id(self) -> int:
        return self.wh.current_event_id()

    def databases(self) -> list[str]:
        return self.wh.databases()

    def database(self, name: str) -> DatabaseSnapshot:
        try:
            return self.wh.database(name)
        except NoSuchObjectError as exc:
            raise Vanished(str(exc)) from exc

    def tables(self, db: str) -> list[str]:
        try:
            return self.wh.tables(db)
        except NoSuchObjectError as exc:
            raise Vanished(str(exc)) from exc

    def table(self, db: str, name: str) -> TableSnapshot:
        try:
            return self.wh.table(db, name)
        except NoSuchObjectError as exc:
            raise Vanished(str(exc)) from exc

    def partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        return self.wh.partition_snapshots(db, table)

    def files(self, db: str, table: str) -> list[FileRef]:
        try:
            return self.wh.files(db, table)
        except (NoSuchObjectError, FileNotFoundError) as exc:  # dropped, or a file retired meanwhile
            raise Vanished(str(exc)) from exc

    def write_ids(self, db: str, table: str) -> list[int]:
        return self.wh.acid_committed_write_ids(db, table)

    def functions(self, db: str) -> list[str]:
        return self.wh.functions(db)

    def function(self, db: str, name: str) -> FunctionSnapshot:
        fn = wh_catalog.find_function(self.wh.store.query, db.lower(), name.lower())
        if fn is None:
            raise Vanished(f"function {db}.{name}")
        return fn

    def constraints(self, db: str, table: str) -> list[Constraint]:
        try:
            return self.wh.constraints(db, table)
        except NoSuchObjectError as exc:
            raise Vanished(str(exc)) from exc

    def statistics(self, db: str, table: str) -> list[ColumnStatistic]:
        try:
            return self.wh.column_statistics(db, table)
        except NoSuchObjectError as exc:
            raise Vanished(str(exc)) from exc

    def partition_statistics(self, db: str, table: str, partition_names: list[str]
                             ) -> dict[str, list[ColumnStatistic]]:
        """Column statistics of the named partitions, in one read of the warehouse's statistics table
        (rows are keyed by Hive partition name, as Hive's PART_COL_STATS are)."""
        wanted = set(partition_names)
        rows = self.wh.store.query(
            'SELECT "PART_NAME", "SNAPSHOT" FROM "WH_COLUMN_STATS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ?'
            ' AND "PART_NAME" <> ? ORDER BY "PART_NAME", "COLUMN_NAME"',
            (db.lower(), table.lower(), TABLE_LEVEL),
        )
        out: dict[str, list[ColumnStatistic]] = {}
        for name, snapshot in rows:
            if name in wanted:
                out.setdefault(str(name), []).append(from_json(ColumnStatistic, snapshot))
        return out
