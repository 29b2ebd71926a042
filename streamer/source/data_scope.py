"""Which tables' data files a bootstrap carries: all (the default), none (``--metadata-only``, Hive's
``hive.repl.dump.metadata.only``) or none of external tables (``--exclude-external-data``, Hive's
``hive.repl.include.external.tables=false``). Metadata, partitions, statistics and constraints
travel either way; what a target then has is in ``docs/bootstrap.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from streamer.events.model import TableSnapshot
from streamer.source.consolidate import Consolidated


@dataclass(frozen=True)
class DataScope:
    """What data a seed leaves out; the default leaves out nothing."""

    metadata_only: bool = False
    exclude_external_data: bool = False

    def withholds(self, table: TableSnapshot) -> bool:
        """Whether ``table``'s data files stay out of the dump."""
        return self.metadata_only or (self.exclude_external_data and is_external(table))

    def __str__(self) -> str:
        if self.metadata_only:
            return "metadata only"
        return "no external tables' data" if self.exclude_external_data else "all data"


ALL_DATA = DataScope()


def is_external(table: TableSnapshot) -> bool:
    """External as Hive decides it: the table type, or the ``EXTERNAL`` parameter."""
    return table.table_type == "EXTERNAL_TABLE" or table.parameters.get("EXTERNAL", "").upper() == "TRUE"


def withhold_data(state: Consolidated, scope: DataScope) -> Consolidated:
    """``state`` without the data files ``scope`` withholds (those listed and those its events
    added). Write ids stay: they are metadata, and the events after E1 continue from them. Pure."""
    tables = {}
    for key, dumped in state.dump.tables.items():
        if scope.withholds(dumped.table):
            dumped = dataclasses.replace(dumped.copy(), files={})
        tables[key] = dumped
    return dataclasses.replace(state, dump=dataclasses.replace(state.dump, tables=tables))
