"""The target catalog behind a protocol, so the applier does not depend on one metastore client.

The Hive Metastore over Thrift is the production implementation (``streamer.metastore.thrift``); an
in-memory one (``streamer.metastore.memory``) serves pure tests of the planner and applier. Catalog
calls change metadata only: data files are the applier's business, so dropping a table here never
deletes files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from streamer.events.model import (
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FunctionSnapshot,
    PartitionSnapshot,
    TableSnapshot,
)

# Database parameter holding the last source event id applied to the database (as Hive's REPL LOAD).
LAST_ID_PARAM = "repl.last.id"
# Set on every database/table streamer creates, naming the source; foreign objects are never touched.
REPL_SOURCE_PARAM = "streamer.source.id"
# Present on a database while a micro-batch applies its events out of event-id order (``target run
# --coalesce-backlog``: streamer.target.apply.reorder): its tables may then show a state the source never
# had; readers treat the database as being written (read again) until the batch's marker write removes it.
# The value is the first event id of the batch that opened it.
FENCE_PARAM = "streamer.apply.fence"
# Marks a database as a replica (Hive's REPL LOAD sets the same key); ``streamer failover`` removes it.
REPL_TARGET_PARAM = "repl.target.for"
# Set by ``streamer failover``: the source event id the database was replicated through at the cut.
# The applier refuses to change a database that carries it (it is a primary now).
FAILOVER_CUT_PARAM = "repl.failover.cut"
FAILOVER_TIME_PARAM = "repl.failover.time"
# A failed-over primary's own record of its failover.
FAILOVER_PARAMS = (FAILOVER_CUT_PARAM, FAILOVER_TIME_PARAM)
# Hive's EnforceReadOnlyDatabaseHook refuses writes to a database with readonly=true (opt-in here).
READONLY_PARAM = "readonly"
# The bookkeeping of the stream a database belongs to. A source database can carry another stream's
# (a failed-over primary replicated back to its old source carries the forward stream's last id and
# its failover record); a replica never takes them from the source's snapshots: its own are set by
# its own applier, and a foreign repl.last.id or repl.failover.cut would make it skip or refuse events.
STREAM_PARAMS = (LAST_ID_PARAM, REPL_SOURCE_PARAM, REPL_TARGET_PARAM, FENCE_PARAM, *FAILOVER_PARAMS)


def source_params(params: Mapping[str, str]) -> dict[str, str]:
    """A source database's parameters without any stream's bookkeeping (``STREAM_PARAMS``)."""
    return {k: v for k, v in params.items() if k not in STREAM_PARAMS}


class Catalog(Protocol):
    """Metadata operations the applier needs. Missing objects are ``None``, never exceptions."""

    # databases
    def list_databases(self) -> list[str]: ...
    def get_database(self, name: str) -> DatabaseSnapshot | None: ...
    def create_database(self, db: DatabaseSnapshot) -> None: ...
    # exists=True: the caller read the database in this batch (no other writer since); the catalog
    # may then skip a check of its own that the database is there
    def alter_database(self, name: str, db: DatabaseSnapshot, *, exists: bool = False) -> None: ...
    def drop_database(self, name: str) -> None: ...

    # tables (alter_table with a different name/db in ``table`` is a rename)
    def list_tables(self, db: str) -> list[str]: ...
    def get_table(self, db: str, name: str) -> TableSnapshot | None: ...
    # those of ``names`` that exist, in one call (none when the database does not)
    def get_tables(self, db: str, names: list[str]) -> list[TableSnapshot]: ...
    def create_table(self, table: TableSnapshot) -> None: ...
    def alter_table(self, db: str, name: str, table: TableSnapshot) -> None: ...
    def drop_table(self, db: str, name: str) -> None: ...

    # partitions
    def list_partitions(self, db: str, table: str) -> list[PartitionSnapshot]: ...
    def get_partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None: ...
    def add_partitions(self, db: str, table: str, partitions: list[PartitionSnapshot]) -> None: ...
    def alter_partitions(self, db: str, table: str, partitions: list[PartitionSnapshot]) -> None: ...
    # keys: the table's partition key names when the caller knows them (spares the catalog a read)
    def drop_partitions(
        self, db: str, table: str, values: list[list[str]], keys: list[str] | None = None
    ) -> None: ...

    # functions
    def get_function(self, db: str, name: str) -> FunctionSnapshot | None: ...
    def create_function(self, function: FunctionSnapshot) -> None: ...
    def drop_function(self, db: str, name: str) -> None: ...

    # constraints and statistics
    def add_constraints(self, constraints: list[Constraint]) -> None: ...
    def drop_constraint(self, db: str, table: str, name: str) -> None: ...
    def update_column_statistics(
        self, db: str, table: str, partition_values: list[str] | None, stats: list[ColumnStatistic]
    ) -> None: ...
    def delete_column_statistics(
        self, db: str, table: str, partition_values: list[str] | None, column: str | None
    ) -> None: ...

    def close(self) -> None: ...
