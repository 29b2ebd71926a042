"""Database events: the target database is made equal to the source's snapshot, under its mapped
name and derived location, keeping this stream's markers and a record of where the source keeps it
(``SOURCE_LOCATION_PARAM``, from the database's own events: the read rules derive from it where the
database's function resources may be read, docs/security.md). Design: docs/design/apply.md.
"""

from __future__ import annotations

import dataclasses

from streamer.errors import ApplyError
from streamer.events.model import AlterDatabasePayload, DatabasePayload, DatabaseSnapshot, Event
from streamer.metastore.catalog import LAST_ID_PARAM, source_params
from streamer.target.apply.by_state import SOURCE_LOCATION_PARAM
from streamer.target.apply.effects import (
    AlterDatabase,
    CreateDatabase,
    DatabaseCreated,
    DatabaseDropped,
    DropDatabase,
    Effect,
    RemoveTree,
)
from streamer.target.apply.view import View, last_id, payload_of


def _db_snapshot(
    view: View, snap: DatabaseSnapshot, event_id: int, current: DatabaseSnapshot | None
) -> DatabaseSnapshot:
    name = view.target_db(snap.name)
    marker = max(last_id(current) or 0, event_id) if current is not None else event_id
    own = source_params(snap.parameters)  # never another stream's bookkeeping
    own.pop(SOURCE_LOCATION_PARAM, None)  # nor another replica's record of where its source was
    return dataclasses.replace(
        snap,
        name=name,
        location=view.paths.database_location(name),
        managed_location=None,
        parameters={**own, **source_location_params(snap, current), **view.replica_marks(),
                    LAST_ID_PARAM: str(marker)},
    )


def source_location_params(snap: DatabaseSnapshot, current: DatabaseSnapshot | None) -> dict[str, str]:
    """The target database's record of where the source keeps it: ``snap``'s location, else the one
    ``current`` (the target database) recorded before; empty when neither names one (a Hive 2.3
    CREATE_DATABASE message carries no database object)."""
    recorded = current.parameters.get(SOURCE_LOCATION_PARAM) if current is not None else None
    location = snap.location or recorded
    return {SOURCE_LOCATION_PARAM: location} if location else {}


def create_database(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, DatabasePayload)
    snap = payload.database or DatabaseSnapshot(name=event.db or "")
    current = view.database(view.target_db(snap.name))
    desired = _db_snapshot(view, snap, event.event_id, current)
    effects: list[Effect] = []
    if current is None:
        effects.append(CreateDatabase(desired))
    elif current != desired:
        effects.append(AlterDatabase(desired.name, desired))
    return [*effects, DatabaseCreated(desired.name)]


def alter_database(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, AlterDatabasePayload)
    name = view.target_db(payload.after.name)
    current = view.database(name)
    if current is None:
        raise ApplyError("database is missing on the target", obj=name)
    desired = _db_snapshot(view, payload.after, event.event_id, current)
    return [AlterDatabase(name, desired)] if current != desired else []


def drop_database(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, DatabasePayload)
    name = view.target_db(payload.database.name if payload.database else event.db or "")
    effects: list[Effect] = [DropDatabase(name)] if view.database(name) is not None else []
    return [*effects, RemoveTree(event.event_id, view.paths.database_location(name)), DatabaseDropped(name)]
