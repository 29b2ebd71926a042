"""Statistics changes of the warehouse: column statistics (``UPDATE_*_COL_STAT_EVENT``,
``DELETE_*_COL_STAT_EVENT``) and basic statistics (an ALTER event), computed from the data files."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow.parquet as pq

import streamer.warehouse.acid as acid
import streamer.warehouse.catalog as catalog
import streamer.warehouse.objects as objects
import streamer.warehouse.statistics as statistics
import streamer.warehouse.tablemeta as tablemeta
import streamer.warehouse.txns as txns
from streamer.events.model import (
    AlterPartitionPayload,
    AlterTablePayload,
    ColumnStatistic,
    DeleteColumnStatsPayload,
    EventType,
    PartitionSnapshot,
    TableSnapshot,
    UpdateColumnStatsPayload,
)
from streamer.warehouse.change import Change
from streamer.warehouse.core import WarehouseCore
from streamer.warehouse.errors import NoSuchObjectError, WarehouseError
from streamer.warehouse.files import data_files, path_of, read_parquet
from streamer.warehouse.layout import acid_files


class StatisticsOps(WarehouseCore):
    """Column and basic statistics of the warehouse's tables and partitions."""

    def update_column_statistics(
        self,
        db: str,
        table: str,
        partition: Mapping[str, object] | None = None,
        columns: Sequence[str] | None = None,
    ) -> int:
        """``ANALYZE TABLE ... [PARTITION (...)] COMPUTE STATISTICS FOR COLUMNS``: exact statistics of
        the current data; a partitioned table's statistics are per partition. Returns the event id."""
        with self._change() as ch:
            tbl, part = _target(ch, db, table, partition)
            committed = _committed(ch, tbl)
            rows = read_parquet(_data(tbl, part, committed))
            stats = statistics.table_statistics(tbl.sd.columns, rows, columns)
            names = [s.column for s in stats]
            if part is None:
                after = dataclasses.replace(
                    tbl,
                    parameters={
                        **tbl.parameters,
                        statistics.ACCURATE: statistics.accurate(tbl.parameters, columns=names),
                    },
                )
                catalog.update_table(ch.ex, after)
                tablemeta.put_statistics(ch.ex, tbl.db, tbl.name, tablemeta.TABLE_LEVEL, stats)
                payload = UpdateColumnStatsPayload(tbl.db, tbl.name, stats, [], dict(after.parameters))
                return ch.emit(EventType.UPDATE_TABLE_COLUMN_STAT, payload, tbl.db, tbl.name)
            new_part = dataclasses.replace(
                part,
                parameters={
                    **part.parameters,
                    statistics.ACCURATE: statistics.accurate(part.parameters, columns=names),
                },
            )
            catalog.put_partition(ch.ex, tbl, new_part, new=False)
            name = objects.partition_name(tbl.partition_keys, part.values)
            tablemeta.put_statistics(ch.ex, tbl.db, tbl.name, name, stats)
            payload = UpdateColumnStatsPayload(
                tbl.db, tbl.name, stats, list(part.values), dict(new_part.parameters), is_table_level=False
            )
            return ch.emit(EventType.UPDATE_PARTITION_COLUMN_STAT, payload, tbl.db, tbl.name)

    def delete_column_statistics(
        self, db: str, table: str, partition: Mapping[str, object] | None = None, column: str | None = None
    ) -> list[int]:
        """Delete one column's statistics (or every column's): one DELETE_*_COL_STAT event per column."""
        with self._change() as ch:
            tbl, part = _target(ch, db, table, partition)
            name = objects.partition_name(tbl.partition_keys, part.values) if part else tablemeta.TABLE_LEVEL
            stored = [s.column for s in tablemeta.statistics_of(ch.ex, tbl.db, tbl.name, name)]
            doomed = stored if column is None else [c for c in stored if c == column.lower()]
            if column is not None and not doomed:
                raise NoSuchObjectError("column statistics", f"{tbl.qualified_name} {name} {column}".strip())
            owner: TableSnapshot | PartitionSnapshot = part if part is not None else tbl
            params = {
                **owner.parameters,
                statistics.ACCURATE: statistics.accurate(owner.parameters, drop_columns=doomed),
            }
            if part is None:
                catalog.update_table(ch.ex, dataclasses.replace(tbl, parameters=params))
            else:
                catalog.put_partition(ch.ex, tbl, dataclasses.replace(part, parameters=params), new=False)
            ids = []
            for col in doomed:
                tablemeta.delete_statistics(ch.ex, tbl.db, tbl.name, name, col)
                if part is None:
                    payload = DeleteColumnStatsPayload(tbl.db, tbl.name, col)
                    kind = EventType.DELETE_TABLE_COLUMN_STAT
                else:
                    payload = DeleteColumnStatsPayload(tbl.db, tbl.name, col, name, list(part.values))
                    kind = EventType.DELETE_PARTITION_COLUMN_STAT
                ids.append(ch.emit(kind, payload, tbl.db, tbl.name))
            return ids

    def column_statistics(
        self, db: str, table: str, partition: Mapping[str, object] | None = None
    ) -> list[ColumnStatistic]:
        """Stored column statistics of the table or one partition, ordered by column name."""
        tbl = catalog.get_table(self._query, db.lower(), table.lower())
        name = (
            objects.partition_name(
                tbl.partition_keys, objects.partition_values(tbl.partition_keys, partition)
            )
            if partition is not None
            else tablemeta.TABLE_LEVEL
        )
        return tablemeta.statistics_of(self._query, tbl.db, tbl.name, name)

    def update_basic_statistics(
        self, db: str, table: str, partition: Mapping[str, object] | None = None
    ) -> int:
        """``ANALYZE TABLE ... COMPUTE STATISTICS``: recount files, rows and bytes (an ALTER event).

        Useful for an external table whose files changed without events."""
        with self._change() as ch:
            tbl, part = _target(ch, db, table, partition)
            return emit_basic_stats(ch, tbl, part)


def emit_basic_stats(ch: Change, tbl: TableSnapshot, part: PartitionSnapshot | None) -> int:
    """Write current basic statistics of ``tbl`` (or ``part``) with an ALTER_TABLE / ALTER_PARTITION."""
    basic = basic_statistics_of(_data(tbl, part, _committed(ch, tbl)))
    if part is None:
        params = {**basic, statistics.ACCURATE: statistics.accurate(tbl.parameters, basic=True)}
        after = objects.altered_table(tbl, ch.now, parameters=params)
        catalog.update_table(ch.ex, after)
        return ch.emit(EventType.ALTER_TABLE, AlterTablePayload(tbl, after), tbl.db, tbl.name)
    params = {**part.parameters, **basic, "transient_lastDdlTime": str(ch.now)}
    params[statistics.ACCURATE] = statistics.accurate(part.parameters, basic=True)
    new = dataclasses.replace(part, parameters=params)
    catalog.put_partition(ch.ex, tbl, new, new=False)
    return ch.emit(EventType.ALTER_PARTITION, AlterPartitionPayload(tbl, part, new), tbl.db, tbl.name)


def basic_statistics_of(files: Sequence[Path]) -> dict[str, str]:
    """numFiles, numRows (from the Parquet footers) and totalSize of these data files."""
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return statistics.basic_statistics([f.stat().st_size for f in files], rows)


def with_basic_statistics(part: PartitionSnapshot, files: Sequence[Path]) -> PartitionSnapshot:
    """A new partition's snapshot carrying the basic statistics of the files it starts with."""
    params = {**part.parameters, **basic_statistics_of(files)}
    params[statistics.ACCURATE] = statistics.accurate(part.parameters, basic=True)
    return dataclasses.replace(part, parameters=params)


def _target(
    ch: Change, db: str, table: str, partition: Mapping[str, object] | None
) -> tuple[TableSnapshot, PartitionSnapshot | None]:
    """The table, and the partition named (required exactly when the table is partitioned)."""
    tbl = tablemeta.owner_table(ch.ex, db, table)
    if bool(tbl.partition_keys) != (partition is not None):
        need = "a partition" if tbl.partition_keys else "no partition"
        raise WarehouseError(f"statistics of {tbl.qualified_name} need {need}")
    if partition is None:
        return tbl, None
    values = objects.partition_values(tbl.partition_keys, partition)
    part = catalog.find_partition(ch.ex, tbl, values)
    if part is None:
        raise NoSuchObjectError(
            "partition", f"{tbl.qualified_name}/{objects.partition_name(tbl.partition_keys, values)}"
        )
    return tbl, part


def _committed(ch: Change, tbl: TableSnapshot) -> set[int] | None:
    if acid.table_kind(tbl) is None:
        return None
    return set(txns.write_ids(ch.ex, tbl.db, tbl.name, txns.COMMITTED))


def _data(tbl: TableSnapshot, part: PartitionSnapshot | None, committed: set[int] | None) -> list[Path]:
    """The data files a reader reads: top-level files, or a transactional table's visible deltas."""
    location = (part.sd.location if part else tbl.sd.location) or ""
    if not location:
        raise WarehouseError(f"{tbl.qualified_name} has no location")
    directory = path_of(location)
    if committed is None:
        return data_files(directory)
    return [f for _, f in acid_files(directory, committed)]
