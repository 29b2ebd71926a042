"""``NOTIFICATION_LOG`` rows -> :class:`Event`, for every event type and message format Hive writes.

Pure: one row in, one event out. Any malformation becomes a :class:`DecodeError` naming the event id,
type and cause, so a halted stream can be diagnosed; an event type streamer does not know becomes an
:class:`UnknownEventTypeError` and the caller decides whether to halt. File references keep
``checksum_algorithm`` and ``size`` unset: only the agent knows its source's filesystem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from streamer.errors import DecodeError, UnknownEventTypeError
from streamer.events.model import (
    AbortTxnPayload,
    AcidWrite,
    AcidWritePayload,
    AddConstraintsPayload,
    AddPartitionPayload,
    AllocWriteIdPayload,
    AlterDatabasePayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
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
    Event,
    EventType,
    FileRef,
    InsertPayload,
    OpenTxnPayload,
    PartitionSnapshot,
    Payload,
    ReloadPayload,
    Source,
    TableSnapshot,
    TxnWriteId,
    UnknownPayload,
    UpdateColumnStatsPayload,
)
from streamer.hive import fields, objects
from streamer.hive.files import parse_file_uri, partition_name
from streamer.hive.message import Fields, as_str_map, message_json
from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow

MAX_OPEN_TXN_RANGE = 100_000  # Hive opens at most hive.txn.max.open.batch (1000) per call
WRITE_FILES_SEPARATOR = "]"

# (payload, db, table) as the message names them; the row's DB_NAME/TBL_NAME take precedence
Decoded = tuple[Payload, str | None, str | None]


def decode_row(row: NotificationRow, source_id: str = "hive") -> Event:
    """Decode one stored row into an event (envelope ``db``/``table`` = the row's, i.e. new names)."""
    try:
        event_type = EventType(row.event_type)
        handler = _HANDLERS[event_type]
    except (ValueError, KeyError):
        raise UnknownEventTypeError(
            f"unknown event type {row.event_type!r}", event_id=row.event_id, event_type=str(row.event_type)
        ) from None
    try:
        payload, db, table = handler(Fields(message_json(row.message, row.message_format)))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        obj = ".".join(n for n in (_name(row.db_name), _name(row.table_name)) if n) or None
        raise DecodeError(
            str(exc) or type(exc).__name__, event_id=row.event_id, event_type=row.event_type, obj=obj
        ) from exc
    table_name = _name(row.table_name)
    if isinstance(payload, DeleteColumnStatsPayload) and not payload.table and table_name:
        payload = replace(payload, table=table_name)
    return Event(
        source=_source(row, source_id),
        event_type=event_type,
        payload=payload,
        db=_name(row.db_name) or db,
        table=table_name or table,
    )


def is_known_type(event_type: str) -> bool:
    """Whether ``decode_row`` knows rows of this stored ``EVENT_TYPE`` (streamer's own types excluded)."""
    try:
        return EventType(event_type) in _HANDLERS
    except ValueError:
        return False


def opaque_event(row: NotificationRow, source_id: str = "hive") -> Event:
    """The row as an ``UNKNOWN`` event carrying it unchanged: for a type this streamer cannot decode.

    Nothing of the message is parsed, so any message (any format, gzip, not even JSON) fits; the
    envelope names the row's database and table so a target halts exactly that database.
    """
    raw: str | bytes = row.message or ""
    message = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
    return Event(
        source=_source(row, source_id),
        event_type=EventType.UNKNOWN,
        payload=UnknownPayload(
            hive_event_type=str(row.event_type),
            message=message,
            message_format=row.message_format,
            catalog=_name(row.cat_name),
        ),
        db=_name(row.db_name),
        table=_name(row.table_name),
    )


def _source(row: NotificationRow, source_id: str) -> Source:
    """The ``source`` block of an event made from ``row``."""
    return Source(
        source_id=source_id,
        event_id=row.event_id,
        event_time=row.event_time,
        message_format=row.message_format,
        catalog=_name(row.cat_name),
    )


def _name(value: str | None) -> str | None:
    """Hive 3.1 stores absent names of txn events as ``'null'`` or ``' '``: treat them as absent."""
    if value is None or not value.strip() or value == "null":
        return None
    return value


def decode_txn_writes(rows: list[TxnWriteNotificationRow]) -> list[AcidWrite]:
    """The writes of one transaction, from its ``TXN_WRITE_NOTIFICATION_LOG`` rows."""
    writes = []
    for row in rows:
        try:
            writes.append(
                _acid_write(
                    row.db,
                    row.table,
                    row.write_id,
                    row.partition,
                    row.table_obj,
                    row.partition_obj,
                    row.files,
                )
            )
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            raise DecodeError(
                f"TXN_WRITE_NOTIFICATION_LOG row of txn {row.txn_id}: {exc}",
                event_type="TXN_WRITE",
                obj=f"{row.db}.{row.table}",
            ) from exc
    return writes


def _acid_write(
    db: str,
    table: str,
    write_id: int,
    partition: str | None,
    table_obj: str | None,
    partition_obj: str | None,
    files: str | None,
) -> AcidWrite:
    part = partition or None
    return AcidWrite(
        db=db,
        table=table,
        write_id=write_id,
        files=[parse_file_uri(f, part) for f in (files or "").split(WRITE_FILES_SEPARATOR) if f],
        partition=part,
        table_snapshot=objects.from_tjson(fields.TABLE, table_obj) if table_obj else None,
        partition_snapshot=objects.from_tjson(fields.PARTITION, partition_obj) if partition_obj else None,
    )


# --- per event type ---------------------------------------------------------------------------


def _table(m: Fields, key: str = "tableObjJson") -> TableSnapshot | None:
    text = m.str_(key)
    return objects.from_tjson(fields.TABLE, text) if text else None


def _table_or_names(m: Fields) -> TableSnapshot:
    """Hive 2.x messages may lack the Thrift object: fall back to the names in the message."""
    table = _table(m)
    if table is not None:
        return table
    return TableSnapshot(
        name=m.rstr("table"), db=m.rstr("db"), table_type=m.str_("tableType") or "MANAGED_TABLE"
    )


def _partition(m: Fields, key: str) -> PartitionSnapshot | None:
    text = m.str_(key)
    return objects.from_tjson(fields.PARTITION, text) if text else None


def _partitions(m: Fields) -> list[PartitionSnapshot]:
    texts = m.list_("partitionListJson", str)
    if texts is not None:
        return [objects.from_tjson(fields.PARTITION, t) for t in texts]
    return [PartitionSnapshot(values=list(v.values())) for v in _key_value_maps(m)]


def _key_value_maps(m: Fields) -> list[dict[str, str]]:
    return [as_str_map(v, "partitions[]") for v in m.list_("partitions", dict) or []]


def _files(m: Fields, key: str = "files", partition: str | None = None) -> list[FileRef]:
    return [parse_file_uri(f, partition) for f in m.list_(key, str) or []]


def _create_database(m: Fields) -> Decoded:
    text = m.str_("dbJson")
    db = objects.from_tjson(fields.DATABASE, text) if text else None
    return DatabasePayload(db), m.str_("db") or (db.name if db else None), None


def _alter_database(m: Fields) -> Decoded:
    before = objects.from_tjson(fields.DATABASE, m.rstr("dbObjBeforeJson"))
    after = objects.from_tjson(fields.DATABASE, m.rstr("dbObjAfterJson"))
    return AlterDatabasePayload(before, after), after.name, None


def _create_table(m: Fields) -> Decoded:
    table = _table_or_names(m)
    return CreateTablePayload(table, _files(m)), table.db, table.name


def _alter_table(m: Fields) -> Decoded:
    before = objects.from_tjson(fields.TABLE, m.rstr("tableObjBeforeJson"))
    after = objects.from_tjson(fields.TABLE, m.rstr("tableObjAfterJson"))
    payload = AlterTablePayload(before, after, m.bool_("isTruncateOp"), m.int_("writeId"))
    return payload, after.db, after.name


def _drop_table(m: Fields) -> Decoded:
    table = _table(m)
    return (
        DropTablePayload(table),
        m.str_("db") or _attr(table, "db"),
        m.str_("table") or _attr(table, "name"),
    )


def _attr(obj: Any, name: str) -> str | None:
    return getattr(obj, name) if obj is not None else None


def _add_partition(m: Fields) -> Decoded:
    files: list[FileRef] = []
    for entry in m.list_("partitionFiles", dict) or []:
        entry_fields = Fields(entry)
        files += _files(entry_fields, "files", entry_fields.str_("partitionName"))
    table = _table(m)
    payload = AddPartitionPayload(table, _partitions(m), files)
    return payload, m.str_("db") or _attr(table, "db"), m.str_("table") or _attr(table, "name")


def _alter_partition(m: Fields) -> Decoded:
    after = _partition(m, "partitionObjAfterJson")
    key_values = m.str_map("keyValues")
    if after is None:
        if key_values is None:
            raise ValueError("field 'partitionObjAfterJson' is missing")
        after = PartitionSnapshot(values=list(key_values.values()))
    before = _partition(m, "partitionObjBeforeJson") or PartitionSnapshot(values=after.values)
    table = _table(m)
    payload = AlterPartitionPayload(table, before, after, m.bool_("isTruncateOp"), m.int_("writeId"))
    return payload, m.str_("db") or _attr(table, "db"), m.str_("table") or _attr(table, "name")


def _alter_partitions(m: Fields) -> Decoded:
    table = _table(m)
    payload = AlterPartitionsPayload(table, _partitions(m), m.bool_("isTruncateOp"), m.int_("writeId"))
    return payload, m.str_("db") or _attr(table, "db"), m.str_("table") or _attr(table, "name")


def _drop_partition(m: Fields) -> Decoded:
    table = _table(m)
    values = [list(v.values()) for v in _key_value_maps(m)]
    return DropPartitionPayload(table, values), m.str_("db") or _attr(table, "db"), m.str_("table")


def _insert(m: Fields) -> Decoded:
    table = _table(m)
    partition = _partition(m, "ptnObjJson")
    key_values = m.str_map("partKeyVals")  # Hive 2.3
    keys: list[str] = [k.name for k in table.partition_keys] if table else []
    if partition is not None:
        values = list(partition.values)
    elif key_values:
        keys, values = list(key_values), list(key_values.values())
    else:
        values = []
    part_name = partition_name(keys, values) if values and len(keys) == len(values) else None
    payload = InsertPayload(table, partition, values, m.bool_("replace"), _files(m, partition=part_name))
    return payload, m.str_("db") or _attr(table, "db"), m.str_("table") or _attr(table, "name")


def _create_function(m: Fields) -> Decoded:
    function = objects.from_tjson(fields.FUNCTION, m.rstr("functionObjJson"))
    return CreateFunctionPayload(function), m.str_("db") or function.db, None


def _drop_function(m: Fields) -> Decoded:
    return DropFunctionPayload(m.rstr("functionName")), m.str_("db"), None


def _add_constraints(kind: str) -> Callable[[Fields], Decoded]:
    key = objects.CONSTRAINT_KEYS[kind]

    def decode(m: Fields) -> Decoded:
        texts = m.list_(key, str, required=True) or []
        constraints = [objects.from_tjson(fields.CONSTRAINTS[kind], t) for t in texts]
        if not constraints:
            return AddConstraintsPayload([]), None, None
        first = constraints[0]
        if kind == "FOREIGN_KEY":  # the listener keys foreign keys by the primary-key side
            return AddConstraintsPayload(constraints), first.ref_db, first.ref_table
        return AddConstraintsPayload(constraints), first.db, first.table

    return decode


def _drop_constraint(m: Fields) -> Decoded:
    db, table = m.rstr("dbName"), m.rstr("tableName")
    return DropConstraintPayload(db, table, m.rstr("constraintName")), db, table


def _open_txn(m: Fields) -> Decoded:
    ids = m.list_("txnIds", int)
    if ids is None:
        first, last = m.rint("fromTxnId"), m.rint("toTxnId")
        if not 0 <= last - first < MAX_OPEN_TXN_RANGE:
            raise ValueError(f"implausible txn id range {first}..{last}")
        ids = list(range(first, last + 1))
    return OpenTxnPayload(ids), None, None


def _alloc_write_id(m: Fields) -> Decoded:
    txns = m.list_("txnIdList", int, required=True) or []
    writes = m.list_("writeIdList", int, required=True) or []
    if len(txns) != len(writes):
        raise ValueError(f"txnIdList has {len(txns)} ids but writeIdList {len(writes)}")
    db, table = m.rstr("dbName"), m.rstr("tableName")
    return (
        AllocWriteIdPayload(db, table, [TxnWriteId(t, w) for t, w in zip(txns, writes, strict=True)]),
        db,
        table,
    )


def _commit_txn(m: Fields) -> Decoded:
    """The log's COMMIT_TXN has null write lists; a message that carries them (REPL dumps) is read too."""
    write_ids = m.list_("writeIds", int)
    writes = []
    if write_ids:
        columns = {k: m.list_(k, str) or [] for k in ("databases", "tables", "partitions", "files")}
        objs = {k: m.body.get(k) or [None] * len(write_ids) for k in ("tableObjs", "partitionObjs")}
        for i, write_id in enumerate(write_ids):
            db, table = columns["databases"][i], columns["tables"][i]
            part = columns["partitions"][i] if i < len(columns["partitions"]) else None
            files = columns["files"][i] if i < len(columns["files"]) else None
            writes.append(
                _acid_write(db, table, write_id, part, objs["tableObjs"][i], objs["partitionObjs"][i], files)
            )
    return CommitTxnPayload(m.rint("txnid"), writes), None, None


def _abort_txn(m: Fields) -> Decoded:
    return AbortTxnPayload(m.rint("txnid"), m.list_("dbsUpdated", str) or []), None, None


def _acid_write_event(m: Fields) -> Decoded:
    db, table = m.rstr("database"), m.rstr("table")
    files = m.list_("files", str) or []
    write = _acid_write(
        db,
        table,
        m.rint("writeId"),
        m.str_("partition"),
        m.str_("tableObjJson"),
        m.str_("partitionObjJson"),
        WRITE_FILES_SEPARATOR.join(files),
    )
    return AcidWritePayload(m.rint("txnid"), write), db, table


def _update_col_stats(partition_level: bool) -> Callable[[Fields], Decoded]:
    def decode(m: Fields) -> Decoded:
        desc, stats = objects.column_stats_from_tjson(m.rstr("colStatsJson"))
        table = _table(m)
        db = m.str_("database") or desc.get("dbName") or _attr(table, "db")
        name = desc.get("tableName") or _attr(table, "name")
        if not db or not name:
            raise ValueError("column statistics name no database or table")
        payload = UpdateColumnStatsPayload(
            db=db,
            table=name,
            statistics=stats,
            partition_values=list(m.list_("partVals", str) or []) if partition_level else [],
            parameters=m.str_map("parameters") or {},
            write_id=m.int_("writeId"),
            is_table_level=bool(desc.get("isTblLevel", not partition_level)),
        )
        return payload, db, name

    return decode


def _delete_col_stats(m: Fields) -> Decoded:
    """The message names no table (the row's TBL_NAME does); ``tableName`` is read when present."""
    db = m.rstr("database")
    table = m.str_("tableName") or m.str_("table")
    payload = DeleteColumnStatsPayload(
        db=db,
        table=table or "",
        column=m.str_("colName"),
        partition_name=m.str_("partName"),
        partition_values=list(m.list_("partValues", str) or []),
    )
    return payload, db, table


def _commit_compaction(m: Fields) -> Decoded:
    payload = CommitCompactionPayload(
        m.rint("txnid"), m.int_("compactionId"), m.str_("type"), m.str_("partName")
    )
    return payload, m.str_("dbname"), m.str_("tableName")


def _reload(m: Fields) -> Decoded:
    table = _table(m)
    if m.has("partitionListJson"):
        partitions = _partitions(m)
    else:
        single = _partition(m, "ptnObjJson")
        partitions = [single] if single else []
    payload = ReloadPayload(table, partitions, m.bool_("refreshEvent"))
    return payload, m.str_("db") or _attr(table, "db"), m.str_("table") or _attr(table, "name")


E = EventType
_HANDLERS: dict[EventType, Callable[[Fields], Decoded]] = {
    E.CREATE_DATABASE: _create_database,
    E.ALTER_DATABASE: _alter_database,
    E.DROP_DATABASE: _create_database,
    E.CREATE_TABLE: _create_table,
    E.ALTER_TABLE: _alter_table,
    E.DROP_TABLE: _drop_table,
    E.ADD_PARTITION: _add_partition,
    E.ALTER_PARTITION: _alter_partition,
    E.ALTER_PARTITIONS: _alter_partitions,
    E.DROP_PARTITION: _drop_partition,
    E.INSERT: _insert,
    E.CREATE_FUNCTION: _create_function,
    E.DROP_FUNCTION: _drop_function,
    E.ADD_PRIMARYKEY: _add_constraints("PRIMARY_KEY"),
    E.ADD_FOREIGNKEY: _add_constraints("FOREIGN_KEY"),
    E.ADD_UNIQUECONSTRAINT: _add_constraints("UNIQUE"),
    E.ADD_NOTNULLCONSTRAINT: _add_constraints("NOT_NULL"),
    E.ADD_DEFAULTCONSTRAINT: _add_constraints("DEFAULT"),
    E.ADD_CHECKCONSTRAINT: _add_constraints("CHECK"),
    E.DROP_CONSTRAINT: _drop_constraint,
    E.OPEN_TXN: _open_txn,
    E.COMMIT_TXN: _commit_txn,
    E.ABORT_TXN: _abort_txn,
    E.ALLOC_WRITE_ID: _alloc_write_id,
    E.ACID_WRITE: _acid_write_event,
    E.UPDATE_TABLE_COLUMN_STAT: _update_col_stats(partition_level=False),
    E.UPDATE_PARTITION_COLUMN_STAT: _update_col_stats(partition_level=True),
    E.DELETE_TABLE_COLUMN_STAT: _delete_col_stats,
    E.DELETE_PARTITION_COLUMN_STAT: _delete_col_stats,
    E.COMMIT_COMPACTION: _commit_compaction,
    E.RELOAD: _reload,
}
