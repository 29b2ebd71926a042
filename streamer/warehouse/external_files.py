"""Changing an external table's files behind the metastore's back, as other tools do in real life.

Hive writes no event when a Spark job or ``hdfs dfs -put`` adds, replaces or deletes files under an
external table: that is why replicas sync external data by listing directories. These helpers let
tests and the workload make exactly such changes; they write nothing to ``NOTIFICATION_LOG``.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import streamer.warehouse.catalog as catalog
import streamer.warehouse.objects as objects
from streamer.events.model import TableSnapshot
from streamer.warehouse.core import WarehouseCore
from streamer.warehouse.errors import NoSuchObjectError, WarehouseError
from streamer.warehouse.files import path_of, write_parquet


class ExternalFileOps(WarehouseCore):
    """Event-less file changes of external tables."""

    def external_dir(self, db: str, table: str, partition: Mapping[str, object] | None = None) -> Path:
        """The directory holding the external table's (or one partition's) files."""
        tbl = catalog.get_table(self._query, db.lower(), table.lower())
        if tbl.table_type != objects.EXTERNAL:
            raise WarehouseError(f"{tbl.qualified_name} is not an external table")
        if bool(tbl.partition_keys) != (partition is not None):
            need = "a partition" if tbl.partition_keys else "no partition"
            raise WarehouseError(f"files of {tbl.qualified_name} need {need}")
        location = _location(tbl, partition, self._query)
        return path_of(location)

    def write_external_file(
        self,
        db: str,
        table: str,
        rows: Sequence[Mapping[str, object]],
        partition: Mapping[str, object] | None = None,
        name: str | None = None,
    ) -> Path:
        """Write (or atomically replace) one Parquet file of an external table; no event is written."""
        directory = self.external_dir(db, table, partition)
        tbl = catalog.get_table(self._query, db.lower(), table.lower())
        name = name or f"ext_{secrets.token_hex(6)}.parquet"
        if "/" in name or name.startswith((".", "_")):
            raise WarehouseError(f"file name {name!r} must be a visible name without '/'")
        staging = directory / f".ext-{secrets.token_hex(6)}"
        try:
            (written,) = write_parquet(staging, tbl.sd.columns, rows, 1, file_name=lambda _: name)
            final = directory / name
            os.replace(written, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return final

    def delete_external_file(
        self, db: str, table: str, name: str, partition: Mapping[str, object] | None = None
    ) -> None:
        """Delete one file of an external table; no event is written."""
        path = self.external_dir(db, table, partition) / name
        if not path.is_file():
            raise NoSuchObjectError("file", str(path))
        path.unlink()


def _location(tbl: TableSnapshot, partition: Mapping[str, object] | None, ex: catalog.Exec) -> str:
    if partition is None:
        if not tbl.sd.location:
            raise WarehouseError(f"{tbl.qualified_name} has no location")
        return tbl.sd.location
    values = objects.partition_values(tbl.partition_keys, partition)
    part = catalog.find_partition(ex, tbl, values)
    if part is None or not part.sd.location:
        raise NoSuchObjectError(
            "partition", f"{tbl.qualified_name}/{objects.partition_name(tbl.partition_keys, values)}"
        )
    return part.sd.location
