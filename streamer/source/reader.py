"""Readers of a metastore's notification log: the ``NotificationReader`` protocol and its SQL form.

The SQL reader reads ``NOTIFICATION_LOG`` (and Hive 4's ``TXN_WRITE_NOTIFICATION_LOG``) straight
from the metastore's database: sqlite, PostgreSQL (upper-case identifiers quoted) or MySQL/MariaDB
(pymysql), with the same queries and small dialect differences. Connections are read-only
(``streamer.source.source_db``) and run in autocommit so every read sees the newest committed rows
(MySQL's default isolation would otherwise pin a snapshot).
Readers only fetch rows; contiguity is checked by ``streamer.source.gaps``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow
from streamer.source.source_db import SQLITE, Dialect, connect, missing_log

__all__ = ["Dialect", "NotificationReader", "SqlNotificationReader", "connect"]

log = logging.getLogger(__name__)


class NotificationReader(Protocol):
    """What the agent needs from a notification log, whatever carries it."""

    def read_after(self, last_id: int, limit: int) -> list[NotificationRow]:
        """Up to ``limit`` rows with ``event_id > last_id``, in id order."""
        ...

    def head_event_id(self) -> int:
        """The newest event id the source has written (0 if none)."""
        ...

    def txn_writes(self, txn_id: int) -> list[TxnWriteNotificationRow]:
        """The ACID writes of one transaction (empty where the source does not keep them)."""
        ...

    def databases(self) -> set[str]:
        """Database names the source knows of (lower case), to warn about a policy that matches none."""
        ...

    def close(self) -> None: ...


_LOG_COLUMNS = ("EVENT_ID", "EVENT_TIME", "EVENT_TYPE", "DB_NAME", "TBL_NAME", "MESSAGE", "MESSAGE_FORMAT")
_WRITE_COLUMNS = (
    "WNL_TXNID", "WNL_WRITEID", "WNL_DATABASE", "WNL_TABLE", "WNL_PARTITION", "WNL_TABLE_OBJ",
    "WNL_PARTITION_OBJ", "WNL_FILES", "WNL_EVENT_TIME",
)


class SqlNotificationReader:
    """``NotificationReader`` over the metastore database itself."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._dialect = SQLITE
        self._has_cat_name: bool | None = None
        self._has_write_log: bool | None = None
        self._has_sequence: bool | None = None

    # --- protocol ---

    def read_after(self, last_id: int, limit: int) -> list[NotificationRow]:
        d = self._dialect_now()
        columns = list(_LOG_COLUMNS) + (["CAT_NAME"] if self._cat_name() else [])
        sql = (
            f"SELECT {', '.join(d.ident(c) for c in columns)} FROM {d.ident('NOTIFICATION_LOG')} "
            f"WHERE {d.ident('EVENT_ID')} > {d.param} ORDER BY {d.ident('EVENT_ID')} LIMIT {int(limit)}"
        )
        return [_row(r) for r in self._query(sql, (last_id,))]

    def head_event_id(self) -> int:
        d = self._dialect_now()
        rows = self._query(f"SELECT MAX({d.ident('EVENT_ID')}) FROM {d.ident('NOTIFICATION_LOG')}", ())
        head = int(rows[0][0] or 0)
        if self._sequence():
            # after the cleaner emptied the log, only the sequence still knows the head
            seq = self._query(
                f"SELECT MAX({d.ident('NEXT_EVENT_ID')}) FROM {d.ident('NOTIFICATION_SEQUENCE')}", ()
            )
            if seq and seq[0][0] is not None:
                head = max(head, int(seq[0][0]) - 1)
        return head

    def databases(self, window: int = 100_000) -> set[str]:
        """Databases named by the newest ``window`` events (the log is what this reader can see)."""
        d = self._dialect_now()
        floor = self.head_event_id() - window
        rows = self._query(
            f"SELECT DISTINCT {d.ident('DB_NAME')} FROM {d.ident('NOTIFICATION_LOG')} "
            f"WHERE {d.ident('EVENT_ID')} > {d.param}",
            (floor,),
        )
        return {str(r[0]).lower() for r in rows if r[0] and str(r[0]).strip() and str(r[0]) != "null"}

    def txn_writes(self, txn_id: int) -> list[TxnWriteNotificationRow]:
        d = self._dialect_now()
        if self._has_write_log is None:
            self._has_write_log = self._table_exists("TXN_WRITE_NOTIFICATION_LOG")
        if not self._has_write_log:
            return []
        order = ", ".join(d.ident(c) for c in ("WNL_WRITEID", "WNL_DATABASE", "WNL_TABLE", "WNL_PARTITION"))
        sql = (
            f"SELECT {', '.join(d.ident(c) for c in _WRITE_COLUMNS)} "
            f"FROM {d.ident('TXN_WRITE_NOTIFICATION_LOG')} WHERE {d.ident('WNL_TXNID')} = {d.param} "
            f"ORDER BY {order}"
        )
        return [
            TxnWriteNotificationRow(
                txn_id=int(r[0]), write_id=int(r[1]), db=_text(r[2]) or "", table=_text(r[3]) or "",
                partition=_text(r[4]) or "", table_obj=_text(r[5]) or "", partition_obj=_text(r[6]),
                files=_text(r[7]) or "", event_time=int(r[8] or 0),
            )
            for r in self._query(sql, (txn_id,))
        ]

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    # --- plumbing ---

    def check(self) -> None:
        """Connect now: a missing or unreachable database, or one without a notification log, fails
        here with one clear error (call it before creating anything for the reader's sake)."""
        self._dialect_now()

    def _dialect_now(self) -> Dialect:
        if self._conn is None:
            self._conn, self._dialect = connect(self.url)
            if not self._table_exists("NOTIFICATION_LOG"):
                raise missing_log(self.url)
        return self._dialect

    def _query(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        self._dialect_now()
        try:
            cur = self._conn.cursor()
            try:
                cur.execute(sql, tuple(params))
                return list(cur.fetchall())
            finally:
                cur.close()
        except Exception:
            # a broken connection is reopened on the next call; the error still reaches the caller
            self.close()
            raise

    def _cat_name(self) -> bool:
        if self._has_cat_name is None:
            self._has_cat_name = "CAT_NAME" in self._columns("NOTIFICATION_LOG")
        return self._has_cat_name

    def _sequence(self) -> bool:
        if self._has_sequence is None:
            self._has_sequence = self._table_exists("NOTIFICATION_SEQUENCE")
        return self._has_sequence

    def _columns(self, table: str) -> set[str]:
        d = self._dialect_now()
        cur = self._conn.cursor()
        try:
            cur.execute(f"SELECT * FROM {d.ident(table)} WHERE 1 = 0")
            return {str(c[0]).upper() for c in cur.description or ()}
        finally:
            cur.close()

    def _table_exists(self, table: str) -> bool:
        try:
            self._columns(table)
        except Exception as exc:  # the driver's "no such table" differs per backend
            log.debug("table %s not readable: %s", table, exc)
            self.close()
            return False
        return True


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8")
    return str(value)


def _row(r: Sequence[Any]) -> NotificationRow:
    return NotificationRow(
        event_id=int(r[0]),
        event_time=int(r[1] or 0),
        event_type=_text(r[2]) or "",
        db_name=_text(r[3]),
        table_name=_text(r[4]),
        message=_text(r[5]) or "",
        message_format=_text(r[6]),
        cat_name=_text(r[7]) if len(r) > 7 else None,
    )
