"""Warehouse operations on what hangs off a table: constraints, column statistics, basic statistics.

A mixin of :class:`streamer.warehouse.Warehouse`: each operation is one change (one SQL transaction
with its events), written as a Hive 3/4 metastore writes it:
- ``ADD_PRIMARYKEY`` ... ``ADD_CHECKCONSTRAINT`` and ``DROP_CONSTRAINT`` (a foreign key's event is
  keyed by the referenced table, as Hive's DbNotificationListener keys it);
- ``UPDATE_TBL_COL_STAT_EVENT`` / ``UPDATE_PART_COL_STAT_EVENT`` carrying the statistics and the new
  table or partition parameters (Hive 3+ updates ``COLUMN_STATS_ACCURATE`` without an ALTER event);
  ``DELETE_*_COL_STAT_EVENT`` one per column;
- basic statistics (``numFiles``/``numRows``/``totalSize``) by an ALTER_TABLE or ALTER_PARTITION, as
  Hive's stats task does after a load or ``ANALYZE TABLE ... COMPUTE STATISTICS``.
Statistics are computed from the data files themselves (:mod:`streamer.warehouse.statistics`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from streamer.events.model import (
    AddConstraintsPayload,
    AlterPartitionPayload,
    AlterTablePayload,
    ColumnStatistic,
    Constraint,
    DeleteColumnStatsPayload,
    DropConstraintPayload,
    EventType,
    PartitionSnapshot,
    TableSnapshot,
    UpdateColumnStatsPayload,
)
from streamer.warehouse import acid, catalog, objects, statistics, tablemeta, txns
from streamer.warehouse import constraints as cons
from streamer.warehouse.errors import AlreadyExistsError, NoSuchObjectError, WarehouseError
from streamer.warehouse.files import data_files, path_of, read_parquet

if TYPE_CHECKING:
    from streamer.warehouse.warehouse import _Change


class TableMetadataOps:
    """Constraints and statistics of the warehouse's tables (see the module docstring)."""

    stats_autogather: bool = False

    def _change(self) -> AbstractContextManager[_Change]:  # provided by Warehouse
        raise NotImplementedError

    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:  # provided by Warehouse
        raise NotImplementedError

    # --- constraints --------------------------------------------------------------------------

    def add_primary_key(
        self, db: str, table: str, name: str, columns: Sequence[str], *, rely: bool = False
    ) -> list[Constraint]:
        with self._change() as ch:
            tbl = _table(ch, db, table)
            if any(c.kind == cons.PRIMARY_KEY for c in tablemeta.constraints_of(ch.ex, tbl.db, tbl.name)):
                raise WarehouseError(f"table {tbl.qualified_name} has a primary key already")
            return self._add(ch, cons.primary_key(tbl, name, columns, rely=rely))

    def add_foreign_key(
        self,
        db: str,
        table: str,
        name: str,
        columns: Sequence[str],
        ref_table: str,
        ref_db: str | None = None,
        *,
        rely: bool = False,
    ) -> list[Constraint]:
        """A foreign key of ``db.table`` referencing the primary key of ``ref_db.ref_table``."""
        with self._change() as ch:
            tbl = _table(ch, db, table)
            parent = _table(ch, ref_db or db, ref_table)
            pk = [
                c
                for c in tablemeta.constraints_of(ch.ex, parent.db, parent.name)
                if c.kind == cons.PRIMARY_KEY
            ]
            if not pk:
                raise WarehouseError(f"foreign key {name}: {parent.qualified_name} has no primary key")
            return self._add(ch, cons.foreign_key(tbl, name, columns, pk, rely=rely))

    def add_unique(self, db: str, table: str, name: str, columns: Sequence[str]) -> list[Constraint]:
        return self._add_column_constraint(cons.UNIQUE, db, table, name, columns, None)

    def add_not_null(self, db: str, table: str, name: str, column: str) -> list[Constraint]:
        return self._add_column_constraint(cons.NOT_NULL, db, table, name, [column], None)

    def add_default(self, db: str, table: str, name: str, column: str, value: str) -> list[Constraint]:
        return self._add_column_constraint(cons.DEFAULT, db, table, name, [column], value)

    def add_check(self, db: str, table: str, name: str, column: str, expression: str) -> list[Constraint]:
        return self._add_column_constraint(cons.CHECK, db, table, name, [column], expression)

    def _add_column_constraint(
        self, kind: str, db: str, table: str, name: str, columns: Sequence[str], value: str | None
    ) -> list[Constraint]:
        with self._change() as ch:
            return self._add(ch, cons.column_constraint(kind, _table(ch, db, table), name, columns, value))

    def _add(self, ch: _Change, added: list[Constraint]) -> list[Constraint]:
        first = added[0]
        if tablemeta.constraint_exists(ch.ex, first.name):
            raise AlreadyExistsError("constraint", first.name)
        tablemeta.insert_constraints(ch.ex, added)
        db, table = (
            (first.ref_db, first.ref_table) if first.kind == cons.FOREIGN_KEY else (first.db, first.table)
        )
        ch.emit(cons.EVENT_TYPES[first.kind], AddConstraintsPayload(added), db, table)
        return added

    def drop_constraint(self, db: str, table: str, name: str) -> int:
        """Drop a constraint; a primary key still referenced by a foreign key is refused (as Hive)."""
        with self._change() as ch:
            tbl = _table(ch, db, table)
            own = [c for c in tablemeta.constraints_of(ch.ex, tbl.db, tbl.name) if c.name == name]
            if not own:
                raise NoSuchObjectError("constraint", f"{tbl.qualified_name}.{name}")
            users = [c.name for c in tablemeta.referencing(ch.ex, tbl.db, tbl.name) if c.ref_name == name]
            if users:
                raise WarehouseError(f"cannot drop {name}: foreign keys {sorted(set(users))} reference it")
            tablemeta.delete_constraint(ch.ex, tbl.db, tbl.name, name)
            return ch.emit(
                EventType.DROP_CONSTRAINT, DropConstraintPayload(tbl.db, tbl.name, name), tbl.db, tbl.name
            )

    def constraints(self, db: str, table: str) -> list[Constraint]:
        return tablemeta.constraints_of(self._query, db.lower(), table.lower())

    # --- column statistics --------------------------------------------------------------------

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

    # --- basic statistics ---------------------------------------------------------------------

    def update_basic_statistics(
        self, db: str, table: str, partition: Mapping[str, object] | None = None
    ) -> int:
        """``ANALYZE TABLE ... COMPUTE STATISTICS``: recount files, rows and bytes (an ALTER event).

        Useful for an external table whose files changed without events."""
        with self._change() as ch:
            tbl, part = _target(ch, db, table, partition)
            return self._emit_basic_stats(ch, tbl, part)

    def _emit_basic_stats(self, ch: _Change, tbl: TableSnapshot, part: PartitionSnapshot | None) -> int:
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


def _table(ch: _Change, db: str, table: str) -> TableSnapshot:
    tbl = catalog.get_table(ch.ex, db.lower(), table.lower())
    if tbl.table_type == objects.VIEW:
        raise WarehouseError(f"{tbl.qualified_name} is a view: it has no constraints or statistics")
    return tbl


def _target(
    ch: _Change, db: str, table: str, partition: Mapping[str, object] | None
) -> tuple[TableSnapshot, PartitionSnapshot | None]:
    """The table, and the partition named (required exactly when the table is partitioned)."""
    tbl = _table(ch, db, table)
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


def _committed(ch: _Change, tbl: TableSnapshot) -> set[int] | None:
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
    return list(_acid_data(directory, committed))


def _acid_data(directory: Path, committed: set[int]) -> Iterator[Path]:
    if not directory.is_dir():
        return
    names = [p.name for p in directory.iterdir() if p.is_dir()]
    for sub in acid.visible_dirs(names, committed):
        yield from data_files(directory / sub)
