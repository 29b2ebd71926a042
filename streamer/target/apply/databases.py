"""Database events: the target database is made equal to the source's snapshot, under its mapped
name and derived location, keeping this stream's markers and a record of where the source keeps it
(``SOURCE_LOCATION_PARAM``, from the database's own events: the read rules derive from it where the
database's function resources may be read, docs/security.md). Design: docs/design/apply.md.
"""

from __future__ import annotations

import dataclasses

from streamer import metrics
from streamer.errors import ApplyError
from streamer.events.model import AlterDatabasePayload, DatabasePayload, DatabaseSnapshot, Event
from streamer.metastore.catalog import LAST_ID_PARAM, source_params
from streamer.target.apply import by_state, door
from streamer.target.apply.by_state import SOURCE_LOCATION_PARAM
from streamer.target.apply.context import ApplyContext, last_id, payload_of
from streamer.target.apply.door import AlterDatabase, CreateDatabase, DropDatabase


def _db_snapshot(
    ctx: ApplyContext, snap: DatabaseSnapshot, event_id: int, current: DatabaseSnapshot | None
) -> DatabaseSnapshot:
    name = ctx.target_db(snap.name)
    marker = max(last_id(current) or 0, event_id) if current is not None else event_id
    own = source_params(snap.parameters)  # never another stream's bookkeeping
    own.pop(SOURCE_LOCATION_PARAM, None)  # nor another replica's record of where its source was
    return dataclasses.replace(
        snap,
        name=name,
        location=ctx.paths.database_location(name),
        managed_location=None,
        parameters={**own, **source_location_params(snap, current), **ctx.replica_marks(),
                    LAST_ID_PARAM: str(marker)},
    )


def source_location_params(snap: DatabaseSnapshot, current: DatabaseSnapshot | None) -> dict[str, str]:
    """The target database's record of where the source keeps it: ``snap``'s location, else the one
    ``current`` (the target database) recorded before; empty when neither names one (a Hive 2.3
    CREATE_DATABASE message carries no database object)."""
    recorded = current.parameters.get(SOURCE_LOCATION_PARAM) if current is not None else None
    location = snap.location or recorded
    return {SOURCE_LOCATION_PARAM: location} if location else {}


def create_database(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, DatabasePayload)
    snap = payload.database or DatabaseSnapshot(name=event.db or "")
    current = ctx.catalog.get_database(ctx.target_db(snap.name))
    desired = _db_snapshot(ctx, snap, event.event_id, current)
    if current is None:
        ctx.do(CreateDatabase(desired))
    elif current != desired:
        ctx.do(AlterDatabase(desired.name, desired))
    metrics.database_created(desired.name)


def alter_database(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, AlterDatabasePayload)
    name = ctx.target_db(payload.after.name)
    current = ctx.catalog.get_database(name)
    if current is None:
        raise ApplyError("database is missing on the target", obj=name)
    desired = _db_snapshot(ctx, payload.after, event.event_id, current)
    if current != desired:
        ctx.do(AlterDatabase(name, desired))


def drop_database(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, DatabasePayload)
    name = ctx.target_db(payload.database.name if payload.database else event.db or "")
    if ctx.catalog.get_database(name) is not None:
        ctx.do(DropDatabase(name))
    door.remove_tree(ctx, ctx.paths.database_location(name), event_id=event.event_id)
    by_state.REGISTRY.forget_database(name)
    metrics.forget_database(name)  # its series go with it (the watermark's too: is_dropped)
