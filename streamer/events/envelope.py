"""The event envelope: ``EventType``, the ``Source`` block and ``Event``, and which payload each type carries.

The envelope follows Debezium: ``source`` says where and when the change happened, the payload what
changed. Re-exported by ``streamer.events.model``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streamer.events import payloads as p

__all__ = ["PAYLOAD_EVENT_TYPES", "PAYLOAD_TYPES", "PAYLOAD_TYPE_OF", "Event", "EventType", "Source"]


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
    payload: p.Payload
    db: str | None = None
    table: str | None = None
    ts_ms: int | None = None
    # None when the record names no predecessor (``streamer.target.state.chain`` accepts it as is)
    prev_event_id: int | None = None

    @property
    def event_id(self) -> int:
        return self.source.event_id


PAYLOAD_TYPES: tuple[type, ...] = p.Payload.__args__


PAYLOAD_EVENT_TYPES: dict[type, tuple[EventType, ...]] = {
    p.DatabasePayload: (EventType.CREATE_DATABASE, EventType.DROP_DATABASE),
    p.AlterDatabasePayload: (EventType.ALTER_DATABASE,),
    p.CreateTablePayload: (EventType.CREATE_TABLE,),
    p.AlterTablePayload: (EventType.ALTER_TABLE,),
    p.DropTablePayload: (EventType.DROP_TABLE,),
    p.AddPartitionPayload: (EventType.ADD_PARTITION,),
    p.AlterPartitionPayload: (EventType.ALTER_PARTITION,),
    p.AlterPartitionsPayload: (EventType.ALTER_PARTITIONS,),
    p.DropPartitionPayload: (EventType.DROP_PARTITION,),
    p.InsertPayload: (EventType.INSERT,),
    p.CreateFunctionPayload: (EventType.CREATE_FUNCTION,),
    p.DropFunctionPayload: (EventType.DROP_FUNCTION,),
    p.AddConstraintsPayload: (
        EventType.ADD_PRIMARYKEY,
        EventType.ADD_FOREIGNKEY,
        EventType.ADD_UNIQUECONSTRAINT,
        EventType.ADD_NOTNULLCONSTRAINT,
        EventType.ADD_DEFAULTCONSTRAINT,
        EventType.ADD_CHECKCONSTRAINT,
    ),
    p.DropConstraintPayload: (EventType.DROP_CONSTRAINT,),
    p.OpenTxnPayload: (EventType.OPEN_TXN,),
    p.AllocWriteIdPayload: (EventType.ALLOC_WRITE_ID,),
    p.AcidWritePayload: (EventType.ACID_WRITE,),
    p.CommitTxnPayload: (EventType.COMMIT_TXN,),
    p.AbortTxnPayload: (EventType.ABORT_TXN,),
    p.UpdateColumnStatsPayload: (EventType.UPDATE_TABLE_COLUMN_STAT, EventType.UPDATE_PARTITION_COLUMN_STAT),
    p.DeleteColumnStatsPayload: (EventType.DELETE_TABLE_COLUMN_STAT, EventType.DELETE_PARTITION_COLUMN_STAT),
    p.CommitCompactionPayload: (EventType.COMMIT_COMPACTION,),
    p.ReloadPayload: (EventType.RELOAD,),
    p.ProgressPayload: (EventType.PROGRESS,),
    p.BootstrapObjectPayload: (EventType.BOOTSTRAP,),
    p.BootstrapMarkerPayload: (EventType.BOOTSTRAP_END,),
    p.UnknownPayload: (EventType.UNKNOWN,),
}
"""The event types that carry each payload type (every EventType appears exactly once)."""

PAYLOAD_TYPE_OF: dict[EventType, type] = {t: p for p, types in PAYLOAD_EVENT_TYPES.items() for t in types}
