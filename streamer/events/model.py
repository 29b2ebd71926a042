"""The event contract: one envelope for every change a source makes, with typed payloads.

These frozen dataclasses are what every part of streamer speaks: the Hive decoder produces them, the
agent enriches and publishes them (Avro, see ``schemas/``), the target plans and applies them. The
envelope follows Debezium: a ``source`` block says where and when the change happened; the payload
says what changed, carrying full object snapshots so a target never has to ask the source (which
would show it a later state than the event's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class EventType(StrEnum):
    """Event types as a Hive metastore stores them in ``NOTIFICATION_LOG.EVENT_TYPE``.

    The values are the stored strings, which differ from Hive's enum names for some types
    (``ALLOC_WRITE_ID_EVENT``...). Types prefixed ``STREAMER_`` are streamer's own records.
    """

    CREATE_DATABASE = "CREATE_DATABASE"
    ALTER_DATABASE = "ALTER_DATABASE"
    DROP_DATABASE = "DROP_DATABASE"
    CREATE_TABLE = "CREATE_TABLE"
    ALTER_TABLE = "ALTER_TABLE"
    DROP_TABLE = "DROP_TABLE"
    ADD_PARTITION = "ADD_PARTITION"
    ALTER_PARTITION = "ALTER_PARTITION"
    ALTER_PARTITIONS = "ALTER_PARTITIONS"
    DROP_PARTITION = "DROP_PARTITION"
    INSERT = "INSERT"
    CREATE_FUNCTION = "CREATE_FUNCTION"
    DROP_FUNCTION = "DROP_FUNCTION"
    ADD_PRIMARYKEY = "ADD_PRIMARYKEY"
    ADD_FOREIGNKEY = "ADD_FOREIGNKEY"
    ADD_UNIQUECONSTRAINT = "ADD_UNIQUECONSTRAINT"
    ADD_NOTNULLCONSTRAINT = "ADD_NOTNULLCONSTRAINT"
    ADD_DEFAULTCONSTRAINT = "ADD_DEFAULTCONSTRAINT"
    ADD_CHECKCONSTRAINT = "ADD_CHECKCONSTRAINT"
    DROP_CONSTRAINT = "DROP_CONSTRAINT"
    OPEN_TXN = "OPEN_TXN"
    COMMIT_TXN = "COMMIT_TXN"
    ABORT_TXN = "ABORT_TXN"
    ALLOC_WRITE_ID = "ALLOC_WRITE_ID_EVENT"
    ACID_WRITE = "ACID_WRITE_EVENT"
    UPDATE_TABLE_COLUMN_STAT = "UPDATE_TBL_COL_STAT_EVENT"
    DELETE_TABLE_COLUMN_STAT = "DELETE_TBL_COL_STAT_EVENT"
    UPDATE_PARTITION_COLUMN_STAT = "UPDATE_PART_COL_STAT_EVENT"
    DELETE_PARTITION_COLUMN_STAT = "DELETE_PART_COL_STAT_EVENT"
    COMMIT_COMPACTION = "COMMIT_COMPACTION_EVENT"
    RELOAD = "RELOAD"
    # streamer's own records (not in any Hive log)
    PROGRESS = "STREAMER_PROGRESS"
    BOOTSTRAP = "STREAMER_BOOTSTRAP"
    BOOTSTRAP_END = "STREAMER_BOOTSTRAP_END"
    # a source event of a type this streamer does not know, carried opaquely (``UnknownPayload``)
    UNKNOWN = "STREAMER_UNKNOWN"


# --- object snapshots -------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    comment: str | None = None


@dataclass(frozen=True)
class SerDe:
    name: str | None = None
    serialization_lib: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SortColumn:
    column: str
    order: int  # Hive: 1 ascending, 0 descending


@dataclass(frozen=True)
class StorageDescriptor:
    """Where and how data is stored; shared by tables and partitions."""

    location: str | None = None
    columns: list[Column] = field(default_factory=list)
    input_format: str | None = None
    output_format: str | None = None
    compressed: bool = False
    num_buckets: int = -1
    serde: SerDe = field(default_factory=SerDe)
    bucket_columns: list[str] = field(default_factory=list)
    sort_columns: list[SortColumn] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)
    stored_as_subdirectories: bool = False


@dataclass(frozen=True)
class DatabaseSnapshot:
    name: str
    description: str | None = None
    location: str | None = None
    managed_location: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    owner_name: str | None = None
    owner_type: int | None = None  # Hive PrincipalType: 1 USER, 2 ROLE, 3 GROUP
    catalog: str | None = None
    create_time: int | None = None


@dataclass(frozen=True)
class TableSnapshot:
    name: str
    db: str
    table_type: str = "MANAGED_TABLE"  # MANAGED_TABLE, EXTERNAL_TABLE, VIRTUAL_VIEW, MATERIALIZED_VIEW
    sd: StorageDescriptor = field(default_factory=StorageDescriptor)
    partition_keys: list[Column] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)
    owner: str | None = None
    owner_type: int | None = None
    create_time: int | None = None
    last_access_time: int | None = None
    retention: int | None = None
    view_original_text: str | None = None
    view_expanded_text: str | None = None
    temporary: bool = False
    rewrite_enabled: bool = False
    catalog: str | None = None
    write_id: int | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def is_transactional(self) -> bool:
        return self.parameters.get("transactional", "").lower() == "true"


@dataclass(frozen=True)
class PartitionSnapshot:
    values: list[str]
    db: str | None = None
    table: str | None = None
    sd: StorageDescriptor = field(default_factory=StorageDescriptor)
    parameters: dict[str, str] = field(default_factory=dict)
    create_time: int | None = None
    last_access_time: int | None = None
    catalog: str | None = None
    write_id: int | None = None


@dataclass(frozen=True)
class ResourceUri:
    resource_type: str  # JAR, FILE, ARCHIVE
    uri: str


@dataclass(frozen=True)
class FunctionSnapshot:
    name: str
    db: str
    class_name: str
    owner_name: str | None = None
    owner_type: int | None = None
    create_time: int | None = None
    function_type: int = 1  # Hive FunctionType: 1 JAVA
    resource_uris: list[ResourceUri] = field(default_factory=list)
    catalog: str | None = None


@dataclass(frozen=True)
class FileRef:
    """A data file named by an event, with what a target needs to copy it point-in-time.

    ``checksum`` is computed by ``checksum_algorithm`` on the source filesystem; ``cm_uri`` is the
    change manager's retained copy, used when the file at ``uri`` changed or vanished.
    ``partition`` is the Hive partition name (``k=v/k2=v2``) the file belongs to, if any.
    """

    uri: str
    checksum: str | None = None
    checksum_algorithm: str | None = None
    cm_uri: str | None = None
    subdir: str | None = None
    size: int | None = None
    partition: str | None = None


@dataclass(frozen=True)
class Constraint:
    """One column of a table constraint (Hive's SQLPrimaryKey, SQLForeignKey, ... flattened)."""

    kind: str  # PRIMARY_KEY, FOREIGN_KEY, UNIQUE, NOT_NULL, DEFAULT, CHECK
    name: str
    db: str
    table: str
    column: str
    position: int = 1
    ref_db: str | None = None  # foreign keys: the primary-key side
    ref_table: str | None = None
    ref_column: str | None = None
    ref_name: str | None = None
    update_rule: int | None = None
    delete_rule: int | None = None
    value: str | None = None  # DEFAULT value or CHECK expression
    enabled: bool = True
    validated: bool = False
    rely: bool = False
    catalog: str | None = None


@dataclass(frozen=True)
class ColumnStatistic:
    """Statistics of one column; numeric bounds are kept as text so every Hive type fits."""

    column: str
    type: str
    kind: str  # BOOLEAN, LONG, DOUBLE, STRING, BINARY, DECIMAL, DATE, TIMESTAMP
    num_nulls: int | None = None
    num_distinct: int | None = None
    low_value: str | None = None
    high_value: str | None = None
    avg_length: float | None = None
    max_length: int | None = None
    num_trues: int | None = None
    num_falses: int | None = None
    bit_vectors: bytes | None = None


@dataclass(frozen=True)
class PartitionStatistics:
    """Column statistics of one partition (values in the order of the table's partition keys)."""

    values: list[str]
    statistics: list[ColumnStatistic] = field(default_factory=list)


@dataclass(frozen=True)
class TxnWriteId:
    txn_id: int
    write_id: int


@dataclass(frozen=True)
class AcidWrite:
    """The files one transaction wrote into one table (or partition) under one write id."""

    db: str
    table: str
    write_id: int
    files: list[FileRef] = field(default_factory=list)
    partition: str | None = None  # Hive partition name, None for unpartitioned tables
    table_snapshot: TableSnapshot | None = None
    partition_snapshot: PartitionSnapshot | None = None


# --- payloads ---------------------------------------------------------------------------------


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
    """INSERT (``replace`` = INSERT OVERWRITE); ``partition_values`` is empty for unpartitioned tables."""

    table: TableSnapshot | None
    partition: PartitionSnapshot | None
    partition_values: list[str]
    replace: bool
    files: list[FileRef] = field(default_factory=list)


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
    # column statistics of this record's partitions (records written before it existed carry none)
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


# --- envelope ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where and when a change happened (Debezium's ``source`` block)."""

    source_id: str
    event_id: int
    event_time: int  # seconds since the epoch, as NOTIFICATION_LOG.EVENT_TIME
    message_format: str | None = None  # the Hive message format the event was decoded from
    catalog: str | None = None


@dataclass(frozen=True)
class Event:
    """One source change. ``db``/``table`` name the object the change is keyed by.

    For renames they are the *new* names (as NOTIFICATION_LOG stores them); the payload's
    before/after snapshots carry both. ``ts_ms`` is when streamer processed the event, so
    ``ts_ms - event_time*1000`` is the lag at that point. ``prev_event_id`` is the event id of the
    record before this one in the topic, so a consumer can tell that it missed none.
    """

    source: Source
    event_type: EventType
    payload: Payload
    db: str | None = None
    table: str | None = None
    ts_ms: int | None = None
    # None in records written before streamer kept the chain (``streamer.target.state.chain``)
    prev_event_id: int | None = None

    @property
    def event_id(self) -> int:
        return self.source.event_id


PAYLOAD_TYPES: tuple[type, ...] = Payload.__args__


PAYLOAD_EVENT_TYPES: dict[type, tuple[EventType, ...]] = {
    DatabasePayload: (EventType.CREATE_DATABASE, EventType.DROP_DATABASE),
    AlterDatabasePayload: (EventType.ALTER_DATABASE,),
    CreateTablePayload: (EventType.CREATE_TABLE,),
    AlterTablePayload: (EventType.ALTER_TABLE,),
    DropTablePayload: (EventType.DROP_TABLE,),
    AddPartitionPayload: (EventType.ADD_PARTITION,),
    AlterPartitionPayload: (EventType.ALTER_PARTITION,),
    AlterPartitionsPayload: (EventType.ALTER_PARTITIONS,),
    DropPartitionPayload: (EventType.DROP_PARTITION,),
    InsertPayload: (EventType.INSERT,),
    CreateFunctionPayload: (EventType.CREATE_FUNCTION,),
    DropFunctionPayload: (EventType.DROP_FUNCTION,),
    AddConstraintsPayload: (
        EventType.ADD_PRIMARYKEY,
        EventType.ADD_FOREIGNKEY,
        EventType.ADD_UNIQUECONSTRAINT,
        EventType.ADD_NOTNULLCONSTRAINT,
        EventType.ADD_DEFAULTCONSTRAINT,
        EventType.ADD_CHECKCONSTRAINT,
    ),
    DropConstraintPayload: (EventType.DROP_CONSTRAINT,),
    OpenTxnPayload: (EventType.OPEN_TXN,),
    AllocWriteIdPayload: (EventType.ALLOC_WRITE_ID,),
    AcidWritePayload: (EventType.ACID_WRITE,),
    CommitTxnPayload: (EventType.COMMIT_TXN,),
    AbortTxnPayload: (EventType.ABORT_TXN,),
    UpdateColumnStatsPayload: (EventType.UPDATE_TABLE_COLUMN_STAT, EventType.UPDATE_PARTITION_COLUMN_STAT),
    DeleteColumnStatsPayload: (EventType.DELETE_TABLE_COLUMN_STAT, EventType.DELETE_PARTITION_COLUMN_STAT),
    CommitCompactionPayload: (EventType.COMMIT_COMPACTION,),
    ReloadPayload: (EventType.RELOAD,),
    ProgressPayload: (EventType.PROGRESS,),
    BootstrapObjectPayload: (EventType.BOOTSTRAP,),
    BootstrapMarkerPayload: (EventType.BOOTSTRAP_END,),
    UnknownPayload: (EventType.UNKNOWN,),
}
"""The event types that carry each payload type (every EventType appears exactly once)."""

PAYLOAD_TYPE_OF: dict[EventType, type] = {t: p for p, types in PAYLOAD_EVENT_TYPES.items() for t in types}
