"""Reads of the warehouse's committed catalog and data, for verification and operators."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import streamer.warehouse.acid as acid
import streamer.warehouse.catalog as catalog
import streamer.warehouse.objects as objects
import streamer.warehouse.txns as txns
from streamer.events.model import DatabaseSnapshot, FileRef, PartitionSnapshot, TableSnapshot
from streamer.warehouse.core import WarehouseCore
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.files import data_files, read_parquet
from streamer.warehouse.layout import acid_files, dir_of
from streamer.warehouse.rows import typed, typed_spec


class CatalogReads(WarehouseCore):
    """Databases, tables, partitions, functions, and the files and rows a reader sees."""

    def databases(self) -> list[str]:
        return catalog.database_names(self._query)

    def database(self, name: str) -> DatabaseSnapshot:
        return catalog.get_database(self._query, name.lower())

    def tables(self, db: str) -> list[str]:
        catalog.get_database(self._query, db.lower())
        return catalog.table_names(self._query, db.lower())

    def table(self, db: str, name: str) -> TableSnapshot:
        return catalog.get_table(self._query, db.lower(), name.lower())

    def table_snapshots(self, db: str) -> list[TableSnapshot]:
        """Every table of ``db``, ordered by name, in one read."""
        catalog.get_database(self._query, db.lower())
        return catalog.list_tables(self._query, db.lower())

    def partition_snapshots(self, db: str, table: str) -> list[PartitionSnapshot]:
        return catalog.list_partitions(self._query, db.lower(), table.lower())

    def partitions(self, db: str, table: str) -> list[dict[str, str]]:
        """The table's partitions as ``{key: value}`` specs, ordered by partition name."""
        tbl = self.table(db, table)
        keys = [k.name for k in tbl.partition_keys]
        return [dict(zip(keys, p.values, strict=True)) for p in self.partition_snapshots(db, table)]

    def functions(self, db: str) -> list[str]:
        return catalog.function_names(self._query, db.lower())

    def files(self, db: str, table: str) -> list[FileRef]:
        """Every current data file of the table (all partitions) with checksum and size.

        For a transactional table: the files a reader reads, i.e. of committed write ids only
        (with their ACID directory as ``subdir``); aborted deltas stay on disk but are not listed.
        """
        tbl = self.table(db, table)
        if acid.table_kind(tbl) is not None:
            committed = set(self.acid_committed_write_ids(db, table))
            return [
                dataclasses.replace(self.cm.file_ref(f, name), subdir=subdir)
                for name, directory in self._data_dirs(tbl)
                for subdir, f in acid_files(directory, committed)
            ]
        if not tbl.partition_keys:
            return [self.cm.file_ref(p) for p in data_files(dir_of(tbl.sd.location))]
        return [
            self.cm.file_ref(f, objects.partition_name(tbl.partition_keys, p.values))
            for p in self.partition_snapshots(db, table)
            for f in data_files(dir_of(p.sd.location))
        ]

    def rows(self, db: str, table: str) -> list[dict[str, object]]:
        """All current rows, read from the Parquet files; partition keys appended, typed by key type."""
        tbl = self.table(db, table)
        if tbl.table_type == objects.VIEW:
            raise WarehouseError(f"{tbl.qualified_name} is a view: it has no rows of its own")
        if acid.table_kind(tbl) is not None:
            committed = set(self.acid_committed_write_ids(db, table))
            acid_rows: list[dict[str, object]] = []
            for name, directory in self._data_dirs(tbl):
                extra = typed_spec(tbl, name)
                files = [f for _, f in acid_files(directory, committed)]
                acid_rows += [{**row, **extra} for row in read_parquet(files)]
            return acid_rows
        if not tbl.partition_keys:
            return read_parquet(data_files(dir_of(tbl.sd.location)))
        out: list[dict[str, object]] = []
        for part in self.partition_snapshots(db, table):
            extra = {k.name: typed(k.type, v) for k, v in zip(tbl.partition_keys, part.values, strict=True)}
            out += [{**row, **extra} for row in read_parquet(data_files(dir_of(part.sd.location)))]
        return out

    def _data_dirs(self, tbl: TableSnapshot) -> list[tuple[str | None, Path]]:
        """(partition name or None, directory) of each place the table keeps data."""
        if not tbl.partition_keys:
            return [(None, dir_of(tbl.sd.location))]
        return [
            (objects.partition_name(tbl.partition_keys, p.values), dir_of(p.sd.location))
            for p in self.partition_snapshots(tbl.db, tbl.name)
        ]

    def acid_committed_write_ids(self, db: str, table: str) -> list[int]:
        """The transactional table's write ids whose transactions committed (a valid write-id list)."""
        return txns.write_ids(self._query, db.lower(), table.lower(), txns.COMMITTED)
