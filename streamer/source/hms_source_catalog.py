"""``SourceCatalog`` over a real Hive Metastore: what a bootstrap dump of a Hive source reads.

Metadata through the metastore's Thrift API, data files by listing each location with fsspec (no
checksums: enrichment computes them). Objects dropped while being read raise ``Vanished``;
transactional tables are refused (Hive 2.x's Thrift API serves no committed write-id list).
"""

from __future__ import annotations

import logging
from typing import TypeVar

from streamer.events.model import (
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    TableSnapshot,
)
from streamer.hive.files import partition_name
from streamer.metastore.thrift_catalog import HmsCatalog
from streamer.metastore.transport import HmsAuth
from streamer.source.bootstrap import VIEW_TYPES, BootstrapError, Vanished
from streamer.source.listing import list_files as list_files  # re-exported

log = logging.getLogger(__name__)

T = TypeVar("T")


class UnsupportedSourceObjectError(BootstrapError):
    """The object cannot be dumped faithfully from this source."""


def _present(found: T | None, what: str) -> T:
    """``found``, or ``Vanished`` naming ``what`` when the metastore no longer has it."""
    if found is None:
        raise Vanished(what)
    return found


class HmsSourceCatalog:
    """Reads of a Hive Metastore (through ``HmsCatalog``) and of its tables' filesystems."""

    def __init__(self, catalog: HmsCatalog) -> None:
        self.hms = catalog

    @classmethod
    def connect(cls, uri: str, *, timeout_s: float = 60.0, auth: HmsAuth | None = None) -> HmsSourceCatalog:
        return cls(HmsCatalog(uri, timeout_s=timeout_s, auth=auth))

    def close(self) -> None:
        self.hms.close()

    def current_event_id(self) -> int:
        return self.hms.current_notification_event_id()

    def databases(self) -> list[str]:
        return self.hms.list_databases()

    def database(self, name: str) -> DatabaseSnapshot:
        return _present(self.hms.get_database(name), f"database {name}")

    def tables(self, db: str) -> list[str]:
        self.database(db)
        return self.hms.list_tables(db)

    def table(self, db: str, name: str) -> TableSnapshot:
        return _present(self.hms.get_table(db, name), f"table {db}.{name}")

    def partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        parts = self.hms.list_partitions(db, table)
        if not parts:
            self.table(db, table)  # none, or no table any more?
        return parts

    def files(self, db: str, table: str) -> list[FileRef]:
        t = self.table(db, table)
        if t.table_type in VIEW_TYPES:
            return []
        if not t.partition_keys:
            found = list_files(t.sd.location)
        else:
            keys = [k.name for k in t.partition_keys]
            found = []
            for part in self.partitions(db, table):
                found += list_files(part.sd.location or None, partition_name(keys, list(part.values)))
        if not found:
            self.table(db, table)  # an empty listing of a table dropped meanwhile is no table at all
        return found

    def write_ids(self, db: str, table: str) -> list[int]:
        raise UnsupportedSourceObjectError(
            f"transactional table {db}.{table}: its committed write ids cannot be read through the "
            "metastore's Hive 2.x Thrift API, so its files cannot be dumped consistently (a bootstrap or "
            "a policy change that includes it); exclude it from the policy (" + db + ".['.*'].['" + table
            + "']) and replicate it by other means (e.g. Hive's REPL DUMP) until streamer reads ACID "
            "tables over Thrift"
        )

    def functions(self, db: str) -> list[str]:
        self.database(db)
        return self.hms.list_functions(db)

    def function(self, db: str, name: str) -> FunctionSnapshot:
        return _present(self.hms.get_function(db, name), f"function {db}.{name}")

    def constraints(self, db: str, table: str) -> list[Constraint]:
        """Primary and foreign keys (the kinds Hive 2.x's API serves)."""
        return self.hms.get_constraints(db, table)

    def statistics(self, db: str, table: str) -> list[ColumnStatistic]:
        """Table-level column statistics of every column that has some."""
        t = self.table(db, table)
        columns = [c.name for c in t.sd.columns]
        if not columns:
            return []
        return self.hms.get_column_statistics(db, table, None, columns)

    def partition_statistics(self, db: str, table: str, partition_names: list[str]
                             ) -> dict[str, list[ColumnStatistic]]:
        """Column statistics of the named partitions (by Hive partition name), 100 partitions a call."""
        t = self.table(db, table)
        columns = [c.name for c in t.sd.columns]
        out: dict[str, list[ColumnStatistic]] = {}
        for start in range(0, len(partition_names), 100):
            chunk = partition_names[start : start + 100]
            out.update(self.hms.get_partitions_column_statistics(db, table, chunk, columns))
        return {k: v for k, v in out.items() if v}
