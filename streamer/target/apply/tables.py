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
from streamer.target.apply.context import ApplyContext, is_managed, payload_of
from streamer.target.apply.files import clear_dir, link_dir, move_dir, remove_tree
from streamer.target.apply.partitions import alter_partition_list
from streamer.target.apply.paths import EXTERNAL_TYPES, VIEW_TYPES
from streamer.target.state.visibility import table_key


def create_table(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, CreateTablePayload)
    desired = ctx.target_table(payload.table)
    current = ctx.known_table(desired.db, desired.name)  # refuses a foreign table before any copy
    if payload.files and desired.sd.location:
        source_dir = payload.table.sd.location
        ctx.copy(event, payload.files, desired.sd.location, source_dir).publish()
    if current is None:
        # a new table has no committed write ids yet, whatever an earlier namesake left behind
        ctx.acid.update(lambda v: v.reset_table(table_key(desired.db, desired.name)))
        ctx.catalog.create_table(desired)
    elif current != desired:
        ctx.catalog.alter_table(desired.db, desired.name, desired)
    ctx.memory.remember_table(desired)


def alter_table(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, AlterTablePayload)
    desired = ctx.target_table(payload.after)
    if payload.is_rename:
        _rename_table(ctx, event, payload, desired)
        return
    current = ctx.known_table(desired.db, desired.name)
    if current is None:
        raise ApplyError("table is missing on the target", obj=f"{desired.db}.{desired.name}")
    if current != desired:
        ctx.catalog.alter_table(desired.db, desired.name, desired)
    ctx.memory.remember_table(desired)
    if payload.is_truncate and is_managed(desired) and desired.sd.location:
        clear_dir(desired.sd.location, ctx.paths.roots, recursive_files=True, event_id=event.event_id)


def _rename_table(
    ctx: ApplyContext, event: Event, payload: AlterTablePayload, desired: TableSnapshot
) -> None:
    old_db, old_name = ctx.target_db(payload.before.db), payload.before.name.lower()
    ctx.memory.forget_table(old_db, old_name)  # (apply() forgets all after a rename; this holds within)
    ctx.memory.forget_table(desired.db, desired.name)
    old = ctx.existing_table(old_db, old_name)
    new = ctx.existing_table(desired.db, desired.name)
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
        linked = link_dir(old_dir, new_dir, ctx.paths.roots, event_id=event.event_id)
        if not linked:
            move_dir(old_dir, new_dir, ctx.paths.roots, event_id=event.event_id)
    if old is not None:
        ctx.catalog.alter_table(old_db, old_name, desired)
    elif new != desired:
        ctx.catalog.alter_table(desired.db, desired.name, desired)
    if is_managed(desired) and desired.partition_keys:
        _repoint_partitions(ctx, desired)
    if linked and old_dir != ctx.paths.table_location(desired.db, desired.name):
        remove_tree(old_dir, ctx.paths.roots, event_id=event.event_id)
    if old_key != new_key:
        ctx.acid.update(lambda v: v.reset_table(old_key))


def _repoint_partitions(ctx: ApplyContext, desired: TableSnapshot) -> None:
    """After a managed rename: the table's partitions at their derived locations under the new name."""
    keys = [c.name for c in desired.partition_keys]
    moved = []
    for p in ctx.catalog.list_partitions(desired.db, desired.name):
        loc = ctx.paths.partition_location(desired.db, desired.name, keys, p.values)
        if p.sd.location != loc or (p.db, p.table) != (desired.db, desired.name):
            moved.append(
                dataclasses.replace(
                    p, db=desired.db, table=desired.name, sd=dataclasses.replace(p.sd, location=loc)
                )
            )
    if moved:
        ctx.catalog.alter_partitions(desired.db, desired.name, moved)


def drop_table(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, DropTablePayload)
    snap = payload.table
    db = ctx.target_db(snap.db if snap else event.db or "")
    name = (snap.name if snap else event.table or "").lower()
    ctx.memory.forget_table(db, name)
    current = ctx.existing_table(db, name)
    if current is not None:
        ctx.catalog.drop_table(db, name)
    known = snap or current
    kind = known.table_type if known is not None else "MANAGED_TABLE"
    if kind not in EXTERNAL_TYPES and kind not in VIEW_TYPES:
        remove_tree(ctx.paths.table_location(db, name), ctx.paths.roots, event_id=event.event_id)


def reload(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, ReloadPayload)
    if payload.table is None:
        return
    desired = ctx.target_table(payload.table)
    current = ctx.existing_table(desired.db, desired.name)
    if current is None:
        raise ApplyError("table is missing on the target", obj=desired.qualified_name)
    if current != desired:
        ctx.catalog.alter_table(desired.db, desired.name, desired)
    if payload.partitions:
        alter_partition_list(ctx, event, desired, payload.table, payload.partitions, truncate=False)
