"""``HmsCatalog``'s functions and constraints, and the reads a Hive source's bootstrap needs.

Hive 2.3's API knows primary and foreign keys only; other constraint kinds are refused with
``CatalogUnsupportedError`` before anything is changed.
"""

from __future__ import annotations

from hmsclient.genthrift.hive_metastore import ttypes as tt

from streamer.events.model import Constraint, FunctionSnapshot
from streamer.metastore import convert
from streamer.metastore.thrift_calls import CatalogError, CatalogUnsupportedError
from streamer.metastore.thrift_tables import DatabaseTableCalls

_SUPPORTED_CONSTRAINTS = ("PRIMARY_KEY", "FOREIGN_KEY")


class FunctionConstraintCalls(DatabaseTableCalls):
    """The function and constraint operations of ``Catalog`` over Thrift, plus source-side reads."""

    # --- functions ----------------------------------------------------------------------

    def get_function(self, db: str, name: str) -> FunctionSnapshot | None:
        f = self._get(f"function {db}.{name}", lambda c: c.get_function(db, name))
        return None if f is None else convert.from_function(f)

    def create_function(self, function: FunctionSnapshot) -> None:
        obj = f"function {function.db}.{function.name}"
        try:
            thrift_fn = convert.to_function(function)
        except ValueError as exc:
            raise CatalogError(str(exc), obj=obj) from exc
        self._must(obj, lambda c: c.create_function(thrift_fn))

    def drop_function(self, db: str, name: str) -> None:
        self._drop(f"function {db}.{name}", lambda c: c.drop_function(db, name))

    # --- constraints --------------------------------------------------------------------

    def add_constraints(self, constraints: list[Constraint]) -> None:
        """Add primary and foreign keys (one call per kind); other kinds need Hive 3 and are refused
        before anything is changed."""
        for c in constraints:
            if c.kind not in _SUPPORTED_CONSTRAINTS:
                raise CatalogUnsupportedError(
                    f"{c.kind} constraints are not supported by this metastore (Hive 2.3)",
                    obj=f"{c.db}.{c.table} constraint {c.name}",
                )
        pks = [convert.to_primary_key(c) for c in constraints if c.kind == "PRIMARY_KEY"]
        fks_in = [c for c in constraints if c.kind == "FOREIGN_KEY"]
        try:
            fks = [convert.to_foreign_key(c) for c in fks_in]
        except ValueError as exc:
            raise CatalogError(str(exc), obj=f"{fks_in[0].db}.{fks_in[0].table}") from exc
        if pks:
            obj = f"{pks[0].table_db}.{pks[0].table_name} primary key {pks[0].pk_name}"
            self._must(obj, lambda c: c.add_primary_key(tt.AddPrimaryKeyRequest(primaryKeyCols=pks)))
        if fks:
            obj = f"{fks[0].fktable_db}.{fks[0].fktable_name} foreign key {fks[0].fk_name}"
            self._must(obj, lambda c: c.add_foreign_key(tt.AddForeignKeyRequest(foreignKeyCols=fks)))

    def drop_constraint(self, db: str, table: str, name: str) -> None:
        """Drop a primary or foreign key of ``db.table``; a missing one is left alone (Hive 2.3
        answers that with an internal error, so existence is checked first)."""
        if name.lower() not in {c.name.lower() for c in self.get_constraints(db, table)}:
            return
        request = tt.DropConstraintRequest(dbname=db, tablename=table, constraintname=name)
        self._drop(f"{db}.{table} constraint {name}", lambda c: c.drop_constraint(request))

    def get_constraints(self, db: str, table: str) -> list[Constraint]:
        """Primary keys of the table and the foreign keys declared on it (for checks and tests)."""
        obj = f"{db}.{table} constraints"
        pks = self._get(obj, lambda c: c.get_primary_keys(tt.PrimaryKeysRequest(db_name=db, tbl_name=table)))
        fks = self._get(
            obj,
            lambda c: c.get_foreign_keys(tt.ForeignKeysRequest(foreign_db_name=db, foreign_tbl_name=table)),
        )
        out = [convert.from_primary_key(k) for k in (pks.primaryKeys if pks else None) or []]
        out += [convert.from_foreign_key(k) for k in (fks.foreignKeys if fks else None) or []]
        return out

    # --- source-side reads (bootstrap from a Hive source: streamer.source.hms_source_catalog) ----

    def current_notification_event_id(self) -> int:
        """The metastore's newest notification event id (0 when its log is empty)."""
        answer = self._call("notification log", lambda c: c.get_current_notificationEventId())
        return int(answer.eventId or 0)

    def list_functions(self, db: str) -> list[str]:
        """Names of the database's functions ([] when the database is missing)."""
        if self.get_database(db) is None:
            return []
        return list(self._call(f"{db} functions", lambda c: c.get_functions(db, "*")) or [])
