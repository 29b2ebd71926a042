"""Partition events: files are staged and published before the metastore lists a partition, and a
partition's metadata goes before its files on drop. Design: docs/design/apply.md.
"""

from __future__ import annotations

import logging
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
from streamer.target.apply import door
from streamer.target.apply.by_state import marked_partition, source_location, stats_changed
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.effects import AddPartitions, AlterPartitions, DropPartitions
from streamer.target.apply.files import Staged
from streamer.target.apply.locations import partition_locations
from streamer.target.apply.paths import partition_name
from streamer.target.apply.state_sync import gone_to_state, sync_by_state
from streamer.target.apply.view import is_managed, payload_of

log = logging.getLogger(__name__)


def target_partition(
    ctx: ApplyContext, table: TableSnapshot, source: TableSnapshot | None, p: PartitionSnapshot
) -> PartitionSnapshot:
    """The target's partition for source partition ``p`` of ``table`` (the target's table): its
    location derived, its location-bearing parameters moved along, and where ``table`` is replicated
    by state (``by_state``), its source location recorded for the syncs."""
    keys = [c.name for c in table.partition_keys]
    name = partition_name(keys, p.values)
    base = source.sd.location if source is not None else None
    where = p.sd.location or (base.rstrip("/") + "/" + name if base else None)
    moved = partition_locations(ctx.paths, ctx.target_partition(table, source, p), where,
                                f"{table.qualified_name}/{name}", (base, table.sd.location))
    return marked_partition(moved, where) if source_location(table) else moved


def add_partitions(ctx: ApplyContext, events: list[Event]) -> None:
    """ADD_PARTITION events of one table (a merged step, or one event) in one catalog call."""
    first = payload_of(events[0], AddPartitionPayload)
    table, source = ctx.table_for(events[0], first.table)
    keys = [c.name for c in table.partition_keys]
    wanted: dict[tuple[str, ...], PartitionSnapshot] = {}
    staged: list[Staged] = []
    resync: list[tuple[Event, PartitionSnapshot]] = []  # files gone, table replicated by state
    try:
        for event in events:
            payload = payload_of(event, AddPartitionPayload)
            by_name = {partition_name(keys, p.values): p for p in payload.partitions}
            for p in payload.partitions:
                wanted[tuple(p.values)] = target_partition(ctx, table, source, p)
            groups: dict[str, list[FileRef]] = {}
            for ref in payload.files:
                name = _partition_of(ref, by_name, keys)
                groups.setdefault(name, []).append(ref)
            for name, refs in groups.items():
                p = by_name[name]
                target = wanted[tuple(p.values)]
                read_location = p.sd.location or (source.sd.location if source else None)
                to = target.sd.location or ""
                try:
                    staged.append(ctx.copy(event, refs, to, p.sd.location, read_location))
                except ApplyError as exc:
                    if not gone_to_state(exc, table):
                        raise
                    log.warning("event %s: %s; %s is replicated by state: syncing partition %s from the "
                                "source instead", event.event_id, exc.cause, table.qualified_name, name)
                    resync.append((event, target))
    except BaseException:
        for s in staged:
            s.discard()
        raise
    for s in staged:
        s.publish()  # partition directories are invisible until the metastore lists them
    _add_to_catalog(ctx, table, wanted)
    for event, target in resync:
        sync_by_state(ctx, event, table, [target])


def _add_to_catalog(
    ctx: ApplyContext, table: TableSnapshot, wanted: dict[tuple[str, ...], PartitionSnapshot]
) -> None:
    try:  # the common case, one call; all or nothing, so a failure leaves nothing half-added
        ctx.do(AddPartitions(table, list(wanted.values())))
        return
    except ApplyError:  # some exist (a replay after a crash) or a real failure: look, then decide
        pass
    existing = {
        v: got for v in wanted if (got := ctx.catalog.get_partition(table.db, table.name, list(v)))
    }
    new = [p for v, p in wanted.items() if v not in existing]
    changed = [p for v, p in wanted.items() if v in existing and existing[v] != p]
    if new:
        ctx.do(AddPartitions(table, new))
    if changed:
        ctx.do(AlterPartitions(table, changed))


def add_partition(ctx: ApplyContext, event: Event) -> None:
    add_partitions(ctx, [event])


def alter_partition(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, AlterPartitionPayload)
    table, source = ctx.table_for(event, payload.table)
    if payload.before.values != payload.after.values:
        _rename_partition(ctx, event, table, source, payload)
        return
    alter_partition_list(ctx, event, table, source, [payload.after], payload.is_truncate)
    changed = stats_changed(payload.before.parameters, payload.after.parameters)
    if changed and not payload.is_truncate and source_location(table):  # its writer logged no INSERT
        sync_by_state(ctx, event, table, [target_partition(ctx, table, source, payload.after)])


def alter_partitions(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, AlterPartitionsPayload)
    table, source = ctx.table_for(event, payload.table)
    alter_partition_list(ctx, event, table, source, payload.partitions, payload.is_truncate)


def alter_partition_list(
    ctx: ApplyContext,
    event: Event,
    table: TableSnapshot,
    source: TableSnapshot | None,
    partitions: list[PartitionSnapshot],
    truncate: bool,
) -> None:
    """Make existing partitions of ``table`` equal to ``partitions``; ``truncate`` also clears their files."""
    desired = [target_partition(ctx, table, source, p) for p in partitions]
    current = [ctx.catalog.get_partition(table.db, table.name, p.values) for p in desired]  # one read each
    missing = [p.values for p, got in zip(desired, current, strict=True) if got is None]
    if missing:
        raise ApplyError(f"partitions {missing} are missing on the target", obj=table.qualified_name)
    changed = [p for p, got in zip(desired, current, strict=True) if got != p]
    if changed:
        ctx.do(AlterPartitions(table, changed))
    if truncate and is_managed(table):
        for p in desired:
            door.clear_dir(ctx, p.sd.location or "", recursive_files=True, event_id=event.event_id)


def _rename_partition(
    ctx: ApplyContext,
    event: Event,
    table: TableSnapshot,
    source: TableSnapshot | None,
    payload: AlterPartitionPayload,
) -> None:
    """Hive's partition rename: move the directory, add the new partition, then drop the old one."""
    old = target_partition(ctx, table, source, payload.before)
    new = target_partition(ctx, table, source, payload.after)
    if is_managed(table):
        door.move_dir(ctx, old.sd.location or "", new.sd.location or "", event_id=event.event_id)
    current = ctx.catalog.get_partition(table.db, table.name, new.values)
    if current is None:
        ctx.do(AddPartitions(table, [new]))
    elif current != new:
        ctx.do(AlterPartitions(table, [new]))
    if ctx.catalog.get_partition(table.db, table.name, old.values) is not None:
        ctx.do(DropPartitions(table.db, table.name, [old.values], [c.name for c in table.partition_keys]))


def drop_partition(ctx: ApplyContext, event: Event) -> None:
    drop_partitions(ctx, [event])


def drop_partitions(ctx: ApplyContext, events: list[Event]) -> None:
    """DROP_PARTITION events of one table (a merged step, or one event) in one catalog call, then
    the managed table's partition directories. An event whose partitions cannot be named fails as
    itself, after the events before it are applied, as each would have been as its own step."""
    first = payload_of(events[0], DropPartitionPayload)
    db = ctx.target_db(first.table.db if first.table else events[0].db or "")
    name = (first.table.name if first.table else events[0].table or "").lower()
    table = ctx.known_table(db, name)  # a batch reads a table once for its partition events
    if table is None:
        return  # the table is gone (replay after a later drop): nothing to drop
    ctx.memory.remember_table(table)
    keys = [c.name for c in table.partition_keys]
    managed = is_managed(table)
    dropped: dict[tuple[str, ...], tuple[int, str | None]] = {}  # values -> (event, directory)
    for i, event in enumerate(events):
        try:
            for part in drop_specs(event, keys, f"{db}.{name}"):
                where = ctx.paths.partition_location(db, name, keys, list(part)) if managed else None
                partition_name(keys, list(part))  # what the catalog call names it by
                dropped.setdefault(tuple(part), (event.event_id, where))
        except ApplyError as exc:
            if i:
                drop_partitions(ctx, events[:i])
            raise ApplyError(exc.cause, event_id=event.event_id, event_type=str(event.event_type),
                             obj=exc.obj or f"{db}.{name}") from exc
    if dropped:  # one call; partitions already gone (a replay) are no error
        ctx.do(DropPartitions(db, name, [list(v) for v in dropped], keys))
    for event_id, where in dropped.values():
        if where is not None:
            door.remove_tree(ctx, where, event_id=event_id)


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
