"""Reads of the warehouse's transaction state and of the logs it writes (``NOTIFICATION_LOG``,
``TXN_WRITE_NOTIFICATION_LOG``)."""

from __future__ import annotations

import streamer.warehouse.txns as txns
from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow
from streamer.warehouse.core import WarehouseCore
from streamer.warehouse.errors import WarehouseError


class LogReads(WarehouseCore):
    """Transactions and log rows, as committed."""

    def txn_state(self, txn: int) -> str:
        """``"open"``, ``"committed"``, ``"aborted"``, or ``"unknown"``."""
        return txns.STATE_NAMES.get(txns.state(self._query, txn) or "", "unknown")

    def txns(self, state: str | None = None) -> list[int]:
        """Transaction ids, all or those in ``state`` (``"open"``, ``"committed"``, ``"aborted"``)."""
        codes = {v: k for k, v in txns.STATE_NAMES.items()}
        if state is not None and state not in codes:
            raise WarehouseError(f"unknown transaction state {state!r}; use one of {sorted(codes)}")
        return txns.txn_ids(self._query, codes[state] if state else None)

    def txn_write_rows(self, txn: int) -> list[TxnWriteNotificationRow]:
        """The ``TXN_WRITE_NOTIFICATION_LOG`` rows of ``txn`` (ordered as the SQL reader orders them)."""
        rows = self._query(
            'SELECT "WNL_TXNID", "WNL_WRITEID", "WNL_DATABASE", "WNL_TABLE", "WNL_PARTITION",'
            ' "WNL_TABLE_OBJ", "WNL_PARTITION_OBJ", "WNL_FILES", "WNL_EVENT_TIME"'
            ' FROM "TXN_WRITE_NOTIFICATION_LOG"'
            ' WHERE "WNL_TXNID" = ? ORDER BY "WNL_WRITEID", "WNL_DATABASE", "WNL_TABLE", "WNL_PARTITION"',
            (txn,),
        )
        return [
            TxnWriteNotificationRow(
                txn_id=int(r[0]),
                write_id=int(r[1]),
                db=r[2],
                table=r[3],
                partition=r[4],
                table_obj=r[5],
                partition_obj=r[6],
                files=r[7] or "",
                event_time=int(r[8]),
            )
            for r in rows
        ]

    def current_event_id(self) -> int:
        """The id of the last event written (0 when none), as Hive's ``get_current_notificationEventId``."""
        rows = self._query('SELECT "NEXT_EVENT_ID" FROM "NOTIFICATION_SEQUENCE" WHERE "NNI_ID" = 1', ())
        return int(rows[0][0]) - 1

    def notifications(self, after: int = 0, limit: int | None = None) -> list[NotificationRow]:
        """``NOTIFICATION_LOG`` rows with id > ``after`` in id order."""
        sql = (
            'SELECT "EVENT_ID", "EVENT_TIME", "EVENT_TYPE", "MESSAGE", "MESSAGE_FORMAT", "DB_NAME",'
            ' "TBL_NAME", "CAT_NAME" FROM "NOTIFICATION_LOG" WHERE "EVENT_ID" > ? ORDER BY "EVENT_ID"'
        )
        params: list[int] = [after]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [
            NotificationRow(
                event_id=int(r[0]),
                event_time=int(r[1]),
                event_type=r[2],
                message=r[3],
                message_format=r[4],
                db_name=r[5],
                table_name=r[6],
                cat_name=r[7],
            )
            for r in self._query(sql, params)
        ]
