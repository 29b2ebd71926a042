"""Test helper: a metastore database holding only Hive's notification tables, on any backend.

The DDL follows Hive's metastore schema scripts (3.1/4.0 columns; ``cat_name=False`` gives Hive
2.3's table without CAT_NAME). Rows are written as the listener writes them, including
NOTIFICATION_SEQUENCE, so readers see what a real metastore database holds.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from streamer.events.model import TableSnapshot
from streamer.hive import fields
from streamer.hive.notification import NotificationRow
from streamer.hive.objects import to_tjson

PG_URL = "postgresql://127.0.0.1:5432/test"
MYSQL_HOST = "127.0.0.1"


def _ddl(q: str, text: str, cat_name: bool, key_charset: str = "") -> list[str]:
    cat = f"{q}CAT_NAME{q} VARCHAR(256), " if cat_name else ""
    return [
        f"CREATE TABLE {q}NOTIFICATION_LOG{q} ({q}NL_ID{q} BIGINT NOT NULL, {q}EVENT_ID{q} BIGINT NOT NULL, "
        f"{q}EVENT_TIME{q} INTEGER NOT NULL, {q}EVENT_TYPE{q} VARCHAR(32) NOT NULL, {cat}"
        f"{q}DB_NAME{q} VARCHAR(128), {q}TBL_NAME{q} VARCHAR(256), {q}MESSAGE{q} {text}, "
        f"{q}MESSAGE_FORMAT{q} VARCHAR(16), PRIMARY KEY ({q}NL_ID{q}))",
        f"CREATE TABLE {q}NOTIFICATION_SEQUENCE{q} ({q}NNI_ID{q} BIGINT NOT NULL, "
        f"{q}NEXT_EVENT_ID{q} BIGINT NOT NULL, PRIMARY KEY ({q}NNI_ID{q}))",
        f"INSERT INTO {q}NOTIFICATION_SEQUENCE{q} ({q}NNI_ID{q}, {q}NEXT_EVENT_ID{q}) VALUES (1, 1)",
        f"CREATE TABLE {q}TXN_WRITE_NOTIFICATION_LOG{q} ({q}WNL_ID{q} BIGINT NOT NULL, "
        f"{q}WNL_TXNID{q} BIGINT NOT NULL, {q}WNL_WRITEID{q} BIGINT NOT NULL, "
        f"{q}WNL_DATABASE{q} VARCHAR(128) NOT NULL, {q}WNL_TABLE{q} VARCHAR(128) NOT NULL, "
        f"{q}WNL_PARTITION{q} VARCHAR(767) NOT NULL, {q}WNL_TABLE_OBJ{q} {text} NOT NULL, "
        f"{q}WNL_PARTITION_OBJ{q} {text}, {q}WNL_FILES{q} {text}, {q}WNL_EVENT_TIME{q} INTEGER NOT NULL, "
        f"PRIMARY KEY ({q}WNL_TXNID{q}, {q}WNL_DATABASE{q}, {q}WNL_TABLE{q}, {q}WNL_PARTITION{q}))"
        + key_charset,
    ]


@dataclass
class LogDb:
    """A connection to a notification database plus the URL a reader uses to reach it."""

    url: str
    conn: Any
    quote: str
    param: str
    cat_name: bool = True

    def execute(self, sql: str, params: tuple[object, ...] = ()) -> None:
        cur = self.conn.cursor()
        cur.execute(sql.replace("`", self.quote).replace("?", self.param), params)
        cur.close()

    def add(self, event_id: int, event_type: str = "CREATE_TABLE", db: str | None = "sales",
            table: str | None = "t", message: str = "{}", fmt: str = "json-0.2") -> NotificationRow:
        """Write one NOTIFICATION_LOG row (NL_ID = EVENT_ID) and advance the sequence past it."""
        cols = ("`NL_ID`, `EVENT_ID`, `EVENT_TIME`, `EVENT_TYPE`, `DB_NAME`, `TBL_NAME`, `MESSAGE`, "
                "`MESSAGE_FORMAT`")
        values: tuple[object, ...] = (event_id, event_id, 1700000000 + event_id, event_type, db, table,
                                      message, fmt)
        if self.cat_name:
            cols += ", `CAT_NAME`"
            values += ("hive",)
        marks = ", ".join("?" * len(values))
        self.execute(f"INSERT INTO `NOTIFICATION_LOG` ({cols}) VALUES ({marks})", values)
        self.execute("UPDATE `NOTIFICATION_SEQUENCE` SET `NEXT_EVENT_ID` = ? WHERE `NEXT_EVENT_ID` <= ?",
                     (event_id + 1, event_id))
        return NotificationRow(event_id, 1700000000 + event_id, event_type, message, fmt, db, table,
                               "hive" if self.cat_name else None)

    def delete(self, first: int, last: int) -> None:
        self.execute("DELETE FROM `NOTIFICATION_LOG` WHERE `EVENT_ID` BETWEEN ? AND ?", (first, last))

    def add_write(self, txn_id: int, write_id: int, db: str, table: str, files: str,
                  partition: str = "") -> None:
        self.execute(
            "INSERT INTO `TXN_WRITE_NOTIFICATION_LOG` (`WNL_ID`, `WNL_TXNID`, `WNL_WRITEID`, "
            "`WNL_DATABASE`, `WNL_TABLE`, `WNL_PARTITION`, `WNL_TABLE_OBJ`, `WNL_PARTITION_OBJ`, "
            "`WNL_FILES`, `WNL_EVENT_TIME`) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (txn_id * 1000 + write_id, txn_id, write_id, db, table, partition,
             to_tjson(fields.TABLE, TableSnapshot(table, db)), None, files, 1700000000),
        )


@contextlib.contextmanager
def sqlite_logdb(path: str, cat_name: bool = True) -> Iterator[LogDb]:
    conn = sqlite3.connect(path, isolation_level=None)
    for stmt in _ddl('"', "TEXT", cat_name):
        conn.execute(stmt)
    try:
        yield LogDb(f"sqlite:///{path}" if path.startswith("/") else path, conn, '"', "?", cat_name)
    finally:
        conn.close()


@contextlib.contextmanager
def postgres_logdb(cat_name: bool = True) -> Iterator[LogDb]:
    """A fresh schema in the local test database (trust auth); the URL pins its search_path."""
    import psycopg

    schema = f"nl_{uuid.uuid4().hex[:12]}"
    conn = psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)
    conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        conn.execute(f'SET search_path TO "{schema}"')
        for stmt in _ddl('"', "TEXT", cat_name):
            conn.execute(stmt)
        yield LogDb(f"{PG_URL}?options=-csearch_path%3D{schema}", conn, '"', "%s", cat_name)
    finally:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.close()


@contextlib.contextmanager
def mysql_logdb(cat_name: bool = True) -> Iterator[LogDb]:
    """A fresh database on the local MariaDB/MySQL server (root, no password)."""
    import pymysql

    name = f"nl_{uuid.uuid4().hex[:12]}"
    conn = pymysql.connect(host=MYSQL_HOST, user="root", database="test", autocommit=True, connect_timeout=3)
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    try:
        cur.execute(f"USE `{name}`")
        # Hive's MySQL script makes this table latin1: its 4-column key is too long in utf8mb4
        for stmt in _ddl("`", "LONGTEXT", cat_name, " DEFAULT CHARSET=latin1"):
            cur.execute(stmt)
        yield LogDb(f"mysql://root@{MYSQL_HOST}:3306/{name}", conn, "`", "%s", cat_name)
    finally:
        cur.execute(f"DROP DATABASE `{name}`")
        conn.close()
