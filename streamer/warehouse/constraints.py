"""Pure builders of table constraints as Hive stores them (one ``Constraint`` per column).

Hive declares primary and foreign keys ``DISABLE NOVALIDATE`` (it does not enforce them; ``RELY``
lets the optimizer trust them); UNIQUE, NOT NULL, DEFAULT and CHECK (Hive 3+) are per column,
DEFAULT and CHECK with a value. Validation here refuses what Hive refuses: unknown columns, a
foreign key whose columns do not match the referenced primary key.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamer.events.model import Constraint, EventType, TableSnapshot
from streamer.warehouse.errors import WarehouseError

PRIMARY_KEY = "PRIMARY_KEY"
FOREIGN_KEY = "FOREIGN_KEY"
UNIQUE = "UNIQUE"
NOT_NULL = "NOT_NULL"
DEFAULT = "DEFAULT"
CHECK = "CHECK"

EVENT_TYPES = {
    PRIMARY_KEY: EventType.ADD_PRIMARYKEY,
    FOREIGN_KEY: EventType.ADD_FOREIGNKEY,
    UNIQUE: EventType.ADD_UNIQUECONSTRAINT,
    NOT_NULL: EventType.ADD_NOTNULLCONSTRAINT,
    DEFAULT: EventType.ADD_DEFAULTCONSTRAINT,
    CHECK: EventType.ADD_CHECKCONSTRAINT,
}
CATALOG = "hive"


def _check_columns(tbl: TableSnapshot, columns: Sequence[str], name: str) -> list[str]:
    known = {c.name.lower() for c in [*tbl.sd.columns, *tbl.partition_keys]}
    wanted = [c.lower() for c in columns]
    if not wanted:
        raise WarehouseError(f"constraint {name} on {tbl.qualified_name} names no columns")
    unknown = [c for c in wanted if c not in known]
    if unknown or len(set(wanted)) != len(wanted):
        raise WarehouseError(
            f"constraint {name} on {tbl.qualified_name}: unknown or repeated columns {unknown or wanted}"
        )
    return wanted


def primary_key(
    tbl: TableSnapshot, name: str, columns: Sequence[str], *, rely: bool = False
) -> list[Constraint]:
    cols = _check_columns(tbl, columns, name)
    return [
        Constraint(
            PRIMARY_KEY,
            name,
            tbl.db,
            tbl.name,
            c,
            i,
            enabled=False,
            validated=False,
            rely=rely,
            catalog=CATALOG,
        )
        for i, c in enumerate(cols, 1)
    ]


def foreign_key(
    tbl: TableSnapshot,
    name: str,
    columns: Sequence[str],
    parent_key: Sequence[Constraint],
    *,
    rely: bool = False,
) -> list[Constraint]:
    """A foreign key of ``tbl`` referencing ``parent_key`` (the referenced table's primary key)."""
    cols = _check_columns(tbl, columns, name)
    if not parent_key or any(c.kind != PRIMARY_KEY for c in parent_key):
        raise WarehouseError(f"foreign key {name} on {tbl.qualified_name} must reference a primary key")
    parent = sorted(parent_key, key=lambda c: c.position)
    if len(parent) != len(cols):
        raise WarehouseError(
            f"foreign key {name} on {tbl.qualified_name} has {len(cols)} columns; "
            f"primary key {parent[0].name} has {len(parent)}"
        )
    return [
        Constraint(
            FOREIGN_KEY,
            name,
            tbl.db,
            tbl.name,
            c,
            i,
            ref_db=p.db,
            ref_table=p.table,
            ref_column=p.column,
            ref_name=p.name,
            update_rule=0,
            delete_rule=0,
            enabled=False,
            validated=False,
            rely=rely,
            catalog=CATALOG,
        )
        for i, (c, p) in enumerate(zip(cols, parent, strict=True), 1)
    ]


def column_constraint(
    kind: str, tbl: TableSnapshot, name: str, columns: Sequence[str], value: str | None = None
) -> list[Constraint]:
    """UNIQUE (any number of columns), NOT NULL, DEFAULT ``value`` or CHECK ``value`` (one column)."""
    if kind not in (UNIQUE, NOT_NULL, DEFAULT, CHECK):
        raise WarehouseError(f"unknown constraint kind {kind!r}")
    cols = _check_columns(tbl, columns, name)
    if kind != UNIQUE and len(cols) != 1:
        raise WarehouseError(f"{kind} constraint {name} on {tbl.qualified_name} takes one column")
    if (kind in (DEFAULT, CHECK)) != (value is not None):
        raise WarehouseError(
            f"{kind} constraint {name}: a value is {'required' if value is None else 'not allowed'}"
        )
    return [
        Constraint(
            kind,
            name,
            tbl.db,
            tbl.name,
            c,
            i,
            value=value,
            enabled=True,
            validated=False,
            rely=False,
            catalog=CATALOG,
        )
        for i, c in enumerate(cols, 1)
    ]
