"""The target catalog on a Hive Metastore, over Thrift (``hmsclient``'s generated Hive 2.x client).

``HmsCatalog`` is the one class implementing ``Catalog`` here: it holds one ``ThriftConnection``
(``connection``: reconnect once, error mapping) and turns snapshots into Thrift objects and back
through ``convert``. Hive 2.3's API knows primary and foreign keys only; other constraint kinds are
refused with ``CatalogUnsupportedError`` before anything is changed, as are statistics it cannot
store. Partitions are added, altered and dropped in batches, each batch in one metastore
transaction. What the metastore changes on its own: docs/design/metastore.md.
"""

from __future__ import annotations

from typing import Any, Self

from hmsclient.genthrift.hive_metastore import ttypes as tt

from streamer.events import model as ev
from streamer.hive import fields
from streamer.hive.files import partition_name
from streamer.metastore.thrift import convert
from streamer.metastore.thrift.connection import (
    KEEP_STATS,
    CatalogError,
    CatalogUnsupportedError,
    ThriftConnection,
)
from streamer.metastore.transport import HmsAuth

_SUPPORTED_CONSTRAINTS = ("PRIMARY_KEY", "FOREIGN_KEY")


class HmsCatalog:
    """``Catalog`` on a Hive Metastore at ``uri`` (``thrift://host:port``); connects on creation.

    ``auth`` chooses plain Thrift (default) or SASL/GSSAPI (Kerberos), see ``streamer.metastore.transport``.
    Missing objects read as ``None``, dropping a missing object does nothing, and every other
    metastore error is a ``CatalogError`` naming the object. Besides ``Catalog`` it has the reads a
    Hive source's bootstrap needs (``streamer.source.hms_source_catalog``); ``conn`` serves calls of
    its own (transactions: ``ThriftTxns``; the API probe: ``streamer.source.hive_version``).
    """

    def __init__(self, uri: str, *, timeout_s: float = 60.0, auth: HmsAuth | None = None) -> None:
        self.conn = ThriftConnection(uri, timeout_s=timeout_s, auth=auth)

    @property
    def uri(self) -> str:
        return self.conn.uri

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # --- databases ----------------------------------------------------------------------

    def list_databases(self) -> list[str]:
        return list(self.conn.call("databases", lambda c: c.get_all_databases()))

    def get_database(self, name: str) -> ev.DatabaseSnapshot | None:
        db = self.conn.get(name, lambda c: c.get_database(name))
        return None if db is None else convert.from_thrift(fields.DATABASE, db)

    def create_database(self, db: ev.DatabaseSnapshot) -> None:
        self.conn.call(db.name, lambda c: c.create_database(convert.to_thrift(fields.DATABASE, db)))

    def alter_database(self, name: str, db: ev.DatabaseSnapshot, *, exists: bool = False) -> None:
        if not exists and self.get_database(name) is None:  # Hive 2.3 silently ignores a missing one
            raise CatalogError("does not exist on the target", obj=name)
        self.conn.must(name, lambda c: c.alter_database(name, convert.to_thrift(fields.DATABASE, db)))

    def drop_database(self, name: str) -> None:
        """Drop with everything left in it (the source had emptied it); never deletes files."""
        if self.get_database(name) is None:  # Hive 2.3 answers a missing one with an NPE
            return
        self.conn.drop(name, lambda c: c.drop_database(name, False, True))

    # --- tables -------------------------------------------------------------------------

    def list_tables(self, db: str) -> list[str]:
        if self.get_database(db) is None:
            return []
        return list(self.conn.call(db, lambda c: c.get_all_tables(db)))

    def get_table(self, db: str, name: str) -> ev.TableSnapshot | None:
        t = self.conn.get(f"{db}.{name}", lambda c: c.get_table(db, name))
        return None if t is None else convert.from_thrift(fields.TABLE, t)

    def get_tables(self, db: str, names: list[str]) -> list[ev.TableSnapshot]:
        """Those of ``names`` that exist, one round trip (Hive's ``get_table_objects_by_name``)."""
        if not names:
            return []
        try:
            found = self.conn.get(db, lambda c: c.get_table_objects_by_name(db, names))
        except CatalogError:  # Hive 2.3 declares no exception for it: a missing database is "unknown result"
            if self.get_database(db) is None:
                return []
            raise
        return [convert.from_thrift(fields.TABLE, t) for t in found or []]

    def create_table(self, table: ev.TableSnapshot) -> None:
        thrift_table = convert.to_thrift(fields.TABLE, table)
        self.conn.must(
            table.qualified_name, lambda c: c.create_table_with_environment_context(thrift_table, KEEP_STATS)
        )

    def alter_table(self, db: str, name: str, table: ev.TableSnapshot) -> None:
        """Replace the table's definition; a different db/name in ``table`` renames it."""
        obj = f"{db}.{name}"
        if (db, name) != (table.db, table.name):
            obj += f" -> {table.qualified_name}"
        new = convert.to_thrift(fields.TABLE, table)
        self.conn.must(obj, lambda c: c.alter_table_with_environment_context(db, name, new, KEEP_STATS))

    def drop_table(self, db: str, name: str) -> None:
        """Drop the table's metadata; its files stay (they are the applier's business)."""
        self.conn.drop(f"{db}.{name}", lambda c: c.drop_table(db, name, False))

    # --- functions ----------------------------------------------------------------------

    def get_function(self, db: str, name: str) -> ev.FunctionSnapshot | None:
        f = self.conn.get(f"function {db}.{name}", lambda c: c.get_function(db, name))
        return None if f is None else convert.from_thrift(fields.FUNCTION, f)

    def create_function(self, function: ev.FunctionSnapshot) -> None:
        obj = f"function {function.db}.{function.name}"
        try:
            thrift_fn = convert.to_thrift(fields.FUNCTION, function)
        except ValueError as exc:
            raise CatalogError(str(exc), obj=obj) from exc
        self.conn.must(obj, lambda c: c.create_function(thrift_fn))

    def drop_function(self, db: str, name: str) -> None:
        self.conn.drop(f"function {db}.{name}", lambda c: c.drop_function(db, name))

    # --- constraints --------------------------------------------------------------------

    def add_constraints(self, constraints: list[ev.Constraint]) -> None:
        """Add primary and foreign keys (one call per kind); other kinds need Hive 3 and are refused
        before anything is changed."""
        for c in constraints:
            if c.kind not in _SUPPORTED_CONSTRAINTS:
                raise CatalogUnsupportedError(
                    f"{c.kind} constraints are not supported by this metastore (Hive 2.3)",
                    obj=f"{c.db}.{c.table} constraint {c.name}",
                )
        pks = [convert.to_thrift(fields.SQL_PRIMARY_KEY, c) for c in constraints if c.kind == "PRIMARY_KEY"]
        fks_in = [c for c in constraints if c.kind == "FOREIGN_KEY"]
        try:
            fks = [convert.to_foreign_key(c) for c in fks_in]
        except ValueError as exc:
            raise CatalogError(str(exc), obj=f"{fks_in[0].db}.{fks_in[0].table}") from exc
        if pks:
            obj = f"{pks[0].table_db}.{pks[0].table_name} primary key {pks[0].pk_name}"
            self.conn.must(obj, lambda c: c.add_primary_key(tt.AddPrimaryKeyRequest(primaryKeyCols=pks)))
        if fks:
            obj = f"{fks[0].fktable_db}.{fks[0].fktable_name} foreign key {fks[0].fk_name}"
            self.conn.must(obj, lambda c: c.add_foreign_key(tt.AddForeignKeyRequest(foreignKeyCols=fks)))

    def drop_constraint(self, db: str, table: str, name: str) -> None:
        """Drop a primary or foreign key of ``db.table``; a missing one is left alone (Hive 2.3
        answers that with an internal error, so existence is checked first)."""
        if name.lower() not in {c.name.lower() for c in self.get_constraints(db, table)}:
            return
        request = tt.DropConstraintRequest(dbname=db, tablename=table, constraintname=name)
        self.conn.drop(f"{db}.{table} constraint {name}", lambda c: c.drop_constraint(request))

    def get_constraints(self, db: str, table: str) -> list[ev.Constraint]:
        """Primary keys of the table and the foreign keys declared on it (for checks and tests)."""
        obj = f"{db}.{table} constraints"
        pk_request = tt.PrimaryKeysRequest(db_name=db, tbl_name=table)
        pks = self.conn.get(obj, lambda c: c.get_primary_keys(pk_request))
        fks = self.conn.get(
            obj,
            lambda c: c.get_foreign_keys(tt.ForeignKeysRequest(foreign_db_name=db, foreign_tbl_name=table)),
        )
        out = [convert.from_thrift(fields.SQL_PRIMARY_KEY, k) for k in (pks and pks.primaryKeys) or []]
        out += [convert.from_thrift(fields.SQL_FOREIGN_KEY, k) for k in (fks and fks.foreignKeys) or []]
        return out

    # --- source-side reads (bootstrap from a Hive source: streamer.source.hms_source_catalog) ----

    def current_notification_event_id(self) -> int:
        """The metastore's newest notification event id (0 when its log is empty)."""
        answer = self.conn.call("notification log", lambda c: c.get_current_notificationEventId())
        return int(answer.eventId or 0)

    def list_functions(self, db: str) -> list[str]:
        """Names of the database's functions ([] when the database is missing)."""
        if self.get_database(db) is None:
            return []
        return list(self.conn.call(f"{db} functions", lambda c: c.get_functions(db, "*")) or [])

    # --- partitions ---------------------------------------------------------------------

    def list_partitions(self, db: str, table: str) -> list[ev.PartitionSnapshot]:
        parts = self.conn.get(f"{db}.{table}", lambda c: c.get_partitions(db, table, -1))
        return [convert.from_thrift(fields.PARTITION, p) for p in parts or []]

    def get_partition(self, db: str, table: str, values: list[str]) -> ev.PartitionSnapshot | None:
        obj = f"{db}.{table} partition {values}"
        p = self.conn.get(obj, lambda c: c.get_partition(db, table, list(values)))
        return None if p is None else convert.from_thrift(fields.PARTITION, p)

    def add_partitions(self, db: str, table: str, partitions: list[ev.PartitionSnapshot]) -> None:
        """Add all partitions in one metastore transaction (all or none become visible)."""
        if not partitions:
            return
        parts = [convert.to_partition(p, db, table) for p in partitions]
        obj = f"{db}.{table} partitions {[p.values for p in partitions]}"
        # The plain Thrift call: hmsclient's wrapper overrides add_partition, not add_partitions.
        self.conn.must(obj, lambda c: c.add_partitions(parts))

    def alter_partitions(self, db: str, table: str, partitions: list[ev.PartitionSnapshot]) -> None:
        if not partitions:
            return
        parts = [convert.to_partition(p, db, table) for p in partitions]
        obj = f"{db}.{table} partitions {[p.values for p in partitions]}"
        self.conn.must(
            obj, lambda c: c.alter_partitions_with_environment_context(db, table, parts, KEEP_STATS)
        )

    def drop_partitions(
        self, db: str, table: str, values: list[list[str]], keys: list[str] | None = None
    ) -> None:
        """Drop the partitions that exist, in one metastore transaction; files stay. ``keys`` (the
        table's partition key names, when the caller read the table) spares a ``get_table``."""
        if not values:
            return
        if keys is None:
            t = self.get_table(db, table)
            if t is None:
                return
            keys = [k.name for k in t.partition_keys]
        names = [partition_name(keys, v) for v in values]
        request = tt.DropPartitionsRequest(
            dbName=db,
            tblName=table,
            parts=tt.RequestPartsSpec(names=names),
            deleteData=False,
            ifExists=True,
            needResult=False,
        )
        self.conn.drop(f"{db}.{table} partitions {values}", lambda c: c.drop_partitions_req(request))

    # --- column statistics --------------------------------------------------------------

    def _part_name(self, db: str, table: str, values: list[str]) -> str:
        t = self.get_table(db, table)
        if t is None:
            raise CatalogError("does not exist on the target", obj=f"{db}.{table}")
        try:
            return partition_name([k.name for k in t.partition_keys], values)
        except ValueError as exc:
            raise CatalogError(str(exc), obj=f"{db}.{table}") from exc

    def update_column_statistics(
        self, db: str, table: str, partition_values: list[str] | None, stats: list[ev.ColumnStatistic]
    ) -> None:
        if not stats:
            return
        part = None if partition_values is None else self._part_name(db, table, partition_values)
        obj = f"{db}.{table}" + (f" partition {part}" if part else "") + " column statistics"
        try:
            col_stats = convert.to_column_statistics(db, table, part, stats)
        except convert.UnsupportedStatisticError as exc:
            raise CatalogUnsupportedError(str(exc), obj=obj) from exc
        except ValueError as exc:
            raise CatalogError(str(exc), obj=obj) from exc
        if part is None:
            self.conn.must(obj, lambda c: c.update_table_column_statistics(col_stats))
        else:
            self.conn.must(obj, lambda c: c.update_partition_column_statistics(col_stats))

    def delete_column_statistics(
        self, db: str, table: str, partition_values: list[str] | None, column: str | None
    ) -> None:
        """Delete one column's statistics, or every column's when ``column`` is None."""
        if partition_values is None:
            obj = f"{db}.{table} column statistics"
            self.conn.drop(obj, lambda c: c.delete_table_column_statistics(db, table, column))
            return
        part = self._part_name(db, table, partition_values)
        obj = f"{db}.{table} partition {part} column statistics"
        self.conn.drop(obj, lambda c: c.delete_partition_column_statistics(db, table, part, column))

    def get_column_statistics(
        self, db: str, table: str, partition_values: list[str] | None, columns: list[str]
    ) -> list[ev.ColumnStatistic]:
        """Statistics stored for ``columns`` (missing ones are simply absent)."""
        if partition_values is None:
            obj = f"{db}.{table} column statistics"
            req: Any = tt.TableStatsRequest(dbName=db, tblName=table, colNames=list(columns))
            res = self.conn.get(obj, lambda c: c.get_table_statistics_req(req))
            return [convert.from_stats_obj(o) for o in (res.tableStats if res else None) or []]
        part = self._part_name(db, table, partition_values)
        obj = f"{db}.{table} partition {part} column statistics"
        req = tt.PartitionsStatsRequest(dbName=db, tblName=table, colNames=list(columns), partNames=[part])
        res2 = self.conn.get(obj, lambda c: c.get_partitions_statistics_req(req))
        found = (res2.partStats if res2 else None) or {}
        return [convert.from_stats_obj(o) for o in found.get(part, [])]

    def get_partitions_column_statistics(
        self, db: str, table: str, partition_names: list[str], columns: list[str]
    ) -> dict[str, list[ev.ColumnStatistic]]:
        """Stored column statistics of several partitions (by Hive partition name; absent ones are
        missing from the answer), in one call."""
        if not partition_names or not columns:
            return {}
        obj = f"{db}.{table} partition column statistics"
        req = tt.PartitionsStatsRequest(
            dbName=db, tblName=table, colNames=list(columns), partNames=list(partition_names)
        )
        res = self.conn.get(obj, lambda c: c.get_partitions_statistics_req(req))
        found = (res.partStats if res else None) or {}
        return {name: [convert.from_stats_obj(o) for o in objs or []] for name, objs in found.items()}
