"""Reads and writes of what hangs off a table besides partitions: constraints and column statistics.

Like :mod:`streamer.warehouse.catalog`, every function takes an executor, so changes and
verification reads share the code. Dropping or renaming a table carries these along
(:func:`forget_table`, :func:`rename_table`), as Hive's metastore does.
"""

from __future__ import annotations

from dataclasses import replace

from streamer.events.model import ColumnStatistic, Constraint, TableSnapshot
from streamer.warehouse.catalog import Exec, get_table
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.objects import VIEW
from streamer.warehouse.snapshots import from_json, to_json

TABLE_LEVEL = ""  # PART_NAME of table-level column statistics


def owner_table(ex: Exec, db: str, table: str) -> TableSnapshot:
    """The table whose constraints or statistics are meant; a view has none."""
    tbl = get_table(ex, db.lower(), table.lower())
    if tbl.table_type == VIEW:
        raise WarehouseError(f"{tbl.qualified_name} is a view: it has no constraints or statistics")
    return tbl


# --- constraints ------------------------------------------------------------------------------


def constraint_exists(ex: Exec, name: str) -> bool:
    rows = ex('SELECT 1 FROM "WH_CONSTRAINTS" WHERE "CONSTRAINT_NAME" = ?', (name,))
    return bool(rows)


def insert_constraints(ex: Exec, constraints: list[Constraint]) -> None:
    for c in constraints:
        ex(
            'INSERT INTO "WH_CONSTRAINTS" ("CONSTRAINT_NAME", "POSITION", "DB_NAME", "TBL_NAME", "SNAPSHOT")'
            " VALUES (?, ?, ?, ?, ?)",
            (c.name, c.position, c.db, c.table, to_json(c)),
        )


def constraints_of(ex: Exec, db: str, table: str) -> list[Constraint]:
    """Constraints declared on ``db.table`` ordered by name and position."""
    rows = ex(
        'SELECT "SNAPSHOT" FROM "WH_CONSTRAINTS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ?'
        ' ORDER BY "CONSTRAINT_NAME", "POSITION"',
        (db, table),
    )
    return [from_json(Constraint, r[0]) for r in rows]


def referencing(ex: Exec, db: str, table: str) -> list[Constraint]:
    """Foreign keys of other tables that reference ``db.table``."""
    rows = ex('SELECT "SNAPSHOT" FROM "WH_CONSTRAINTS" ORDER BY "CONSTRAINT_NAME", "POSITION"', ())
    found = [from_json(Constraint, r[0]) for r in rows]
    return [c for c in found if c.ref_db == db and c.ref_table == table and (c.db, c.table) != (db, table)]


def delete_constraint(ex: Exec, db: str, table: str, name: str) -> int:
    """Delete a constraint of ``db.table``; returns how many column rows went."""
    where = ' WHERE "CONSTRAINT_NAME" = ? AND "DB_NAME" = ? AND "TBL_NAME" = ?'
    found = ex('SELECT COUNT(*) FROM "WH_CONSTRAINTS"' + where, (name, db, table))
    ex('DELETE FROM "WH_CONSTRAINTS"' + where, (name, db, table))
    return int(found[0][0])


# --- column statistics ------------------------------------------------------------------------


def put_statistics(ex: Exec, db: str, table: str, part: str, stats: list[ColumnStatistic]) -> None:
    for s in stats:
        ex(
            'DELETE FROM "WH_COLUMN_STATS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ? AND "PART_NAME" = ?'
            ' AND "COLUMN_NAME" = ?',
            (db, table, part, s.column),
        )
        ex(
            'INSERT INTO "WH_COLUMN_STATS" ("DB_NAME", "TBL_NAME", "PART_NAME", "COLUMN_NAME", "SNAPSHOT")'
            " VALUES (?, ?, ?, ?, ?)",
            (db, table, part, s.column, to_json(s)),
        )


def statistics_of(ex: Exec, db: str, table: str, part: str = TABLE_LEVEL) -> list[ColumnStatistic]:
    """Stored statistics of the table (``part`` '') or one partition, ordered by column name."""
    rows = ex(
        'SELECT "SNAPSHOT" FROM "WH_COLUMN_STATS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ? AND "PART_NAME" = ?'
        ' ORDER BY "COLUMN_NAME"',
        (db, table, part),
    )
    return [from_json(ColumnStatistic, r[0]) for r in rows]


def delete_statistics(ex: Exec, db: str, table: str, part: str, column: str) -> None:
    ex(
        'DELETE FROM "WH_COLUMN_STATS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ? AND "PART_NAME" = ?'
        ' AND "COLUMN_NAME" = ?',
        (db, table, part, column),
    )


def forget_partition(ex: Exec, db: str, table: str, part: str) -> None:
    ex(
        'DELETE FROM "WH_COLUMN_STATS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ? AND "PART_NAME" = ?',
        (db, table, part),
    )


# --- table lifecycle --------------------------------------------------------------------------


def forget_table(ex: Exec, db: str, table: str) -> None:
    """A dropped table takes its constraints and statistics with it."""
    ex('DELETE FROM "WH_CONSTRAINTS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ?', (db, table))
    ex('DELETE FROM "WH_COLUMN_STATS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ?', (db, table))


def rename_table(ex: Exec, db: str, table: str, new_db: str, new_table: str) -> None:
    """A renamed table keeps its constraints and statistics; foreign keys follow the new name."""
    own = constraints_of(ex, db, table)
    refs = referencing(ex, db, table)
    ex('DELETE FROM "WH_CONSTRAINTS" WHERE "DB_NAME" = ? AND "TBL_NAME" = ?', (db, table))
    for c in refs:
        delete_constraint(ex, c.db, c.table, c.name)
    moved = [_renamed(c, db, table, new_db, new_table) for c in own]
    insert_constraints(ex, moved + [_renamed(c, db, table, new_db, new_table) for c in refs])
    ex(
        'UPDATE "WH_COLUMN_STATS" SET "DB_NAME" = ?, "TBL_NAME" = ? WHERE "DB_NAME" = ? AND "TBL_NAME" = ?',
        (new_db, new_table, db, table),
    )


def _renamed(c: Constraint, db: str, table: str, new_db: str, new_table: str) -> Constraint:
    if (c.db, c.table) == (db, table):
        c = replace(c, db=new_db, table=new_table)
    if (c.ref_db, c.ref_table) == (db, table):
        c = replace(c, ref_db=new_db, ref_table=new_table)
    return c
