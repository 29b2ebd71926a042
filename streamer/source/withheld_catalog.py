"""A ``SourceCatalog`` that does not list the files a seed withholds (``DataScope``): a metadata-only
dump of a large warehouse reads no directory listings at all."""

from __future__ import annotations

from streamer.events.model import (
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    TableSnapshot,
)
from streamer.source.bootstrap import SourceCatalog
from streamer.source.data_scope import DataScope


class WithheldFiles:
    """``source`` with an empty ``files`` for the tables ``scope`` withholds; everything else as is."""

    def __init__(self, source: SourceCatalog, scope: DataScope) -> None:
        self.source, self.scope = source, scope

    def files(self, db: str, table: str) -> list[FileRef]:
        if self.scope.metadata_only or self.scope.withholds(self.source.table(db, table)):
            return []
        return self.source.files(db, table)

    def current_event_id(self) -> int:
        return self.source.current_event_id()

    def databases(self) -> list[str]:
        return self.source.databases()

    def database(self, name: str) -> DatabaseSnapshot:
        return self.source.database(name)

    def tables(self, db: str) -> list[str]:
        return self.source.tables(db)

    def table(self, db: str, name: str) -> TableSnapshot:
        return self.source.table(db, name)

    def partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        return self.source.partitions(db, table)

    def write_ids(self, db: str, table: str) -> list[int]:
        return self.source.write_ids(db, table)

    def functions(self, db: str) -> list[str]:
        return self.source.functions(db)

    def function(self, db: str, name: str) -> FunctionSnapshot:
        return self.source.function(db, name)

    def constraints(self, db: str, table: str) -> list[Constraint]:
        return self.source.constraints(db, table)

    def statistics(self, db: str, table: str) -> list[ColumnStatistic]:
        return self.source.statistics(db, table)

    def partition_statistics(self, db: str, table: str, partition_names: list[str]
                             ) -> dict[str, list[ColumnStatistic]]:
        return self.source.partition_statistics(db, table, partition_names)
