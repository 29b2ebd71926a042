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
    PartitionSnapshot,
    ReloadPayload,
    TableSnapshot,
)
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.target.apply.by_state import marked, source_location, state_sync_reason, stats_changed
from streamer.target.apply.effects import (
    AlterPartitions,
    AlterTable,
    ClaimExternal,
    ClearDir,
    CopyWriteIds,
    CreateTable,
    DropTable,
    Effect,
    ForgetByState,
    ForgetTable,
    NoteByState,
    PublishFiles,
    RelocateDir,
    RememberTable,
    RemoveTree,
    ResetWriteIds,
    SyncByState,
)
from streamer.target.apply.locations import moved_partition, table_locations
from streamer.target.apply.partitions import alter_partition_list
from streamer.target.apply.paths import EXTERNAL_TYPES, VIEW_TYPES
from streamer.target.apply.view import View, is_managed, payload_of
from streamer.target.state.visibility import table_key, target_parameters

_MARKED = "a table replicated by state (marked so on this target)"


def target_table(
    view: View, snap: TableSnapshot, current: TableSnapshot | None
) -> tuple[TableSnapshot, list[Effect]]:
    """The target's table for source snapshot ``snap``, and what placing it takes: names mapped,
    locations derived, every location-bearing parameter moved along (``locations``), our source
    marker; an external table's directory claimed (``ClaimExternal``); for a table replicated by state
    (``by_state``; ``current``, the target's table, may already say so), its source location."""
    renamed = dataclasses.replace(snap, db=view.target_db(snap.db), name=snap.name.lower())
    location = view.paths.table_target(renamed)
    effects: list[Effect] = []
    if location is not None and renamed.table_type in EXTERNAL_TYPES:
        effects.append(ClaimExternal(snap.sd.location or "", location, renamed.qualified_name))
    placed = dataclasses.replace(
        renamed,
        sd=dataclasses.replace(snap.sd, location=location),
        parameters=target_parameters({**snap.parameters, REPL_SOURCE_PARAM: view.source_id}),
    )
    desired = table_locations(view.paths, placed, snap.sd.location)
    reason = state_sync_reason(snap)
    if reason is None and current is not None and source_location(current) and is_managed(desired):
        reason = _MARKED
    if reason is None:
        return desired, effects
    return marked(desired, snap.sd.location), [*effects, NoteByState(desired.db, desired.name, reason)]


def create_table(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, CreateTablePayload)
    db, name = view.target_db(payload.table.db), payload.table.name.lower()
    current = view.known_table(db, name)  # refuses a foreign table before any copy
    desired, effects = target_table(view, payload.table, current)
    if payload.files and desired.sd.location:
        source_dir = payload.table.sd.location
        effects.append(PublishFiles(event.event_id, payload.files, desired.sd.location, source_dir))
    if current is None:
        # a new table has no committed write ids yet, whatever an earlier namesake left behind
        effects += [ResetWriteIds(table_key(desired.db, desired.name)), CreateTable(desired)]
    elif current != desired:
        effects.append(AlterTable(desired.db, desired.name, desired))
    return [*effects, RememberTable(desired)]


def alter_table(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, AlterTablePayload)
    if payload.is_rename:
        return _rename_table(view, event, payload)
    db, name = view.target_db(payload.after.db), payload.after.name.lower()
    current = view.known_table(db, name)
    if current is None:
        raise ApplyError("table is missing on the target", obj=f"{db}.{name}")
    stats = stats_changed(payload.before.parameters, payload.after.parameters)
    desired, effects = target_table(view, payload.after, current)
    if current != desired:
        effects.append(AlterTable(desired.db, desired.name, desired))
    effects.append(RememberTable(desired))
    if payload.is_truncate and is_managed(desired) and desired.sd.location:
        effects.append(ClearDir(event.event_id, desired.sd.location))
    elif stats and source_location(desired):  # its writer logged no INSERT: the source's files now
        effects.append(SyncByState(event, desired))
    return effects


def _rename_table(view: View, event: Event, payload: AlterTablePayload) -> list[Effect]:
    old_db, old_name = view.target_db(payload.before.db), payload.before.name.lower()
    new_db, new_name = view.target_db(payload.after.db), payload.after.name.lower()
    old = view.known_table(old_db, old_name)
    new = view.known_table(new_db, new_name)
    if old is None and new is None:
        raise ApplyError("table to rename is missing on the target", obj=f"{old_db}.{old_name}")
    effects: list[Effect] = [ForgetTable(old_db, old_name), ForgetTable(new_db, new_name),
                             ForgetByState(old_db, old_name)]
    desired, placing = target_table(view, payload.after, old or new)
    effects += placing
    old_key, new_key = table_key(old_db, old_name), table_key(desired.db, desired.name)
    if old is not None:  # readers find the write ids under the new name before the table appears
        effects.append(CopyWriteIds(old_key, new_key))
    # Readers must never see the table half-moved: where the filesystem can link, the new
    # location gets a complete copy first, metadata switches over, and the old tree goes last.
    old_dir = view.paths.table_location(old_db, old_name)
    new_dir = view.paths.table_location(desired.db, desired.name)
    if is_managed(desired):
        effects.append(RelocateDir(event.event_id, old_dir, new_dir))
    if old is not None:
        effects.append(AlterTable(old_db, old_name, desired))
    elif new != desired:
        effects.append(AlterTable(desired.db, desired.name, desired))
    if is_managed(desired) and desired.partition_keys:
        moves = [(old_dir, new_dir)]
        if payload.before.sd.location and payload.after.sd.location:
            moves.append((payload.before.sd.location, payload.after.sd.location))
        listed = view.partitions(old_db, old_name) if old is not None else view.partitions(new_db, new_name)
        effects += _repointed(view, desired, listed, moves)
    if old_dir != new_dir:
        effects.append(RemoveTree(event.event_id, old_dir, if_linked=True))
    if old_key != new_key:
        effects.append(ResetWriteIds(old_key))
    return effects


def _repointed(
    view: View, desired: TableSnapshot, listed: list[PartitionSnapshot], moves: list[tuple[str, str]]
) -> list[Effect]:
    """After a managed rename: the table's partitions (``listed``, read before it) at their derived
    locations under the new name, their location-bearing parameters moved by ``moves`` (old dir, new
    dir: the target's, the source's)."""
    keys = [c.name for c in desired.partition_keys]
    moved = []
    for p in listed:
        renamed = dataclasses.replace(p, db=desired.db, table=desired.name)  # as the rename leaves it
        loc = view.paths.partition_location(desired.db, desired.name, keys, p.values)
        new = moved_partition(dataclasses.replace(renamed, sd=dataclasses.replace(p.sd, location=loc)), moves)
        if new != renamed:
            moved.append(new)
    return [AlterPartitions(desired, moved)] if moved else []


def drop_table(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, DropTablePayload)
    snap = payload.table
    db = view.target_db(snap.db if snap else event.db or "")
    name = (snap.name if snap else event.table or "").lower()
    current = view.known_table(db, name)
    effects: list[Effect] = [ForgetTable(db, name), ForgetByState(db, name)]
    if current is not None:
        effects.append(DropTable(db, name))
    known = snap or current
    kind = known.table_type if known is not None else "MANAGED_TABLE"
    if kind not in EXTERNAL_TYPES and kind not in VIEW_TYPES:
        effects.append(RemoveTree(event.event_id, view.paths.table_location(db, name)))
    return effects


def reload_table(view: View, event: Event) -> list[Effect]:
    """A RELOAD: its table, then its partitions, made equal to the source's."""
    payload = payload_of(event, ReloadPayload)
    if payload.table is None:
        return []
    db, name = view.target_db(payload.table.db), payload.table.name.lower()
    current = view.existing_table(db, name)
    if current is None:
        raise ApplyError("table is missing on the target", obj=f"{db}.{name}")
    desired, effects = target_table(view, payload.table, current)
    if current != desired:
        effects.append(AlterTable(desired.db, desired.name, desired))
    if payload.partitions:
        effects += alter_partition_list(view, event, desired, payload.table, payload.partitions, False)
    return effects
