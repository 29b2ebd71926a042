"""Data changes of the warehouse: INSERT [OVERWRITE] (auto-commit for transactional tables) and
TRUNCATE, with the basic statistics Hive's stats task writes when autogathered."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import streamer.warehouse.acid as acid
import streamer.warehouse.catalog as catalog
import streamer.warehouse.objects as objects
from streamer.events.model import (
    AddPartitionPayload,
    AlterPartitionPayload,
    AlterTablePayload,
    EventType,
    InsertPayload,
    TableSnapshot,
)
from streamer.warehouse.change import Change
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.files import data_files
from streamer.warehouse.layout import dir_of
from streamer.warehouse.partition_ops import existing_partition, new_partition
from streamer.warehouse.rows import Row, group_rows
from streamer.warehouse.statistics_ops import basic_statistics_of, emit_basic_stats, with_basic_statistics
from streamer.warehouse.txn_ops import TxnOps


class DataOps(TxnOps):
    """Loading and emptying tables and partitions."""

    def insert(
        self,
        db: str,
        table: str,
        rows: Sequence[Row],
        partition: Mapping[str, object] | None = None,
        *,
        overwrite: bool = False,
        n_files: int = 1,
    ) -> list[int]:
        """INSERT [OVERWRITE] rows; returns the event ids written.

        Into a partitioned table without ``partition``, rows carry the partition keys and are
        grouped by them (Hive's dynamic partitioning): one event per partition. A new partition
        is announced by ADD_PARTITION listing the files (no INSERT), as Hive does.

        Into a transactional table the insert is its own transaction, as Hive's auto-commit:
        OPEN_TXN, ALLOC_WRITE_ID_EVENT, (ADD_PARTITION,) COMMIT_TXN; see :meth:`acid_insert`.
        """
        db, table = db.lower(), table.lower()
        if acid.table_kind(catalog.get_table(self._query, db, table)) is not None:
            if overwrite:
                raise WarehouseError(
                    f"INSERT OVERWRITE into transactional table {db}.{table} is not supported"
                )
            txn, open_id = self._open_txn()
            try:
                ids = self.acid_insert(txn, db, table, rows, partition, n_files=n_files)
            except BaseException:
                self.abort_txn(txn)
                raise
            return [open_id, *ids, self.commit_txn(txn)]
        with self._change() as ch:
            tbl = catalog.get_table(ch.ex, db, table)
            if tbl.table_type == objects.VIEW:
                raise WarehouseError(f"cannot insert into view {tbl.qualified_name}")
            return [
                event_id
                for values, group in group_rows(tbl, rows, partition)
                for event_id in self._insert_into(ch, tbl, values, group, overwrite, n_files)
            ]

    def _insert_into(
        self,
        ch: Change,
        tbl: TableSnapshot,
        values: list[str],
        rows: Sequence[Row],
        overwrite: bool,
        n_files: int,
    ) -> list[int]:
        """INSERT (or ADD_PARTITION for a new partition), then basic statistics when autogathered."""
        name = objects.partition_name(tbl.partition_keys, values) if values else None
        part = catalog.find_partition(ch.ex, tbl, values) if values else None
        is_new = bool(values) and part is None
        if is_new:
            part = new_partition(ch, tbl, values)
        directory = dir_of(part.sd.location if part else tbl.sd.location)
        old = data_files(directory) if overwrite else []
        paths = ch.write(directory, tbl.sd.columns, rows, n_files)
        files = [self.cm.file_ref(p, name) for p in paths]
        if old:
            ch.retire(old)
        if is_new:
            assert part is not None
            # the event lists every file in the directory, as Hive's listener does: an external
            # partition dropped and added again still holds its old files, which readers see
            listed = data_files(directory)
            if self.stats_autogather:
                part = with_basic_statistics(part, listed)
                catalog.put_partition(ch.ex, tbl, part, new=False)
            added = [self.cm.file_ref(p, name) for p in listed]
            payload_add = AddPartitionPayload(tbl, [part], added)
            return [ch.emit(EventType.ADD_PARTITION, payload_add, tbl.db, tbl.name)]
        payload = InsertPayload(tbl, part, values, overwrite, files)
        ids = [ch.emit(EventType.INSERT, payload, tbl.db, tbl.name)]
        if self.stats_autogather:
            ids.append(emit_basic_stats(ch, tbl, part))
        return ids

    def truncate(self, db: str, table: str, partition: Mapping[str, object] | None = None) -> list[int]:
        """TRUNCATE: ALTER_TABLE (unpartitioned) or one ALTER_PARTITION per partition, isTruncateOp."""
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            tbl = catalog.get_table(ch.ex, db, table)
            if tbl.table_type != objects.MANAGED:
                raise WarehouseError(f"cannot truncate {tbl.qualified_name}: it is a {tbl.table_type}")
            if acid.table_kind(tbl) is not None:
                raise WarehouseError(f"TRUNCATE of transactional table {tbl.qualified_name} is not supported")
            if not tbl.partition_keys:
                if partition:
                    raise WarehouseError(f"table {tbl.qualified_name} is not partitioned")
                ch.retire(data_files(dir_of(tbl.sd.location)))
                after = objects.altered_table(tbl, ch.now, parameters=self._emptied_stats())
                catalog.update_table(ch.ex, after)
                return [
                    ch.emit(EventType.ALTER_TABLE, AlterTablePayload(tbl, after, is_truncate=True), db, table)
                ]
            if partition is not None:
                parts = [existing_partition(ch, tbl, objects.partition_values(tbl.partition_keys, partition))]
            else:
                parts = catalog.list_partitions(ch.ex, db, table)
            ids = []
            for old in parts:
                ch.retire(data_files(dir_of(old.sd.location)))
                params = {**old.parameters, "transient_lastDdlTime": str(ch.now)}
                new = dataclasses.replace(old, parameters={**params, **self._emptied_stats()})
                catalog.put_partition(ch.ex, tbl, new, new=False)
                payload = AlterPartitionPayload(tbl, old, new, is_truncate=True)
                ids.append(ch.emit(EventType.ALTER_PARTITION, payload, db, table))
            return ids

    def _emptied_stats(self) -> dict[str, str]:
        """Basic statistics of an emptied table or partition, when they are kept."""
        return basic_statistics_of([]) if self.stats_autogather else {}
