"""Table events: files land before the metadata that shows them, a managed rename never shows a
half-moved table, and a drop removes metadata before files. Design: docs/design/apply.md.
"""

from __future__ import annotations

import dataclasses

from streamer.errors import ApplyError
from streamer.events.model import (
    AlterTablePayload,
    CreateTablePayload,
    DropTablePayload,
    Event,
    ReloadPayload,
    TableSnapshot,
)
from streamer.target.apply import door
from streamer.target.apply.by_state import REGISTRY, marked, source_location, state_sync_reason, stats_changed
from streamer.target.apply.context import ApplyContext, is_managed, payload_of
from streamer.target.apply.door import AlterPartitions, AlterTable, CreateTable, DropTable
from streamer.target.apply.locations import moved_partition, table_locations
from streamer.target.apply.partitions import alter_partition_list
from streamer.target.apply.paths import EXTERNAL_TYPES, VIEW_TYPES
from streamer.target.apply.state_sync import sync_by_state
from streamer.target.state.visibility import table_key

_MARKED = "a table replicated by state (marked so on this target)"


def target_table(
    ctx: ApplyContext, snap: TableSnapshot, current: TableSnapshot | None
) -> TableSnapshot:
    """The target's table for source snapshot ``snap``: names mapped, locations derived, every
    location-bearing parameter moved along (``locations``), and, for a table replicated by state
    (``by_state``; ``current``, the target's table, may already say so), its source location."""
    desired = table_locations(ctx.paths, ctx.target_table(snap), snap.sd.location)
    reason = state_sync_reason(snap)
    if reason is None and current is not None and source_location(current) and is_managed(desired):
        reason = _MARKED
    if reason is None:
        return desired
    REGISTRY.note(desired.db, desired.name, reason)
    return marked(desired, snap.sd.location)


def create_table(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, CreateTablePayload)
    db, name = ctx.target_db(payload.table.db), payload.table.name.lower()
    current = ctx.known_table(db, name)  # refuses a foreign table before any copy
    desired = target_table(ctx, payload.table, current)
    if payload.files and desired.sd.location:
        source_dir = payload.table.sd.location
        ctx.copy(event, payload.files, desired.sd.location, source_dir).publish()
    if current is None:
        # a new table has no committed write ids yet, whatever an earlier namesake left behind
        ctx.acid.update(lambda v: v.reset_table(table_key(desired.db, desired.name)))
        ctx.do(CreateTable(desired))
    elif current != desired:
        ctx.do(AlterTable(desired.db, desired.name, desired))
    ctx.memory.remember_table(desired)


def alter_table(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, AlterTablePayload)
    if payload.is_rename:
        _rename_table(ctx, event, payload)
        return
    db, name = ctx.target_db(payload.after.db), payload.after.name.lower()
    current = ctx.known_table(db, name)
    if current is None:
        raise ApplyError("table is missing on the target", obj=f"{db}.{name}")
    stats = stats_changed(payload.before.parameters, payload.after.parameters)
    desired = target_table(ctx, payload.after, current)
    if current != desired:
        ctx.do(AlterTable(desired.db, desired.name, desired))
    ctx.memory.remember_table(desired)
    if payload.is_truncate and is_managed(desired) and desired.sd.location:
        door.clear_dir(ctx, desired.sd.location, recursive_files=True, event_id=event.event_id)
    elif stats and source_location(desired):  # its writer logged no INSERT: the source's files now
        sync_by_state(ctx, event, desired)


def _rename_table(ctx: ApplyContext, event: Event, payload: AlterTablePayload) -> None:
    old_db, old_name = ctx.target_db(payload.before.db), payload.before.name.lower()
    new_db, new_name = ctx.target_db(payload.after.db), payload.after.name.lower()
    old = ctx.known_table(old_db, old_name)
    new = ctx.known_table(new_db, new_name)
    ctx.memory.forget_table(old_db, old_name)  # (apply() forgets both after a rename; this holds within)
    ctx.memory.forget_table(new_db, new_name)
    REGISTRY.forget(old_db, old_name)
    desired = target_table(ctx, payload.after, old or new)
    if old is None and new is None:
        raise ApplyError("table to rename is missing on the target", obj=f"{old_db}.{old_name}")
    old_key, new_key = table_key(old_db, old_name), table_key(desired.db, desired.name)
    if old is not None:  # readers find the write ids under the new name before the table appears
        ctx.acid.update(lambda v: v.copy_table(old_key, new_key))
    # Readers must never see the table half-moved: where the filesystem can link, the new
    # location gets a complete copy first, metadata switches over, and the old tree goes last.
    old_dir = ctx.paths.table_location(old_db, old_name)
    linked = False
    if is_managed(desired):
        new_dir = ctx.paths.table_location(desired.db, desired.name)
        linked = door.link_dir(ctx, old_dir, new_dir, event_id=event.event_id)
        if not linked:
            door.move_dir(ctx, old_dir, new_dir, event_id=event.event_id)
    if old is not None:
        ctx.do(AlterTable(old_db, old_name, desired))
    elif new != desired:
        ctx.do(AlterTable(desired.db, desired.name, desired))
    if is_managed(desired) and desired.partition_keys:
        moves = [(old_dir, ctx.paths.table_location(desired.db, desired.name))]
        if payload.before.sd.location and payload.after.sd.location:
            moves.append((payload.before.sd.location, payload.after.sd.location))
        _repoint_partitions(ctx, desired, moves)
    if linked and old_dir != ctx.paths.table_location(desired.db, desired.name):
        door.remove_tree(ctx, old_dir, event_id=event.event_id)
    if old_key != new_key:
        ctx.acid.update(lambda v: v.reset_table(old_key))


def _repoint_partitions(ctx: ApplyContext, desired: TableSnapshot, moves: list[tuple[str, str]]) -> None:
    """After a managed rename: the table's partitions at their derived locations under the new name,
    their location-bearing parameters moved by ``moves`` (old dir, new dir: the target's, the source's)."""
    keys = [c.name for c in desired.partition_keys]
    moved = []
    for p in ctx.catalog.list_partitions(desired.db, desired.name):
        loc = ctx.paths.partition_location(desired.db, desired.name, keys, p.values)
        sd = dataclasses.replace(p.sd, location=loc)
        at = dataclasses.replace(p, db=desired.db, table=desired.name, sd=sd)
        new = moved_partition(at, moves)
        if new != p:
            moved.append(new)
    if moved:
        ctx.do(AlterPartitions(desired, moved))


def drop_table(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, DropTablePayload)
    snap = payload.table
    db = ctx.target_db(snap.db if snap else event.db or "")
    name = (snap.name if snap else event.table or "").lower()
    current = ctx.known_table(db, name)
    ctx.memory.forget_table(db, name)
    REGISTRY.forget(db, name)
    if current is not None:
        ctx.do(DropTable(db, name))
    known = snap or current
    kind = known.table_type if known is not None else "MANAGED_TABLE"
    if kind not in EXTERNAL_TYPES and kind not in VIEW_TYPES:
        door.remove_tree(ctx, ctx.paths.table_location(db, name), event_id=event.event_id)


def reload(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, ReloadPayload)
    if payload.table is None:
        return
    db, name = ctx.target_db(payload.table.db), payload.table.name.lower()
    current = ctx.existing_table(db, name)
    if current is None:
        raise ApplyError("table is missing on the target", obj=f"{db}.{name}")
    desired = target_table(ctx, payload.table, current)
    if current != desired:
        ctx.do(AlterTable(desired.db, desired.name, desired))
    if payload.partitions:
        alter_partition_list(ctx, event, desired, payload.table, payload.partitions, truncate=False)
