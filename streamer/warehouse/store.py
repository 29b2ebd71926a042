"""The warehouse's SQL database (sqlite file or PostgreSQL URL) and its one write discipline.

Every change runs in :meth:`Store.change`: a database transaction that first takes the
``NOTIFICATION_SEQUENCE`` row lock (``SELECT ... FOR UPDATE`` on PostgreSQL, ``BEGIN IMMEDIATE``
on sqlite), as Hive's DbNotificationListener does. All changes therefore serialize on that row,
event ids are dense, and a change's metadata and its ``NOTIFICATION_LOG`` rows commit together.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import streamer.warehouse.schema as schema
from streamer.hive.decode import WRITE_FILES_SEPARATOR
from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow
from streamer.warehouse.errors import WarehouseError

Params = Sequence[Any]


class _Cursor(Protocol):
    @property
    def description(self) -> Any: ...
    def execute(self, sql: Any, params: Any = ...) -> Any: ...
    def fetchall(self) -> list[Any]: ...


@dataclass
class Tx:
    """One open change: SQL access plus the event ids it has taken (in order)."""

    store: Store
    cursor: _Cursor
    next_event_id: int
    first_event_id: int

    def execute(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self.store.run(self.cursor, sql, params)

    def take_event_id(self) -> int:
        event_id = self.next_event_id
        self.next_event_id += 1
        return event_id

    def append_notification(self, row: NotificationRow, expected_id: int) -> None:
        if row.event_id != expected_id:
            raise WarehouseError(f"encoder returned event id {row.event_id}, expected {expected_id}")
        self.execute(
            'INSERT INTO "NOTIFICATION_LOG" ("NL_ID", "EVENT_ID", "EVENT_TIME", "EVENT_TYPE", "CAT_NAME",'
            ' "DB_NAME", "TBL_NAME", "MESSAGE", "MESSAGE_FORMAT") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
            (
                row.event_id,
                row.event_id,
                row.event_time,
                row.event_type,
                row.cat_name,
                row.db_name,
                row.table_name,
                row.message,
                row.message_format,
            ),
        )

    def merge_txn_write(self, row: TxnWriteNotificationRow) -> None:
        """Record an ACID write; a later statement of the same txn into the same table or partition
        adds its files to the existing row, as Hive's ``addWriteNotificationLog`` does."""
        key = (row.txn_id, row.db, row.table, row.partition)
        where = ' WHERE "WNL_TXNID" = ? AND "WNL_DATABASE" = ? AND "WNL_TABLE" = ? AND "WNL_PARTITION" = ?'
        found = self.execute('SELECT "WNL_FILES" FROM "TXN_WRITE_NOTIFICATION_LOG"' + where, key)
        if not found:
            self.append_txn_write(row)
            return
        files = WRITE_FILES_SEPARATOR.join(f for f in (found[0][0], row.files) if f)
        self.execute(
            'UPDATE "TXN_WRITE_NOTIFICATION_LOG" SET "WNL_FILES" = ?, "WNL_EVENT_TIME" = ?' + where,
            (files, row.event_time, *key),
        )

    def append_txn_write(self, row: TxnWriteNotificationRow) -> None:
        (max_id,) = self.execute('SELECT COALESCE(MAX("WNL_ID"), 0) FROM "TXN_WRITE_NOTIFICATION_LOG"')[0]
        self.execute(
            'INSERT INTO "TXN_WRITE_NOTIFICATION_LOG" ("WNL_ID", "WNL_TXNID", "WNL_WRITEID", "WNL_DATABASE",'
            ' "WNL_TABLE", "WNL_PARTITION", "WNL_TABLE_OBJ", "WNL_PARTITION_OBJ", "WNL_FILES",'
            ' "WNL_EVENT_TIME") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            (
                int(max_id) + 1,
                row.txn_id,
                row.write_id,
                row.db,
                row.table,
                row.partition,
                row.table_obj,
                row.partition_obj,
                row.files,
                row.event_time,
            ),
        )


class Store:
    """A connection to the warehouse database; sqlite for a path, PostgreSQL for a URL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_postgres = url.startswith(("postgresql://", "postgres://"))
        self._conn: Any
        if self.is_postgres:
            try:
                import psycopg
            except ImportError as exc:  # pragma: no cover - psycopg is a core dependency
                raise WarehouseError("PostgreSQL needs psycopg: pip install 'psycopg[binary]'") from exc
            try:
                self._conn = psycopg.connect(url, autocommit=True)
            except psycopg.Error as exc:
                raise WarehouseError(f"cannot connect to {_masked(url)}: {exc}") from exc
        else:
            path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)  # a new warehouse in a new folder
            self._conn = sqlite3.connect(path, isolation_level=None, timeout=30)
            self._conn.execute("PRAGMA journal_mode=WAL")

    def close(self) -> None:
        self._conn.close()

    def run(self, cursor: _Cursor, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        if self.is_postgres:
            sql = sql.replace("?", "%s")
        cursor.execute(sql, tuple(params))
        if getattr(cursor, "description", None) is None:  # no result set (DDL, INSERT, UPDATE)
            return []
        return [tuple(r) for r in cursor.fetchall()]

    def create_schema(self) -> None:
        with self._transaction(immediate=True) as cur:
            for ddl in schema.ALL:
                self.run(cur, ddl)

    def query(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """A read outside any change (sees committed state only)."""
        cur = self._conn.cursor()
        try:
            return self.run(cur, sql, params)
        finally:
            cur.close()

    @contextmanager
    def change(self) -> Iterator[Tx]:
        """A change transaction holding the notification sequence lock; commits on success."""
        with self._transaction(immediate=True) as cur:
            lock = " FOR UPDATE" if self.is_postgres else ""
            rows = self.run(
                cur, f'SELECT "NEXT_EVENT_ID" FROM "NOTIFICATION_SEQUENCE" WHERE "NNI_ID" = 1{lock}'
            )
            if not rows:
                raise WarehouseError("NOTIFICATION_SEQUENCE has no row: run `streamer warehouse init`")
            first = int(rows[0][0])
            tx = Tx(self, cur, first, first)
            yield tx
            if tx.next_event_id != first:
                self.run(
                    cur,
                    'UPDATE "NOTIFICATION_SEQUENCE" SET "NEXT_EVENT_ID" = ? WHERE "NNI_ID" = 1',
                    (tx.next_event_id,),
                )

    @contextmanager
    def _transaction(self, immediate: bool = False) -> Iterator[_Cursor]:
        if self.is_postgres:
            with self._conn.transaction(), self._conn.cursor() as cur:
                yield cur
            return
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        else:
            cur.execute("COMMIT")
        finally:
            cur.close()


def _masked(url: str) -> str:
    """The URL without its password, for error messages."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url
