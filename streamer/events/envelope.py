"""The event envelope: ``EventType``, the ``Source`` block and ``Event``, and which payload each type carries.

The envelope follows Debezium: ``source`` says where and when the change happened, the payload what
changed. Re-exported by ``streamer.events.model``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streamer.events.payloads import (
    AbortTxnPayload,
    AcidWritePayload,
    AddConstraintsPayload,
    AddPartitionPayload,
    AllocWriteIdPayload,
    AlterDatabasePayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    CommitCompactionPayload,
    CommitTxnPayload,
    CreateFunctionPayload,
    CreateTablePayload,
    DatabasePayload,
    DeleteColumnStatsPayload,
    DropConstraintPayload,
    DropFunctionPayload,
    DropPartitionPayload,
    DropTablePayload,
    InsertPayload,
    OpenTxnPayload,
    Payload,
    ProgressPayload,
    ReloadPayload,
    UnknownPayload,
    UpdateColumnStatsPayload,
)


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
    # None when the record names no predecessor (``streamer.target.state.chain`` accepts it as is)
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
