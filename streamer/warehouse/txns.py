"""Reads and writes of the warehouse's transaction state (``WH_TXNS``, ``WH_TXN_TO_WRITE_ID``,
``WH_NEXT_WRITE_ID``), modelled on Hive's TXNS / TXN_TO_WRITE_ID / NEXT_WRITE_ID tables.

Like :mod:`streamer.warehouse.catalog`, every function takes an executor, so the same code runs
inside a change (under the notification sequence lock, which serializes allocations) and in
committed reads. Transaction ids and each table's write ids are dense: ``MAX + 1`` and
``NWI_NEXT`` are only taken under that lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamer.events.model import TableSnapshot
from streamer.warehouse.catalog import Exec
from streamer.warehouse.errors import OpenWritesError, TxnStateError

OPEN = "o"
COMMITTED = "c"
ABORTED = "a"
STATE_NAMES = {OPEN: "open", COMMITTED: "committed", ABORTED: "aborted"}


@dataclass(frozen=True)
class TableWrite:
    """A table a transaction wrote, under which write id, and the next statement id to use."""

    db: str
    table: str
    write_id: int
    next_statement_id: int


def new_txn(ex: Exec, now: int) -> int:
    (last,) = ex('SELECT COALESCE(MAX("TXN_ID"), 0) FROM "WH_TXNS"', ())[0]
    txn_id = int(last) + 1
    ex(
        'INSERT INTO "WH_TXNS" ("TXN_ID", "TXN_STATE", "TXN_STARTED") VALUES (?, ?, ?)',
        (txn_id, OPEN, now),
    )
    return txn_id


def state(ex: Exec, txn_id: int) -> str | None:
    rows = ex('SELECT "TXN_STATE" FROM "WH_TXNS" WHERE "TXN_ID" = ?', (txn_id,))
    return str(rows[0][0]).strip() if rows else None


def require_open(ex: Exec, txn_id: int, action: str) -> None:
    found = state(ex, txn_id)
    if found != OPEN:
        raise TxnStateError(txn_id, STATE_NAMES.get(found or "", "unknown"), action)


def finish(ex: Exec, txn_id: int, new_state: str, now: int) -> None:
    ex(
        'UPDATE "WH_TXNS" SET "TXN_STATE" = ?, "TXN_FINISHED" = ? WHERE "TXN_ID" = ?',
        (new_state, now, txn_id),
    )


def txn_ids(ex: Exec, only_state: str | None = None) -> list[int]:
    if only_state is None:
        rows = ex('SELECT "TXN_ID" FROM "WH_TXNS" ORDER BY "TXN_ID"', ())
    else:
        rows = ex('SELECT "TXN_ID" FROM "WH_TXNS" WHERE "TXN_STATE" = ? ORDER BY "TXN_ID"', (only_state,))
    return [int(r[0]) for r in rows]


def table_write(ex: Exec, txn_id: int, db: str, table: str) -> TableWrite | None:
    rows = ex(
        'SELECT "T2W_WRITEID", "T2W_NEXT_STMT_ID" FROM "WH_TXN_TO_WRITE_ID"'
        ' WHERE "T2W_TXNID" = ? AND "T2W_DATABASE" = ? AND "T2W_TABLE" = ?',
        (txn_id, db, table),
    )
    return TableWrite(db, table, int(rows[0][0]), int(rows[0][1])) if rows else None


def allocate_write_id(ex: Exec, txn_id: int, db: str, table: str) -> int:
    """The table's next write id, now owned by ``txn_id`` (Hive's allocate_table_write_ids)."""
    rows = ex(
        'SELECT "NWI_NEXT" FROM "WH_NEXT_WRITE_ID" WHERE "NWI_DATABASE" = ? AND "NWI_TABLE" = ?', (db, table)
    )
    write_id = int(rows[0][0]) if rows else 1
    if rows:
        ex(
            'UPDATE "WH_NEXT_WRITE_ID" SET "NWI_NEXT" = ? WHERE "NWI_DATABASE" = ? AND "NWI_TABLE" = ?',
            (write_id + 1, db, table),
        )
    else:
        ex(
            'INSERT INTO "WH_NEXT_WRITE_ID" ("NWI_DATABASE", "NWI_TABLE", "NWI_NEXT") VALUES (?, ?, ?)',
            (db, table, write_id + 1),
        )
    ex(
        'INSERT INTO "WH_TXN_TO_WRITE_ID" ("T2W_TXNID", "T2W_DATABASE", "T2W_TABLE", "T2W_WRITEID",'
        ' "T2W_NEXT_STMT_ID") VALUES (?, ?, ?, ?, 0)',
        (txn_id, db, table, write_id),
    )
    return write_id


def take_statement_id(ex: Exec, write: TableWrite) -> int:
    ex(
        'UPDATE "WH_TXN_TO_WRITE_ID" SET "T2W_NEXT_STMT_ID" = ?'
        ' WHERE "T2W_DATABASE" = ? AND "T2W_TABLE" = ? AND "T2W_WRITEID" = ?',
        (write.next_statement_id + 1, write.db, write.table, write.write_id),
    )
    return write.next_statement_id


def writes_of(ex: Exec, txn_id: int) -> list[TableWrite]:
    rows = ex(
        'SELECT "T2W_DATABASE", "T2W_TABLE", "T2W_WRITEID", "T2W_NEXT_STMT_ID" FROM "WH_TXN_TO_WRITE_ID"'
        ' WHERE "T2W_TXNID" = ? ORDER BY "T2W_DATABASE", "T2W_TABLE"',
        (txn_id,),
    )
    return [TableWrite(str(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]


def write_ids(ex: Exec, db: str, table: str, in_state: str) -> list[int]:
    """The table's write ids whose transaction is in ``in_state``, ascending."""
    rows = ex(
        'SELECT w."T2W_WRITEID" FROM "WH_TXN_TO_WRITE_ID" w JOIN "WH_TXNS" t ON t."TXN_ID" = w."T2W_TXNID"'
        ' WHERE w."T2W_DATABASE" = ? AND w."T2W_TABLE" = ? AND t."TXN_STATE" = ? ORDER BY w."T2W_WRITEID"',
        (db, table, in_state),
    )
    return [int(r[0]) for r in rows]


def forget_table(ex: Exec, db: str, table: str) -> None:
    """A dropped table's write-id state goes with it: a new table of that name starts at 1 (as Hive)."""
    ex('DELETE FROM "WH_TXN_TO_WRITE_ID" WHERE "T2W_DATABASE" = ? AND "T2W_TABLE" = ?', (db, table))
    ex('DELETE FROM "WH_NEXT_WRITE_ID" WHERE "NWI_DATABASE" = ? AND "NWI_TABLE" = ?', (db, table))


def rename_table(ex: Exec, db: str, table: str, new_db: str, new_table: str) -> None:
    ex(
        'UPDATE "WH_TXN_TO_WRITE_ID" SET "T2W_DATABASE" = ?, "T2W_TABLE" = ?'
        ' WHERE "T2W_DATABASE" = ? AND "T2W_TABLE" = ?',
        (new_db, new_table, db, table),
    )
    ex(
        'UPDATE "WH_NEXT_WRITE_ID" SET "NWI_DATABASE" = ?, "NWI_TABLE" = ?'
        ' WHERE "NWI_DATABASE" = ? AND "NWI_TABLE" = ?',
        (new_db, new_table, db, table),
    )


def open_writers(ex: Exec, db: str, table: str) -> list[int]:
    """Open transactions that have written to the table."""
    rows = ex(
        'SELECT w."T2W_TXNID" FROM "WH_TXN_TO_WRITE_ID" w JOIN "WH_TXNS" t ON t."TXN_ID" = w."T2W_TXNID"'
        ' WHERE w."T2W_DATABASE" = ? AND w."T2W_TABLE" = ? AND t."TXN_STATE" = ? ORDER BY w."T2W_TXNID"',
        (db, table, OPEN),
    )
    return [int(r[0]) for r in rows]


def require_no_open_writes(ex: Exec, tbl: TableSnapshot, action: str) -> None:
    """Refuse ``action`` on a table that open transactions have written."""
    writers = open_writers(ex, tbl.db, tbl.name)
    if writers:
        raise OpenWritesError(tbl.qualified_name, writers, action)
