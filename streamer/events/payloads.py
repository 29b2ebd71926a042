"""The typed payloads of events, one dataclass per kind of change, and their union ``Payload``.

Each says what changed, with full snapshots of the objects concerned; ``streamer.events.envelope``
maps every ``EventType`` to the payload it carries. Re-exported by ``streamer.events.model``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from streamer.events.snapshots import (
    AcidWrite,
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    PartitionStatistics,
    TableSnapshot,
    TxnWriteId,
)

__all__ = [
    "AbortTxnPayload", "AcidWritePayload", "AddConstraintsPayload", "AddPartitionPayload",
    "AllocWriteIdPayload", "AlterDatabasePayload", "AlterPartitionPayload", "AlterPartitionsPayload",
    "AlterTablePayload", "BootstrapKind", "BootstrapMarkerPayload", "BootstrapObjectPayload",
    "BootstrapScope", "CommitCompactionPayload", "CommitTxnPayload", "CreateFunctionPayload",
    "CreateTablePayload", "DatabasePayload", "DeleteColumnStatsPayload", "DropConstraintPayload",
    "DropFunctionPayload", "DropPartitionPayload", "DropTablePayload", "InsertPayload", "OpenTxnPayload",
    "Payload", "ProgressPayload", "ReloadPayload", "UnknownPayload", "UpdateColumnStatsPayload",
]


@dataclass(frozen=True)
class DatabasePayload:
    """CREATE_DATABASE and DROP_DATABASE (older Hive writes no snapshot on drop)."""

    database: DatabaseSnapshot | None = None


@dataclass(frozen=True)
class AlterDatabasePayload:
    before: DatabaseSnapshot
    after: DatabaseSnapshot


@dataclass(frozen=True)
class CreateTablePayload:
    table: TableSnapshot
    files: list[FileRef] = field(default_factory=list)


@dataclass(frozen=True)
class AlterTablePayload:
    """ALTER_TABLE, including renames (before/after names differ) and truncates."""

    before: TableSnapshot
    after: TableSnapshot
    is_truncate: bool = False
    write_id: int | None = None

    @property
    def is_rename(self) -> bool:
        return (self.before.db, self.before.name) != (self.after.db, self.after.name)


@dataclass(frozen=True)
class DropTablePayload:
    table: TableSnapshot | None = None


@dataclass(frozen=True)
class AddPartitionPayload:
    table: TableSnapshot | None
    partitions: list[PartitionSnapshot]
    files: list[FileRef] = field(default_factory=list)


@dataclass(frozen=True)
class AlterPartitionPayload:
    table: TableSnapshot | None
    before: PartitionSnapshot
    after: PartitionSnapshot
    is_truncate: bool = False
    write_id: int | None = None


@dataclass(frozen=True)
class AlterPartitionsPayload:
    table: TableSnapshot | None
    partitions: list[PartitionSnapshot]
    is_truncate: bool = False
    write_id: int | None = None


@dataclass(frozen=True)
class DropPartitionPayload:
    table: TableSnapshot | None
    partition_values: list[list[str]]  # each in the order of the table's partition keys


@dataclass(frozen=True)
class InsertPayload:
    """INSERT (``replace`` = INSERT OVERWRITE); ``partition_values`` is empty for unpartitioned tables.
    ``unlocated``: an INSERT logged without files whose object the source agent could not locate, so
    what it wrote is unknown (it may stand for an INSERT OVERWRITE); a target never applies it as an
    empty append. ``watch``: a replace the source agent made from its own listing of a directory whose
    writer logs nothing (``streamer.source.watch``), numbered 1, 2, ... among its records published
    after event ``event_id`` (the envelope's id is the last event the agent published before it); 0
    for an INSERT the source logged."""

    table: TableSnapshot | None
    partition: PartitionSnapshot | None
    partition_values: list[str]
    replace: bool
    files: list[FileRef] = field(default_factory=list)
    unlocated: bool = False
    watch: int = 0


@dataclass(frozen=True)
class CreateFunctionPayload:
    function: FunctionSnapshot


@dataclass(frozen=True)
class DropFunctionPayload:
    function_name: str


@dataclass(frozen=True)
class AddConstraintsPayload:
    constraints: list[Constraint]


@dataclass(frozen=True)
class DropConstraintPayload:
    db: str
    table: str
    constraint_name: str


@dataclass(frozen=True)
class OpenTxnPayload:
    txn_ids: list[int]


@dataclass(frozen=True)
class AllocWriteIdPayload:
    db: str
    table: str
    txn_write_ids: list[TxnWriteId]


@dataclass(frozen=True)
class AcidWritePayload:
    """ACID_WRITE_EVENT: files of one transaction's write, before its commit."""

    txn_id: int
    write: AcidWrite


@dataclass(frozen=True)
class CommitTxnPayload:
    """COMMIT_TXN with every write of the transaction (read from TXN_WRITE_NOTIFICATION_LOG)."""

    txn_id: int
    writes: list[AcidWrite] = field(default_factory=list)


@dataclass(frozen=True)
class AbortTxnPayload:
    txn_id: int
    databases: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class UpdateColumnStatsPayload:
    """UPDATE_TBL_COL_STAT_EVENT / UPDATE_PART_COL_STAT_EVENT."""

    db: str
    table: str
    statistics: list[ColumnStatistic]
    partition_values: list[str] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)
    write_id: int | None = None
    is_table_level: bool = True


@dataclass(frozen=True)
class DeleteColumnStatsPayload:
    db: str
    table: str
    column: str | None
    partition_name: str | None = None
    partition_values: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CommitCompactionPayload:
    """Recorded for completeness; targets compact on their own (as Hive's replication does)."""

    txn_id: int
    compaction_id: int | None = None
    compaction_type: str | None = None
    partition: str | None = None


@dataclass(frozen=True)
class ReloadPayload:
    table: TableSnapshot | None
    partitions: list[PartitionSnapshot] = field(default_factory=list)
    refresh: bool = False


@dataclass(frozen=True)
class ProgressPayload:
    """Written by the agent every batch: progress past filtered events, and the source's head for lag."""

    last_event_id: int
    source_head_event_id: int
    policy: str | None = None  # the agent's policies (``PolicySet`` text): a restart detects a change


@dataclass(frozen=True)
class UnknownPayload:
    """A source event of a type this streamer does not know, kept as Hive stored it.

    The agent publishes it instead of stopping (it halts only the database it names on each target)
    so that an operator sees exactly what the source wrote and a later streamer that knows the type
    can decode ``message`` (the stored text, UTF-8; gzip messages stay base64 text) and apply it.
    """

    hive_event_type: str  # NOTIFICATION_LOG.EVENT_TYPE as stored
    message: bytes = b""
    message_format: str | None = None
    catalog: str | None = None  # NOTIFICATION_LOG.CAT_NAME

    @property
    def text(self) -> str:
        """The message as text (undecodable bytes replaced), for operators' eyes."""
        return self.message.decode("utf-8", errors="replace")


class BootstrapKind(StrEnum):
    """What one bootstrap record carries."""

    DATABASE = "DATABASE"  # a database snapshot (first record of each database)
    TABLE = "TABLE"  # a table snapshot, its constraints, statistics and first partitions and files
    PARTITIONS = "PARTITIONS"  # more partitions (with their statistics) and files of the table named before
    FUNCTION = "FUNCTION"
    DROP_TABLE = "DROP_TABLE"  # a policy change excluded the table: targets drop it


class BootstrapScope(StrEnum):
    """FULL: whole databases for new targets; TABLES: a policy change adds or drops single tables."""

    FULL = "FULL"
    TABLES = "TABLES"


@dataclass(frozen=True)
class BootstrapObjectPayload:
    """One object of a bootstrap: the source state as of event ``bootstrap_id`` (E1).

    Records of one bootstrap share ``bootstrap_id`` (also the envelope's event id) and are numbered
    ``sequence`` 1..``total`` in topic order, so a target records the last one it applied and an
    interrupted bootstrap resumes without redoing finished objects.
    """

    bootstrap_id: int
    sequence: int
    total: int
    kind: BootstrapKind
    scope: BootstrapScope = BootstrapScope.FULL
    database: DatabaseSnapshot | None = None
    table: TableSnapshot | None = None
    partitions: list[PartitionSnapshot] = field(default_factory=list)
    files: list[FileRef] = field(default_factory=list)
    function: FunctionSnapshot | None = None
    constraints: list[Constraint] = field(default_factory=list)
    statistics: list[ColumnStatistic] = field(default_factory=list)
    write_ids: list[int] = field(default_factory=list)  # committed write ids of a transactional table
    # column statistics of this record's partitions (may be empty)
    partition_statistics: list[PartitionStatistics] = field(default_factory=list)


@dataclass(frozen=True)
class BootstrapMarkerPayload:
    """Ends a bootstrap: ``databases`` are now at ``bootstrap_id``; incremental events follow."""

    bootstrap_id: int
    records: int
    scope: BootstrapScope = BootstrapScope.FULL
    databases: list[str] = field(default_factory=list)
    policy: str | None = None


Payload = (
    DatabasePayload
    | AlterDatabasePayload
    | CreateTablePayload
    | AlterTablePayload
    | DropTablePayload
    | AddPartitionPayload
    | AlterPartitionPayload
    | AlterPartitionsPayload
    | DropPartitionPayload
    | InsertPayload
    | CreateFunctionPayload
    | DropFunctionPayload
    | AddConstraintsPayload
    | DropConstraintPayload
    | OpenTxnPayload
    | AllocWriteIdPayload
    | AcidWritePayload
    | CommitTxnPayload
    | AbortTxnPayload
    | UpdateColumnStatsPayload
    | DeleteColumnStatsPayload
    | CommitCompactionPayload
    | ReloadPayload
    | ProgressPayload
    | BootstrapObjectPayload
    | BootstrapMarkerPayload
    | UnknownPayload
)
