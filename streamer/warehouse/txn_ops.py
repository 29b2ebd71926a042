"""ACID transactions of the warehouse: open, write (``delta_W_W_S`` directories recorded in
``TXN_WRITE_NOTIFICATION_LOG``), commit and abort, with the events Hive 4 writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import streamer.warehouse.acid as acid
import streamer.warehouse.catalog as catalog
import streamer.warehouse.objects as objects
import streamer.warehouse.txns as txns
from streamer.events.model import (
    AbortTxnPayload,
    AcidWrite,
    AddPartitionPayload,
    AllocWriteIdPayload,
    CommitTxnPayload,
    EventType,
    OpenTxnPayload,
    TxnWriteId,
)
from streamer.warehouse.core import WarehouseCore
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.layout import dir_of
from streamer.warehouse.partition_ops import new_partition
from streamer.warehouse.rows import Row, group_rows


class TxnOps(WarehouseCore):
    """Transactions and the writes made in them."""

    def open_txn(self) -> int:
        """Open a transaction (an OPEN_TXN event); returns its id (dense, increasing)."""
        return self._open_txn()[0]

    def _open_txn(self) -> tuple[int, int]:
        with self._change() as ch:
            txn = txns.new_txn(ch.ex, ch.now)
            return txn, ch.emit(EventType.OPEN_TXN, OpenTxnPayload([txn]), None)

    @contextmanager
    def transaction(self) -> Iterator[int]:
        """``with wh.transaction() as txn:`` commits on success and aborts on an exception."""
        txn = self.open_txn()
        try:
            yield txn
        except BaseException:
            self.abort_txn(txn)
            raise
        self.commit_txn(txn)

    def acid_insert(
        self,
        txn: int,
        db: str,
        table: str,
        rows: Sequence[Row],
        partition: Mapping[str, object] | None = None,
        *,
        n_files: int = 1,
    ) -> list[int]:
        """Insert rows into a transactional table within open transaction ``txn``; returns the event ids.

        The txn's first write to the table allocates the table's next write id W (an
        ALLOC_WRITE_ID_EVENT); each call is a new statement S writing ``delta_W_W_S`` under the
        table or each partition (dynamic partitioning as :meth:`insert`; a new partition is an
        ADD_PARTITION without files). The files are recorded in ``TXN_WRITE_NOTIFICATION_LOG``,
        not in the log, as Hive 4 does; readers see them once the txn commits.
        """
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            txns.require_open(ch.ex, txn, f"write to {db}.{table}")
            tbl = catalog.get_table(ch.ex, db, table)
            kind = acid.table_kind(tbl)
            if kind is None or tbl.table_type != objects.MANAGED:
                raise WarehouseError(f"{tbl.qualified_name} is not a transactional table: use insert()")
            groups = group_rows(tbl, rows, partition)
            ids = []
            write = txns.table_write(ch.ex, txn, db, table)
            if write is None:
                write_id = txns.allocate_write_id(ch.ex, txn, db, table)
                payload = AllocWriteIdPayload(db, table, [TxnWriteId(txn, write_id)])
                ids.append(ch.emit(EventType.ALLOC_WRITE_ID, payload, db, table))
                write = txns.TableWrite(db, table, write_id, 0)
            subdir = acid.delta_dir(write.write_id, txns.take_statement_id(ch.ex, write))
            file_name = acid.bucket_file if kind == acid.FULL else None
            for values, group in groups:
                part = catalog.find_partition(ch.ex, tbl, values) if values else None
                if values and part is None:
                    part = new_partition(ch, tbl, values)
                    ids.append(
                        ch.emit(EventType.ADD_PARTITION, AddPartitionPayload(tbl, [part], []), db, table)
                    )
                if not group:
                    continue
                name = objects.partition_name(tbl.partition_keys, values) if values else None
                location = dir_of(part.sd.location if part else tbl.sd.location)
                ch.mkdir(location)  # so that a failure removes a new partition's directory too
                paths = ch.write(location / subdir, tbl.sd.columns, group, n_files, file_name)
                refs = [dataclasses.replace(self.cm.file_ref(p, name), subdir=subdir) for p in paths]
                ch.record_txn_write(txn, AcidWrite(db, table, write.write_id, refs, name, tbl, part))
            return ids

    def commit_txn(self, txn: int) -> int:
        """Commit (a COMMIT_TXN event naming only the txn, as in Hive 4's log); returns its event id."""
        with self._change() as ch:
            txns.require_open(ch.ex, txn, "commit")
            txns.finish(ch.ex, txn, txns.COMMITTED, ch.now)
            return ch.emit(EventType.COMMIT_TXN, CommitTxnPayload(txn), None)

    def abort_txn(self, txn: int) -> int:
        """Abort (an ABORT_TXN event with the databases written); its deltas stay on disk, unread."""
        with self._change() as ch:
            txns.require_open(ch.ex, txn, "abort")
            dbs = sorted({w.db for w in txns.writes_of(ch.ex, txn)})
            txns.finish(ch.ex, txn, txns.ABORTED, ch.now)
            return ch.emit(EventType.ABORT_TXN, AbortTxnPayload(txn, dbs), None)
