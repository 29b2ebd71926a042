"""``HmsCatalog``'s partitions and column statistics (table- and partition-level).

Partitions are added, altered and dropped in batches, each batch in one metastore transaction.
Statistics the Hive 2.3 API cannot store raise ``CatalogUnsupportedError``.
"""

from __future__ import annotations

from typing import Any

from hmsclient.genthrift.hive_metastore import ttypes as tt

from streamer.events.model import ColumnStatistic, PartitionSnapshot
from streamer.hive.files import partition_name
from streamer.metastore import convert
from streamer.metastore.thrift_calls import KEEP_STATS, CatalogError, CatalogUnsupportedError
from streamer.metastore.thrift_tables import DatabaseTableCalls


class PartitionCalls(DatabaseTableCalls):
    """The partition and column-statistics operations of ``Catalog`` over Thrift."""

    # --- partitions ---------------------------------------------------------------------

    def list_partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        parts = self._get(f"{db}.{table}", lambda c: c.get_partitions(db, table, -1))
        return [convert.from_partition(p) for p in parts or []]

    def get_partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None:
        obj = f"{db}.{table} partition {values}"
        p = self._get(obj, lambda c: c.get_partition(db, table, list(values)))
        return None if p is None else convert.from_partition(p)

    def add_partitions(self, db: str, table: str, partitions: list[PartitionSnapshot]) -> None:
        """Add all partitions in one metastore transaction (all or none become visible)."""
        if not partitions:
            return
        parts = [convert.to_partition(p, db, table) for p in partitions]
        obj = f"{db}.{table} partitions {[p.values for p in partitions]}"
        # The plain Thrift call: hmsclient's wrapper overrides add_partition, not add_partitions.
        self._must(obj, lambda c: c.add_partitions(parts))

    def alter_partitions(self, db: str, table: str, partitions: list[PartitionSnapshot]) -> None:
        if not partitions:
            return
        parts = [convert.to_partition(p, db, table) for p in partitions]
        obj = f"{db}.{table} partitions {[p.values for p in partitions]}"
        self._must(obj, lambda c: c.alter_partitions_with_environment_context(db, table, parts, KEEP_STATS))

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
        self._drop(f"{db}.{table} partitions {values}", lambda c: c.drop_partitions_req(request))

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
        self, db: str, table: str, partition_values: list[str] | None, stats: list[ColumnStatistic]
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
            self._must(obj, lambda c: c.update_table_column_statistics(col_stats))
        else:
            self._must(obj, lambda c: c.update_partition_column_statistics(col_stats))

    def delete_column_statistics(
        self, db: str, table: str, partition_values: list[str] | None, column: str | None
    ) -> None:
        """Delete one column's statistics, or every column's when ``column`` is None."""
        if partition_values is None:
            obj = f"{db}.{table} column statistics"
            self._drop(obj, lambda c: c.delete_table_column_statistics(db, table, column))
            return
        part = self._part_name(db, table, partition_values)
        obj = f"{db}.{table} partition {part} column statistics"
        self._drop(obj, lambda c: c.delete_partition_column_statistics(db, table, part, column))

    def get_column_statistics(
        self, db: str, table: str, partition_values: list[str] | None, columns: list[str]
    ) -> list[ColumnStatistic]:
        """Statistics stored for ``columns`` (missing ones are simply absent)."""
        if partition_values is None:
            obj = f"{db}.{table} column statistics"
            req: Any = tt.TableStatsRequest(dbName=db, tblName=table, colNames=list(columns))
            res = self._get(obj, lambda c: c.get_table_statistics_req(req))
            return [convert.from_stats_obj(o) for o in (res.tableStats if res else None) or []]
        part = self._part_name(db, table, partition_values)
        obj = f"{db}.{table} partition {part} column statistics"
        req = tt.PartitionsStatsRequest(dbName=db, tblName=table, colNames=list(columns), partNames=[part])
        res2 = self._get(obj, lambda c: c.get_partitions_statistics_req(req))
        found = (res2.partStats if res2 else None) or {}
        return [convert.from_stats_obj(o) for o in found.get(part, [])]

    def get_partitions_column_statistics(
        self, db: str, table: str, partition_names: list[str], columns: list[str]
    ) -> dict[str, list[ColumnStatistic]]:
        """Stored column statistics of several partitions (by Hive partition name; absent ones are
        missing from the answer), in one call."""
        if not partition_names or not columns:
            return {}
        obj = f"{db}.{table} partition column statistics"
        req = tt.PartitionsStatsRequest(
            dbName=db, tblName=table, colNames=list(columns), partNames=list(partition_names)
        )
        res = self._get(obj, lambda c: c.get_partitions_statistics_req(req))
        found = (res.partStats if res else None) or {}
        return {name: [convert.from_stats_obj(o) for o in objs or []] for name, objs in found.items()}
