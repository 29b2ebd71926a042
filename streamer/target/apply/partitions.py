"""Partition events, decided: files are staged and published before the metastore lists a partition,
and a partition's metadata goes before its files on drop. Pure: a function of the events and the
target's view (``view``), returning effects the executor does. Design: docs/design/apply.md.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import unquote

from streamer.errors import ApplyError
from streamer.events.model import (
    AddPartitionPayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    DropPartitionPayload,
    Event,
    FileRef,
    PartitionSnapshot,
    TableSnapshot,
)
from streamer.target.apply.by_state import marked_partition, source_location, stats_changed
from streamer.target.apply.effects import (
    AddPartitions,
    AlterPartitions,
    ClearDir,
    DropPartitions,
    Effect,
    FileCopy,
    MoveDir,
    PublishTogether,
    PutPartitions,
    Refuse,
    RememberTable,
    RemoveTree,
    SyncByState,
    SyncGone,
)
from streamer.target.apply.locations import partition_locations, partition_place
from streamer.target.apply.paths import partition_name
from streamer.target.apply.view import View, is_managed, payload_of, table_for


def target_partition(
    view: View, table: TableSnapshot, source: TableSnapshot | None, p: PartitionSnapshot
) -> tuple[PartitionSnapshot, list[Effect]]:
    """The target's partition for source partition ``p`` of ``table`` (the target's table), and the
    claim of its external directory if it has one of its own: its location derived, its
    location-bearing parameters moved along, and where ``table`` is replicated by state
    (``by_state``), its source location recorded for the syncs."""
    keys = [c.name for c in table.partition_keys]
    name = partition_name(keys, p.values)
    base = source.sd.location if source is not None else None
    where = p.sd.location or (base.rstrip("/") + "/" + name if base else None)
    placed, claim = partition_place(view.paths, table, p)
    at = dataclasses.replace(p, db=table.db, table=table.name, sd=dataclasses.replace(p.sd, location=placed))
    what = f"{table.qualified_name}/{name}"
    moved = partition_locations(view.paths, at, where, what, (base, table.sd.location))
    return (marked_partition(moved, where) if source_location(table) else moved), ([claim] if claim else [])


def add_partitions(view: View, events: list[Event]) -> list[Effect]:
    """ADD_PARTITION events of one table (a merged step, or one event) in one catalog call, after
    every file of them is staged and published together."""
    first = payload_of(events[0], AddPartitionPayload)
    table, source = table_for(view, events[0], first.table)
    keys = [c.name for c in table.partition_keys]
    effects: list[Effect] = [RememberTable(table)]
    wanted: dict[tuple[str, ...], PartitionSnapshot] = {}
    copies: list[FileCopy] = []
    for event in events:
        payload = payload_of(event, AddPartitionPayload)
        by_name = {partition_name(keys, p.values): p for p in payload.partitions}
        for p in payload.partitions:
            wanted[tuple(p.values)], claims = target_partition(view, table, source, p)
            effects += claims
        groups: dict[str, list[FileRef]] = {}
        for ref in payload.files:
            groups.setdefault(_partition_of(ref, by_name, keys), []).append(ref)
        for name, refs in groups.items():
            p = by_name[name]
            target = wanted[tuple(p.values)]
            read_location = p.sd.location or (source.sd.location if source else None)
            copies.append(FileCopy(event, refs, target.sd.location or "", p.sd.location, read_location,
                                        target))
    if copies:
        effects.append(PublishTogether(table, copies))
    return [*effects, PutPartitions(table, list(wanted.values())), SyncGone(table)]


def add_partition(view: View, event: Event) -> list[Effect]:
    return add_partitions(view, [event])


def alter_partition(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, AlterPartitionPayload)
    table, source = table_for(view, event, payload.table)
    effects: list[Effect] = [RememberTable(table)]
    if payload.before.values != payload.after.values:
        return [*effects, *_rename_partition(view, event, table, source, payload)]
    effects += alter_partition_list(view, event, table, source, [payload.after], payload.is_truncate)
    changed = stats_changed(payload.before.parameters, payload.after.parameters)
    if changed and not payload.is_truncate and source_location(table):  # its writer logged no INSERT
        target, _ = target_partition(view, table, source, payload.after)
        effects.append(SyncByState(event, table, [target]))
    return effects


def alter_partitions(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, AlterPartitionsPayload)
    table, source = table_for(view, event, payload.table)
    return [RememberTable(table),
            *alter_partition_list(view, event, table, source, payload.partitions, payload.is_truncate)]


def alter_partition_list(
    view: View,
    event: Event,
    table: TableSnapshot,
    source: TableSnapshot | None,
    partitions: list[PartitionSnapshot],
    truncate: bool,
) -> list[Effect]:
    """Make existing partitions of ``table`` equal to ``partitions``; ``truncate`` also clears their files."""
    effects: list[Effect] = []
    desired = []
    for p in partitions:
        target, claims = target_partition(view, table, source, p)
        desired.append(target)
        effects += claims
    current = [view.partition(table.db, table.name, p.values) for p in desired]  # one read each
    missing = [p.values for p, got in zip(desired, current, strict=True) if got is None]
    if missing:
        raise ApplyError(f"partitions {missing} are missing on the target", obj=table.qualified_name)
    changed = [p for p, got in zip(desired, current, strict=True) if got != p]
    if changed:
        effects.append(AlterPartitions(table, changed))
    if truncate and is_managed(table):
        effects += [ClearDir(event.event_id, p.sd.location or "") for p in desired]
    return effects


def _rename_partition(
    view: View,
    event: Event,
    table: TableSnapshot,
    source: TableSnapshot | None,
    payload: AlterPartitionPayload,
) -> list[Effect]:
    """Hive's partition rename: move the directory, add the new partition, then drop the old one."""
    old, old_claims = target_partition(view, table, source, payload.before)
    new, new_claims = target_partition(view, table, source, payload.after)
    effects: list[Effect] = [*old_claims, *new_claims]
    if is_managed(table):
        effects.append(MoveDir(event.event_id, old.sd.location or "", new.sd.location or ""))
    current = view.partition(table.db, table.name, new.values)
    if current is None:
        effects.append(AddPartitions(table, [new]))
    elif current != new:
        effects.append(AlterPartitions(table, [new]))
    if view.partition(table.db, table.name, old.values) is not None:
        keys = [c.name for c in table.partition_keys]
        effects.append(DropPartitions(table.db, table.name, [old.values], keys))
    return effects


def drop_partition(view: View, event: Event) -> list[Effect]:
    return drop_partitions(view, [event])


def drop_partitions(view: View, events: list[Event]) -> list[Effect]:
    """DROP_PARTITION events of one table (a merged step, or one event) in one catalog call, then
    the managed table's partition directories. An event whose partitions cannot be named fails as
    itself (``Refuse``), after the events before it are applied, as each would have been as its own
    step."""
    first = payload_of(events[0], DropPartitionPayload)
    db = view.target_db(first.table.db if first.table else events[0].db or "")
    name = (first.table.name if first.table else events[0].table or "").lower()
    table = view.known_table(db, name)  # a batch reads a table once for its partition events
    if table is None:
        return []  # the table is gone (replay after a later drop): nothing to drop
    keys = [c.name for c in table.partition_keys]
    managed = is_managed(table)
    dropped: dict[tuple[str, ...], tuple[int, str | None]] = {}  # values -> (event, directory)
    refused: list[Effect] = []
    for i, event in enumerate(events):
        named: dict[tuple[str, ...], tuple[int, str | None]] = {}
        try:
            for part in drop_specs(event, keys, f"{db}.{name}"):
                where = view.paths.partition_location(db, name, keys, list(part)) if managed else None
                partition_name(keys, list(part))  # what the catalog call names it by
                named.setdefault(tuple(part), (event.event_id, where))
        except ApplyError as exc:
            error = ApplyError(exc.cause, event_id=event.event_id, event_type=str(event.event_type),
                               obj=exc.obj or f"{db}.{name}")
            if not i:
                raise error from exc
            refused = [Refuse(error)]
            break
        for values, at in named.items():
            dropped.setdefault(values, at)
    effects: list[Effect] = [RememberTable(table)]
    if dropped:  # one call; partitions already gone (a replay) are no error
        effects.append(DropPartitions(db, name, [list(v) for v in dropped], keys))
    effects += [RemoveTree(event_id, where) for event_id, where in dropped.values() if where is not None]
    return [*effects, *refused]


def drop_specs(event: Event, keys: list[str], table: str) -> list[list[str]]:
    """The partitions a DROP_PARTITION names, each by one value per partition key of ``table`` (the
    target's), in order. A drop on a table without partition keys, and a spec of another length
    (an empty one: the name of the table's own directory), name no partition of the table: refused,
    before anything is dropped."""
    specs = payload_of(event, DropPartitionPayload).partition_values
    if not specs:
        return []  # names no partition: nothing to drop
    if not keys:
        raise ApplyError(
            f"DROP_PARTITION of {[list(s) for s in specs]} on {table}, which has no partition keys: "
            "refused (there is no partition to drop; a table's own data goes only with the table)",
            obj=table,
        )
    for spec in specs:
        if len(spec) != len(keys):
            raise ApplyError(
                f"DROP_PARTITION names partition {list(spec)} of {table}, whose partition keys are "
                f"{keys}: refused (a partition spec gives one value per key, in order)",
                obj=table,
            )
    return [list(spec) for spec in specs]


def partition_values(name: str) -> list[str]:
    """The values of a partition name (``k=v/k2=v2``), unquoted."""
    return [unquote(kv.split("=", 1)[1]) if "=" in kv else kv for kv in name.split("/")]


def _partition_of(ref: FileRef, by_name: dict[str, PartitionSnapshot], keys: list[str]) -> str:
    """The partition name (as computed here) a file of an ADD_PARTITION event belongs to."""
    if ref.partition is None:
        if len(by_name) == 1:
            return next(iter(by_name))
        raise ApplyError("file names no partition in a multi-partition event", obj=ref.uri)
    if ref.partition in by_name:
        return ref.partition
    normalised = partition_name(keys, partition_values(ref.partition)) if keys else ref.partition
    if normalised in by_name:
        return normalised
    raise ApplyError(f"file belongs to partition {ref.partition!r}, not one the event adds", obj=ref.uri)
