"""Reads and writes of the warehouse's own metadata tables (``WH_*``), one snapshot per row.

Every function takes an executor (an open change's ``Tx.execute`` or the store's committed
``query``), so the same code serves changes and verification reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streamer.events.model import DatabaseSnapshot, FunctionSnapshot, PartitionSnapshot, TableSnapshot
from streamer.warehouse.errors import AlreadyExistsError, NoSuchObjectError
from streamer.warehouse.objects import partition_name
from streamer.warehouse.snapshots import from_json, to_json

Exec = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


# --- config -----------------------------------------------------------------------------------


def get_config(ex: Exec) -> dict[str, str]:
    return {str(k): str(v) for k, v in ex('SELECT "KEY", "VALUE" FROM "WH_CONFIG"', ())}


def set_config(ex: Exec, key: str, value: str) -> None:
    ex('DELETE FROM "WH_CONFIG" WHERE "KEY" = ?', (key,))
    ex('INSERT INTO "WH_CONFIG" ("KEY", "VALUE") VALUES (?, ?)', (key, value))


# --- databases --------------------------------------------------------------------------------


def find_database(ex: Exec, name: str) -> DatabaseSnapshot | None:
    rows = ex('SELECT "SNAPSHOT" FROM "WH_DATABASES" WHERE "NAME" = ?', (name,))
    return from_json(DatabaseSnapshot, rows[0][0]) if rows else None


def get_database(ex: Exec, name: str) -> DatabaseSnapshot:
    db = find_database(ex, name)
    if db is None:
        raise NoSuchObjectError("database", name)
    return db


def database_names(ex: Exec) -> list[str]:
    return [str(r[0]) for r in ex('SELECT "NAME" FROM "WH_DATABASES" ORDER BY "NAME"', ())]


def insert_database(ex: Exec, db: DatabaseSnapshot) -> None:
    if find_database(ex, db.name) is not None:
        raise AlreadyExistsError("database", db.name)
    ex('INSERT INTO "WH_DATABASES" ("NAME", "SNAPSHOT") VALUES (?, ?)', (db.name, to_json(db)))


def update_database(ex: Exec, db: DatabaseSnapshot) -> None:
    ex('UPDATE "WH_DATABASES" SET "SNAPSHOT" = ? WHERE "NAME" = ?', (to_json(db), db.name))


def delete_database(ex: Exec, name: str) -> None:
    ex('DELETE FROM "WH_DATABASES" WHERE "NAME" = ?', (name,))


# --- tables -----------------------------------------------------------------------------------


def find_table(ex: Exec, db: str, name: str) -> TableSnapshot | None:
    rows = ex('SELECT "SNAPSHOT" FROM "WH_TABLES" WHERE "DB_NAME" = ? AND "TBL_NAME" = ?', (db, name))
    return from_json(TableSnapshot, rows[0][0]) if rows else None


def get_table(ex: Exec, db: str, name: str) -> TableSnapshot:
    get_database(ex, db)
    tbl = find_table(ex, db, name)
    if tbl is None:
        raise NoSuchObjectError("table", f"{db}.{name}")
    return tbl


def table_names(ex: Exec, db: str) -> list[str]:
    rows = ex('SELECT "TBL_NAME" FROM "WH_TABLES" WHERE "DB_NAME" = ? ORDER BY "TBL_NAME"', (db,))
    return [str(r[0]) for r in rows]


def list_tables(ex: Exec, db: str) -> list[TableSnapshot]:
    rows = ex('SELECT "SNAPSHOT" FROM "WH_TABLES" WHERE "DB_NAME" = ? ORDER BY "TBL_NAME"', (db,))
    return [from_json(TableSnapshot, r[0]) for r in rows]


def insert_table(ex: Exec, tbl: TableSnapshot) -> None:
    if find_table(ex, tbl.db, tbl.name) is not None:
        raise AlreadyExistsError("table", tbl.qualified_name)
    ex(
        'INSERT INTO "WH_TABLES" ("DB_NAME", "TBL_NAME", "SNAPSHOT") VALUES (?, ?, ?)',
        (tbl.db, tbl.name, to_json(tbl)),
    )


def update_table(ex: Exec, tbl: TableSnapshot) -> None:
    ex(
        'UPDATE "WH_TABLES" SET "SNAPSHOT" = ? WHERE "DB_NAME" = ? AND "TBL_NAME" = ?',
        (to_json(tbl), tbl.db, tbl.name),
    )


def delete_table(ex: Exec, db: str, name: str) -> None:
    ex('DELETE FROM "WH_PARTITIONS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ?', (db, name))
    ex('DELETE FROM "WH_TABLES" WHERE "DB_NAME" = ? AND "TBL_NAME" = ?', (db, name))


# --- partitions -------------------------------------------------------------------------------


def list_partitions(ex: Exec, db: str, table: str) -> list[PartitionSnapshot]:
    rows = ex(
        'SELECT "SNAPSHOT" FROM "WH_PARTITIONS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ? ORDER BY "PART_NAME"',
        (db, table),
    )
    return [from_json(PartitionSnapshot, r[0]) for r in rows]


def find_partition(ex: Exec, tbl: TableSnapshot, values: Sequence[str]) -> PartitionSnapshot | None:
    name = partition_name(tbl.partition_keys, values)
    rows = ex(
        'SELECT "SNAPSHOT" FROM "WH_PARTITIONS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ? AND "PART_NAME" = ?',
        (tbl.db, tbl.name, name),
    )
    return from_json(PartitionSnapshot, rows[0][0]) if rows else None


def put_partition(ex: Exec, tbl: TableSnapshot, part: PartitionSnapshot, *, new: bool) -> None:
    name = partition_name(tbl.partition_keys, part.values)
    if new:
        if find_partition(ex, tbl, part.values) is not None:
            raise AlreadyExistsError("partition", f"{tbl.qualified_name}/{name}")
        ex(
            'INSERT INTO "WH_PARTITIONS" ("DB_NAME", "TBL_NAME", "PART_NAME", "SNAPSHOT")'
            " VALUES (?, ?, ?, ?)",
            (tbl.db, tbl.name, name, to_json(part)),
        )
    else:
        ex(
            'UPDATE "WH_PARTITIONS" SET "SNAPSHOT" = ?'
            ' WHERE "DB_NAME" = ? AND "TBL_NAME" = ? AND "PART_NAME" = ?',
            (to_json(part), tbl.db, tbl.name, name),
        )


def delete_partition(ex: Exec, tbl: TableSnapshot, values: Sequence[str]) -> None:
    ex(
        'DELETE FROM "WH_PARTITIONS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ? AND "PART_NAME" = ?',
        (tbl.db, tbl.name, partition_name(tbl.partition_keys, values)),
    )


# --- functions --------------------------------------------------------------------------------


def find_function(ex: Exec, db: str, name: str) -> FunctionSnapshot | None:
    rows = ex('SELECT "SNAPSHOT" FROM "WH_FUNCTIONS" WHERE "DB_NAME" = ? AND "FUNC_NAME" = ?', (db, name))
    return from_json(FunctionSnapshot, rows[0][0]) if rows else None


def function_names(ex: Exec, db: str) -> list[str]:
    rows = ex('SELECT "FUNC_NAME" FROM "WH_FUNCTIONS" WHERE "DB_NAME" = ? ORDER BY "FUNC_NAME"', (db,))
    return [str(r[0]) for r in rows]


def insert_function(ex: Exec, fn: FunctionSnapshot) -> None:
    if find_function(ex, fn.db, fn.name) is not None:
        raise AlreadyExistsError("function", f"{fn.db}.{fn.name}")
    ex(
        'INSERT INTO "WH_FUNCTIONS" ("DB_NAME", "FUNC_NAME", "SNAPSHOT") VALUES (?, ?, ?)',
        (fn.db, fn.name, to_json(fn)),
    )


def delete_function(ex: Exec, db: str, name: str) -> None:
    ex('DELETE FROM "WH_FUNCTIONS" WHERE "DB_NAME" = ? AND "FUNC_NAME" = ?', (db, name))
