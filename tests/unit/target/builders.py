"""Hand-built, semantically valid events and source files for target tests."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from streamer.events.model import (
    AddPartitionPayload,
    AlterTablePayload,
    Column,
    CreateTablePayload,
    DatabasePayload,
    DatabaseSnapshot,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    InsertPayload,
    PartitionSnapshot,
    Payload,
    Source,
    StorageDescriptor,
    TableSnapshot,
)

SOURCE_ID = "src1"
SRC_WH = "/source/warehouse"


def event(
    event_id: int, kind: EventType, payload: Payload, db: str | None = None, table: str | None = None
) -> Event:
    return Event(Source(SOURCE_ID, event_id, 1_700_000_000 + event_id), kind, payload, db=db, table=table)


def write_source_file(root: Path, rel: str, content: bytes) -> FileRef:
    """A real file under ``root`` and its reference with a sha256 checksum."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return FileRef(
        uri=f"file://{path}",
        checksum=hashlib.sha256(content).hexdigest(),
        checksum_algorithm="sha256",
        size=len(content),
    )


def table(
    db: str,
    name: str,
    keys: tuple[str, ...] = (),
    *,
    location: str | None = None,
    table_type: str = "MANAGED_TABLE",
    **params: str,
) -> TableSnapshot:
    return TableSnapshot(
        name=name,
        db=db,
        table_type=table_type,
        sd=StorageDescriptor(
            location=location or f"file://{SRC_WH}/{db}.db/{name}", columns=[Column("id", "int")]
        ),
        partition_keys=[Column(k, "string") for k in keys],
        parameters=dict(params),
    )


def create_db(event_id: int, name: str, **params: str) -> Event:
    return event(
        event_id,
        EventType.CREATE_DATABASE,
        DatabasePayload(DatabaseSnapshot(name=name, parameters=dict(params))),
        db=name,
    )


def drop_db(event_id: int, name: str) -> Event:
    return event(event_id, EventType.DROP_DATABASE, DatabasePayload(DatabaseSnapshot(name=name)), db=name)


def create_table(event_id: int, snap: TableSnapshot, files: list[FileRef] | None = None) -> Event:
    return event(event_id, EventType.CREATE_TABLE, CreateTablePayload(snap, files or []), snap.db, snap.name)


def alter_table(event_id: int, before: TableSnapshot, after: TableSnapshot, truncate: bool = False) -> Event:
    return event(
        event_id,
        EventType.ALTER_TABLE,
        AlterTablePayload(before, after, is_truncate=truncate),
        after.db,
        after.name,
    )


def drop_table(event_id: int, snap: TableSnapshot) -> Event:
    return event(event_id, EventType.DROP_TABLE, DropTablePayload(snap), snap.db, snap.name)


def partition(snap: TableSnapshot, *values: str) -> PartitionSnapshot:
    name = "/".join(f"{c.name}={v}" for c, v in zip(snap.partition_keys, values, strict=True))
    return PartitionSnapshot(
        values=list(values),
        db=snap.db,
        table=snap.name,
        sd=StorageDescriptor(location=f"{snap.sd.location}/{name}"),
    )


def add_partition(
    event_id: int, snap: TableSnapshot, parts: list[PartitionSnapshot], files: list[FileRef] | None = None
) -> Event:
    return event(
        event_id, EventType.ADD_PARTITION, AddPartitionPayload(snap, parts, files or []), snap.db, snap.name
    )


def drop_partition(event_id: int, snap: TableSnapshot, values: list[list[str]]) -> Event:
    return event(event_id, EventType.DROP_PARTITION, DropPartitionPayload(snap, values), snap.db, snap.name)


def insert(
    event_id: int,
    snap: TableSnapshot,
    files: list[FileRef],
    *,
    values: list[str] | None = None,
    replace: bool = False,
) -> Event:
    part = partition(snap, *values) if values else None
    return event(
        event_id,
        EventType.INSERT,
        InsertPayload(snap, part, values or [], replace, files),
        snap.db,
        snap.name,
    )


def replace(obj: Any, **changes: Any) -> Any:
    return dataclasses.replace(obj, **changes)
