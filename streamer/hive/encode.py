"""Events -> the ``NOTIFICATION_LOG`` rows a Hive 4 metastore with DbNotificationListener writes.

Used by the bundled source warehouse so that streamer's agent reads its log exactly as it reads a
real metastore's. Keys follow the Java field order of Hive's ``JSON*Message`` classes; booleans are
the strings Hive writes; Thrift objects are embedded as TJSON text; null fields are written as
Jackson writes them. ``decode_row(encode_event(e)) == e`` except for what Hive's messages cannot
carry (see :func:`hive_normal_form`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, get_type_hints

from streamer.events import model as ev
from streamer.events.model import AcidWrite, Event, EventType, FileRef, PartitionSnapshot, TableSnapshot
from streamer.hive import fields, objects
from streamer.hive.decode import WRITE_FILES_SEPARATOR
from streamer.hive.files import cmroot_of, format_file_uri, parse_file_uri, partition_name
from streamer.hive.message import FORMATS, GZIP_FORMAT, gzip_message
from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow

SERVER = ""  # DbNotificationListener writes the metastore's thrift URIs; an embedded one has none
SERVICE_PRINCIPAL = ""


def encode_event(event: Event, message_format: str = "json-0.2") -> NotificationRow:
    """Write ``event`` as Hive 4 would: the row's names, the message in ``message_format``."""
    if message_format not in FORMATS:
        raise ValueError(f"unsupported message format {message_format!r} (expected one of {FORMATS})")
    encoder = _ENCODERS.get(ev.PAYLOAD_TYPE_OF[event.event_type])
    if encoder is None:
        raise ValueError(f"event type {event.event_type} is not written to a Hive notification log")
    body = encoder(event.payload, event.source.event_time, event)
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return NotificationRow(
        event_id=event.source.event_id,
        event_time=event.source.event_time,
        event_type=event.event_type.value,
        message=gzip_message(text) if message_format == GZIP_FORMAT else text,
        message_format=message_format,
        db_name=event.db,
        table_name=event.table,
        cat_name=event.source.catalog,
    )


def encode_txn_write(txn_id: int, write: AcidWrite, event_time: int) -> TxnWriteNotificationRow:
    """One ``TXN_WRITE_NOTIFICATION_LOG`` row for an ACID write of ``txn_id``."""
    if write.table_snapshot is None:
        raise ValueError(f"ACID write to {write.db}.{write.table} needs the table snapshot Hive records")
    return TxnWriteNotificationRow(
        txn_id=txn_id,
        write_id=write.write_id,
        db=write.db,
        table=write.table,
        partition=write.partition or "",
        table_obj=objects.to_tjson(fields.TABLE, write.table_snapshot),
        partition_obj=objects.to_tjson(fields.PARTITION, write.partition_snapshot)
        if write.partition_snapshot
        else None,
        files=WRITE_FILES_SEPARATOR.join(_files(write.files)),
        event_time=event_time,
    )


def hive_normal_form(event: Event, message_format: str = "json-0.2") -> Event:
    """``event`` reduced to what survives a trip through Hive's message: the round-trip contract.

    Lost: ``ts_ms``; ``source.message_format`` (set to the format written); FileRef
    ``checksum_algorithm`` and ``size``; a ``cm_uri`` that is not ``<cmroot>/<name>_<checksum>``
    (rebuilt from its directory); the ``partition`` of CREATE_TABLE files (none) and INSERT files
    (derived from the table's keys and the values); COMMIT_TXN ``writes`` (Hive 4 keeps them in
    TXN_WRITE_NOTIFICATION_LOG: see :func:`encode_txn_write`). Everything else, snapshots included,
    decodes unchanged.
    """
    payload: Any = event.payload
    if isinstance(payload, ev.AddPartitionPayload):
        payload = replace(payload, files=[_normal_file(f) for f in payload.files])
    if isinstance(payload, ev.CreateTablePayload):
        payload = replace(payload, files=[_normal_file(replace(f, partition=None)) for f in payload.files])
    if isinstance(payload, ev.InsertPayload):
        keys = [k.name for k in payload.table.partition_keys] if payload.table else []
        values = payload.partition_values
        part = partition_name(keys, values) if values and len(keys) == len(values) else None
        payload = replace(payload, files=[_normal_file(replace(f, partition=part)) for f in payload.files])
    if isinstance(payload, ev.AcidWritePayload):
        payload = replace(
            payload, write=replace(payload.write, files=[_normal_file(f) for f in payload.write.files])
        )
    if isinstance(payload, ev.CommitTxnPayload):
        payload = replace(payload, writes=[])
    return replace(
        event, ts_ms=None, payload=payload, source=replace(event.source, message_format=message_format)
    )


def _normal_file(ref: FileRef) -> FileRef:
    return parse_file_uri(format_file_uri(ref, cmroot_of(ref)), ref.partition)


# --- messages ---------------------------------------------------------------------------------


def _files(refs: list[FileRef]) -> list[str]:
    return [format_file_uri(f, cmroot_of(f)) for f in refs]


def _head(**fields: Any) -> dict[str, Any]:
    return {"server": SERVER, "servicePrincipal": SERVICE_PRINCIPAL, **fields}


def _txn_head(txn_id: int, ts: int, **fields: Any) -> dict[str, Any]:
    """The start of the transaction messages: ``txnid`` and ``timestamp`` before the server's names."""
    return {"txnid": txn_id, "timestamp": ts, **_head(**fields)}


def _tbl(t: TableSnapshot | None) -> str | None:
    return objects.to_tjson(fields.TABLE, t) if t is not None else None


def _ptn(p: PartitionSnapshot | None) -> str | None:
    return objects.to_tjson(fields.PARTITION, p) if p is not None else None


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _table_names(e: Event, t: TableSnapshot | None) -> dict[str, Any]:
    return {
        "db": t.db if t else e.db,
        "table": t.name if t else e.table,
        "tableType": t.table_type if t else None,
        "tableObjJson": _tbl(t),
    }


def _catalog_and_table_names(e: Event, t: TableSnapshot | None) -> dict[str, Any]:
    """``cat`` then :func:`_table_names`, for the messages whose Java class starts with the catalog."""
    return {"cat": t.catalog if t else None, **_table_names(e, t)}


def _create_database(p: ev.DatabasePayload, ts: int, e: Event) -> dict[str, Any]:
    db = p.database
    return _head(
        db=db.name if db else e.db, dbJson=objects.to_tjson(fields.DATABASE, db) if db else None, timestamp=ts
    )


def _alter_database(p: ev.AlterDatabasePayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(
        db=p.before.name,
        dbObjBeforeJson=objects.to_tjson(fields.DATABASE, p.before),
        dbObjAfterJson=objects.to_tjson(fields.DATABASE, p.after),
        timestamp=ts,
    )


def _create_table(p: ev.CreateTablePayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(**_table_names(e, p.table), timestamp=ts, files=_files(p.files))


def _alter_table(p: ev.AlterTablePayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(
        db=p.before.db,
        table=p.before.name,
        tableType=p.before.table_type,
        tableObjBeforeJson=_tbl(p.before),
        tableObjAfterJson=_tbl(p.after),
        isTruncateOp=_flag(p.is_truncate),
        timestamp=ts,
        writeId=p.write_id,
    )


def _drop_table(p: ev.DropTablePayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(**_table_names(e, p.table), timestamp=ts)


def _key_values(t: TableSnapshot | None, values: list[str]) -> dict[str, str]:
    keys = [k.name for k in t.partition_keys] if t else []
    if len(keys) != len(values):
        keys = [f"_c{i}" for i in range(len(values))]  # unknown keys: keep the values in order
    return dict(zip(keys, values, strict=True))


def _add_partition(p: ev.AddPartitionPayload, ts: int, e: Event) -> dict[str, Any]:
    by_partition: dict[str | None, list[FileRef]] = {}
    for f in p.files:
        by_partition.setdefault(f.partition, []).append(f)
    return _head(
        **_table_names(e, p.table),
        timestamp=ts,
        partitions=[_key_values(p.table, q.values) for q in p.partitions],
        partitionListJson=[_ptn(q) for q in p.partitions],
        partitionFiles=[
            {"partitionName": name, "files": _files(refs)} for name, refs in by_partition.items()
        ],
    )


def _alter_partition(p: ev.AlterPartitionPayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(
        **_table_names(e, p.table),
        isTruncateOp=_flag(p.is_truncate),
        timestamp=ts,
        writeId=p.write_id,
        keyValues=_key_values(p.table, p.after.values),
        partitionObjBeforeJson=_ptn(p.before),
        partitionObjAfterJson=_ptn(p.after),
    )


def _alter_partitions(p: ev.AlterPartitionsPayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(
        **_catalog_and_table_names(e, p.table),
        isTruncateOp=_flag(p.is_truncate),
        timestamp=ts,
        writeId=p.write_id,
        partitions=[_key_values(p.table, q.values) for q in p.partitions],
        partitionListJson=[_ptn(q) for q in p.partitions],
    )


def _drop_partition(p: ev.DropPartitionPayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(
        **_table_names(e, p.table),
        timestamp=ts,
        partitions=[_key_values(p.table, v) for v in p.partition_values],
    )


def _insert(p: ev.InsertPayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(
        **_catalog_and_table_names(e, p.table),
        ptnObjJson=_ptn(p.partition),
        timestamp=ts,
        replace=_flag(p.replace),
        files=_files(p.files),
    )


def _create_function(p: ev.CreateFunctionPayload, ts: int, e: Event) -> dict[str, Any]:
    text = objects.to_tjson(fields.FUNCTION, p.function)
    return _head(db=p.function.db, functionObjJson=text, timestamp=ts)


def _drop_function(p: ev.DropFunctionPayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(db=e.db, functionName=p.function_name, timestamp=ts)


def _add_constraints(p: ev.AddConstraintsPayload, ts: int, e: Event) -> dict[str, Any]:
    key = objects.CONSTRAINT_KEYS[_constraint_kind(e.event_type)]
    texts = [objects.to_tjson(fields.CONSTRAINTS[c.kind], c) for c in p.constraints]
    return _head(**{key: texts}, timestamp=ts)


def _constraint_kind(event_type: EventType) -> str:
    return {
        EventType.ADD_PRIMARYKEY: "PRIMARY_KEY",
        EventType.ADD_FOREIGNKEY: "FOREIGN_KEY",
        EventType.ADD_UNIQUECONSTRAINT: "UNIQUE",
        EventType.ADD_NOTNULLCONSTRAINT: "NOT_NULL",
        EventType.ADD_DEFAULTCONSTRAINT: "DEFAULT",
        EventType.ADD_CHECKCONSTRAINT: "CHECK",
    }[event_type]


def _drop_constraint(p: ev.DropConstraintPayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(dbName=p.db, tableName=p.table, constraintName=p.constraint_name, timestamp=ts)


def _open_txn(p: ev.OpenTxnPayload, ts: int, e: Event) -> dict[str, Any]:
    ids = p.txn_ids
    contiguous = bool(ids) and ids == list(range(ids[0], ids[0] + len(ids)))
    return {
        "txnIds": None if contiguous else ids,
        "timestamp": ts,
        "fromTxnId": ids[0] if contiguous else None,
        "toTxnId": ids[-1] if contiguous else None,
        "server": SERVER,
        "servicePrincipal": SERVICE_PRINCIPAL,
    }


def _alloc_write_id(p: ev.AllocWriteIdPayload, ts: int, e: Event) -> dict[str, Any]:
    return _head(
        catName=e.source.catalog,
        dbName=p.db,
        tableName=p.table,
        txnIdList=[w.txn_id for w in p.txn_write_ids],
        writeIdList=[w.write_id for w in p.txn_write_ids],
        timestamp=ts,
    )


def _commit_txn(p: ev.CommitTxnPayload, ts: int, e: Event) -> dict[str, Any]:
    """The log's COMMIT_TXN names no writes: Hive 4 keeps them in TXN_WRITE_NOTIFICATION_LOG."""
    lists = ("databases", "tables", "partitions", "tableObjs", "partitionObjs", "files")
    return _txn_head(p.txn_id, ts, writeIds=None, **dict.fromkeys(lists))


def _abort_txn(p: ev.AbortTxnPayload, ts: int, e: Event) -> dict[str, Any]:
    return _txn_head(p.txn_id, ts, dbsUpdated=p.databases)


def _acid_write(p: ev.AcidWritePayload, ts: int, e: Event) -> dict[str, Any]:
    w = p.write
    return {
        "txnid": p.txn_id,
        "writeId": w.write_id,
        "timestamp": ts,
        "server": SERVER,
        "servicePrincipal": SERVICE_PRINCIPAL,
        "database": w.db,
        "table": w.table,
        "partition": w.partition,
        "tableObjJson": _tbl(w.table_snapshot),
        "partitionObjJson": _ptn(w.partition_snapshot),
        "files": _files(w.files),
    }


def _update_col_stats(p: ev.UpdateColumnStatsPayload, ts: int, e: Event) -> dict[str, Any]:
    desc = {"isTblLevel": p.is_table_level, "dbName": p.db, "tableName": p.table, "catName": e.source.catalog}
    stats = objects.column_stats_to_tjson(desc, p.statistics)
    table = _tbl(TableSnapshot(name=p.table, db=p.db, parameters=p.parameters))
    if e.event_type == EventType.UPDATE_TABLE_COLUMN_STAT:
        return {
            "writeId": p.write_id,
            "timestamp": ts,
            "validWriteIds": None,
            "server": SERVER,
            "servicePrincipal": SERVICE_PRINCIPAL,
            "database": p.db,
            "colStatsJson": stats,
            "parameters": p.parameters,
            "tableObjJson": table,
        }
    return {
        "writeId": p.write_id,
        "timestamp": ts,
        "server": SERVER,
        "servicePrincipal": SERVICE_PRINCIPAL,
        "catalog": e.source.catalog,
        "database": p.db,
        "colStatsJson": stats,
        "parameters": p.parameters,
        "partVals": p.partition_values,
        "tableObjJson": table,
    }


def _delete_col_stats(p: ev.DeleteColumnStatsPayload, ts: int, e: Event) -> dict[str, Any]:
    body = {
        "timestamp": ts,
        "server": SERVER,
        "servicePrincipal": SERVICE_PRINCIPAL,
        "catalog": e.source.catalog,
        "database": p.db,
        "colName": p.column,
    }
    if e.event_type == EventType.DELETE_PARTITION_COLUMN_STAT:
        body |= {"partName": p.partition_name, "partValues": p.partition_values}
    return body


def _commit_compaction(p: ev.CommitCompactionPayload, ts: int, e: Event) -> dict[str, Any]:
    return _txn_head(
        p.txn_id,
        ts,
        compactionId=p.compaction_id,
        type=p.compaction_type,
        dbname=e.db,
        tableName=e.table,
        partName=p.partition,
    )


def _reload(p: ev.ReloadPayload, ts: int, e: Event) -> dict[str, Any]:
    names = _table_names(e, p.table)
    return _head(
        db=names["db"],
        table=names["table"],
        tableObjJson=names["tableObjJson"],
        ptnObjJson=_ptn(p.partitions[0]) if len(p.partitions) == 1 else None,
        timestamp=ts,
        refreshEvent=_flag(p.refresh),
        partitionListJson=[_ptn(q) for q in p.partitions],
    )


_Encoder = Callable[[Any, int, Event], dict[str, Any]]


def _by_payload_type(*encoders: _Encoder) -> dict[type, _Encoder]:
    """Each encoder keyed by the payload type its ``p`` parameter is annotated with."""
    return {get_type_hints(f)["p"]: f for f in encoders}


_ENCODERS = _by_payload_type(
    _create_database, _alter_database, _create_table, _alter_table, _drop_table, _add_partition,
    _alter_partition, _alter_partitions, _drop_partition, _insert, _create_function, _drop_function,
    _add_constraints, _drop_constraint, _open_txn, _commit_txn, _abort_txn, _alloc_write_id, _acid_write,
    _update_col_stats, _delete_col_stats, _commit_compaction, _reload,
)
"""The encoder of each payload type a Hive log carries (streamer's own records have none)."""
