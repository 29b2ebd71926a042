"""Constraint changes of the warehouse: ``ADD_PRIMARYKEY`` ... ``ADD_CHECKCONSTRAINT`` and
``DROP_CONSTRAINT`` events, as a Hive 3/4 metastore writes them."""

from __future__ import annotations

from collections.abc import Sequence

import streamer.warehouse.constraints as cons
import streamer.warehouse.tablemeta as tablemeta
from streamer.events.model import AddConstraintsPayload, Constraint, DropConstraintPayload, EventType
from streamer.warehouse.change import Change
from streamer.warehouse.core import WarehouseCore
from streamer.warehouse.errors import AlreadyExistsError, NoSuchObjectError, WarehouseError


class ConstraintOps(WarehouseCore):
    """Constraints of the warehouse's tables: one change and one event each."""

    def add_primary_key(
        self, db: str, table: str, name: str, columns: Sequence[str], *, rely: bool = False
    ) -> list[Constraint]:
        with self._change() as ch:
            tbl = tablemeta.owner_table(ch.ex, db, table)
            if any(c.kind == cons.PRIMARY_KEY for c in tablemeta.constraints_of(ch.ex, tbl.db, tbl.name)):
                raise WarehouseError(f"table {tbl.qualified_name} has a primary key already")
            return _add(ch, cons.primary_key(tbl, name, columns, rely=rely))

    def add_foreign_key(
        self,
        db: str,
        table: str,
        name: str,
        columns: Sequence[str],
        ref_table: str,
        ref_db: str | None = None,
        *,
        rely: bool = False,
    ) -> list[Constraint]:
        """A foreign key of ``db.table`` referencing the primary key of ``ref_db.ref_table``."""
        with self._change() as ch:
            tbl = tablemeta.owner_table(ch.ex, db, table)
            parent = tablemeta.owner_table(ch.ex, ref_db or db, ref_table)
            pk = [
                c
                for c in tablemeta.constraints_of(ch.ex, parent.db, parent.name)
                if c.kind == cons.PRIMARY_KEY
            ]
            if not pk:
                raise WarehouseError(f"foreign key {name}: {parent.qualified_name} has no primary key")
            return _add(ch, cons.foreign_key(tbl, name, columns, pk, rely=rely))

    def add_unique(self, db: str, table: str, name: str, columns: Sequence[str]) -> list[Constraint]:
        return self._add_column_constraint(cons.UNIQUE, db, table, name, columns, None)

    def add_not_null(self, db: str, table: str, name: str, column: str) -> list[Constraint]:
        return self._add_column_constraint(cons.NOT_NULL, db, table, name, [column], None)

    def add_default(self, db: str, table: str, name: str, column: str, value: str) -> list[Constraint]:
        return self._add_column_constraint(cons.DEFAULT, db, table, name, [column], value)

    def add_check(self, db: str, table: str, name: str, column: str, expression: str) -> list[Constraint]:
        return self._add_column_constraint(cons.CHECK, db, table, name, [column], expression)

    def _add_column_constraint(
        self, kind: str, db: str, table: str, name: str, columns: Sequence[str], value: str | None
    ) -> list[Constraint]:
        with self._change() as ch:
            tbl = tablemeta.owner_table(ch.ex, db, table)
            return _add(ch, cons.column_constraint(kind, tbl, name, columns, value))

    def drop_constraint(self, db: str, table: str, name: str) -> int:
        """Drop a constraint; a primary key still referenced by a foreign key is refused (as Hive)."""
        with self._change() as ch:
            tbl = tablemeta.owner_table(ch.ex, db, table)
            own = [c for c in tablemeta.constraints_of(ch.ex, tbl.db, tbl.name) if c.name == name]
            if not own:
                raise NoSuchObjectError("constraint", f"{tbl.qualified_name}.{name}")
            users = [c.name for c in tablemeta.referencing(ch.ex, tbl.db, tbl.name) if c.ref_name == name]
            if users:
                raise WarehouseError(f"cannot drop {name}: foreign keys {sorted(set(users))} reference it")
            tablemeta.delete_constraint(ch.ex, tbl.db, tbl.name, name)
            return ch.emit(
                EventType.DROP_CONSTRAINT, DropConstraintPayload(tbl.db, tbl.name, name), tbl.db, tbl.name
            )

    def constraints(self, db: str, table: str) -> list[Constraint]:
        return tablemeta.constraints_of(self._query, db.lower(), table.lower())


def _add(ch: Change, added: list[Constraint]) -> list[Constraint]:
    """Store the constraint(s) and emit their event; a foreign key's is keyed by the referenced table."""
    first = added[0]
    if tablemeta.constraint_exists(ch.ex, first.name):
        raise AlreadyExistsError("constraint", first.name)
    tablemeta.insert_constraints(ch.ex, added)
    db, table = (first.ref_db, first.ref_table) if first.kind == cons.FOREIGN_KEY else (first.db, first.table)
    ch.emit(cons.EVENT_TYPES[first.kind], AddConstraintsPayload(added), db, table)
    return added
