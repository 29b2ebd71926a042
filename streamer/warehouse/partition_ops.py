"""Partition DDL of the warehouse (add, drop) and the partition look-ups other changes share."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import streamer.warehouse.catalog as catalog
import streamer.warehouse.objects as objects
import streamer.warehouse.tablemeta as tablemeta
import streamer.warehouse.txns as txns
from streamer.events.model import (
    AddPartitionPayload,
    DropPartitionPayload,
    EventType,
    PartitionSnapshot,
    TableSnapshot,
)
from streamer.warehouse.change import Change
from streamer.warehouse.core import WarehouseCore
from streamer.warehouse.errors import NoSuchObjectError, WarehouseError
from streamer.warehouse.files import data_files, uri_of
from streamer.warehouse.layout import all_files, dir_of
from streamer.warehouse.statistics_ops import with_basic_statistics


class PartitionOps(WarehouseCore):
    """Adding and dropping partitions: one change and one event per call."""

    def add_partitions(
        self, db: str, table: str, specs: Sequence[Mapping[str, object]]
    ) -> list[PartitionSnapshot]:
        """Add partitions (one ADD_PARTITION event listing files already in their directories)."""
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            tbl = _partitioned(ch, db, table)
            parts, files = [], []
            for spec in specs:
                part = new_partition(ch, tbl, objects.partition_values(tbl.partition_keys, spec))
                directory = dir_of(part.sd.location)
                ch.mkdir(directory)
                name = objects.partition_name(tbl.partition_keys, part.values)
                found = data_files(directory)
                files += [self.cm.file_ref(p, name) for p in found]
                if self.stats_autogather:
                    part = with_basic_statistics(part, found)
                    catalog.put_partition(ch.ex, tbl, part, new=False)
                parts.append(part)
            ch.emit(EventType.ADD_PARTITION, AddPartitionPayload(tbl, parts, files), db, table)
        return parts

    def drop_partitions(self, db: str, table: str, specs: Sequence[Mapping[str, object]]) -> None:
        """Drop partitions (one DROP_PARTITION event); a managed table's files go to cmroot."""
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            tbl = _partitioned(ch, db, table)
            txns.require_no_open_writes(ch.ex, tbl, "drop partitions of")
            values = []
            for spec in specs:
                part = existing_partition(ch, tbl, objects.partition_values(tbl.partition_keys, spec))
                if tbl.table_type == objects.MANAGED:
                    directory = dir_of(part.sd.location)
                    ch.retire(all_files(tbl, [directory]))
                    ch.after_commit.append(_rmtree_later(directory))
                catalog.delete_partition(ch.ex, tbl, part.values)
                name = objects.partition_name(tbl.partition_keys, part.values)
                tablemeta.forget_partition(ch.ex, db, table, name)
                values.append(part.values)
            ch.emit(EventType.DROP_PARTITION, DropPartitionPayload(tbl, values), db, table)


def new_partition(ch: Change, tbl: TableSnapshot, values: list[str]) -> PartitionSnapshot:
    """Record a new partition of ``tbl`` (no event: the caller announces it) under the table's directory."""
    name = objects.partition_name(tbl.partition_keys, values)
    location = uri_of(dir_of(tbl.sd.location) / name)
    part = objects.partition(tbl, values, location, ch.now)
    catalog.put_partition(ch.ex, tbl, part, new=True)
    return part


def existing_partition(ch: Change, tbl: TableSnapshot, values: list[str]) -> PartitionSnapshot:
    part = catalog.find_partition(ch.ex, tbl, values)
    if part is None:
        raise NoSuchObjectError(
            "partition", f"{tbl.qualified_name}/{objects.partition_name(tbl.partition_keys, values)}"
        )
    return part


def _partitioned(ch: Change, db: str, table: str) -> TableSnapshot:
    tbl = catalog.get_table(ch.ex, db, table)
    if not tbl.partition_keys:
        raise WarehouseError(f"table {tbl.qualified_name} is not partitioned")
    return tbl


def _rmtree_later(directory: Path) -> Callable[[], None]:
    return lambda: shutil.rmtree(directory, ignore_errors=True)
