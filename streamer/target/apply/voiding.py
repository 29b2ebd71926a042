"""Voiding runs: an INSERT whose files are gone, applied together with the later event that replaces
or drops what it wrote. Pure.

Hive 2.3 recycles nothing an INSERT OVERWRITE replaces, so a target behind an unpaced writer can
find an INSERT's files deleted before it copied them. Those files are in no state of the table from
the overwrite (or drop, or truncate) on; when that event is in reach, the table's events from the
INSERT through it apply as one step, the voided INSERTs never copied, and the table goes from its
state before the INSERT to its state after that event: both states the source had. Why this is
only a fallback (other tables' events between go on, so a reader of the whole database may see them
first): docs/dr.md, "Writers the replica lags behind".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from streamer.errors import StreamerError
from streamer.events.model import (
    AddConstraintsPayload,
    AddPartitionPayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    InsertPayload,
    TableSnapshot,
)
from streamer.target.apply.by_state import state_sync_reason, stats_changed
from streamer.target.apply.paths import partition_name

TableKey = tuple[str, str]  # (source database, table), lower case
ObjectKey = tuple[str, str, tuple[str, ...]]  # a table and its partition values (() when unpartitioned)


@dataclass(frozen=True)
class VoidingRun:
    """The events of ``table`` from the failed step (``starts``) through ``end``, applied as one step."""

    table: TableKey
    starts: tuple[int, ...]  # the failed step's events (an INSERT, or ADD_PARTITIONs with files)
    end: int  # the event that replaces or drops the last voided files
    voided: frozenset[int]  # INSERTs a later event of the run replaces: never applied
    deferred: tuple[int, ...]  # the table's other events before ``end`` (and the failed step's)
    # ADD_PARTITION id -> partitions whose files a later event of the run replaces: added without them
    stripped: dict[int, frozenset[tuple[str, ...]]] = field(default_factory=dict)

    @property
    def start(self) -> int:
        return self.starts[0]

    def holds(self, event_id: int) -> bool:
        """Whether ``event_id`` belongs to the run and comes before its end."""
        return event_id in self.voided or event_id in self.deferred

    def describe(self) -> str:
        voided = ", ".join(str(i) for i in sorted({*self.voided, *self.stripped}))
        return (
            f"{self.table[0]}.{self.table[1]}: events {self.start}..{self.end} as one step, the files of "
            f"events {voided} voided by a later overwrite or drop"
        )


def written_object(event: Event) -> ObjectKey | None:
    """The table or partition a non-transactional INSERT writes, else None (a transactional write
    becomes visible by its commit, never by a later overwrite)."""
    p = event.payload
    if event.event_type is not EventType.INSERT or not isinstance(p, InsertPayload):
        return None
    if p.table is None or p.table.is_transactional or not event.db or not event.table:
        return None
    return (event.db.lower(), event.table.lower(), tuple(p.partition_values))


def written_objects(event: Event) -> list[ObjectKey]:
    """The tables or partitions an event writes files into: a non-transactional INSERT's, or each
    partition of an ADD_PARTITION that lists files for it (a dynamic insert creating partitions)."""
    obj = written_object(event)
    if obj is not None:
        return [obj]
    p = event.payload
    if not isinstance(p, AddPartitionPayload) or p.table is None or p.table.is_transactional or not p.files:
        return []
    if not event.db or not event.table:
        return []
    out = []
    for values in {tuple(v) for ref in p.files if (v := _file_partition(p, ref)) is not None}:
        out.append((event.db.lower(), event.table.lower(), values))
    return sorted(out)


def strip_files(event: Event, partitions: frozenset[tuple[str, ...]]) -> Event:
    """``event`` (an ADD_PARTITION) without the files of ``partitions``: a later event of its run
    replaces them, so they are not needed (and may be gone)."""
    p = event.payload
    if not isinstance(p, AddPartitionPayload) or not partitions:
        return event
    kept = [ref for ref in p.files if _file_partition(p, ref) not in partitions]
    return dataclasses.replace(event, payload=dataclasses.replace(p, files=kept))


def _file_partition(p: AddPartitionPayload, ref: FileRef) -> tuple[str, ...] | None:
    """The partition values a file of an ADD_PARTITION belongs to (None when it names none known)."""
    if ref.partition is None:
        return tuple(p.partitions[0].values) if len(p.partitions) == 1 else None
    keys = [c.name for c in p.table.partition_keys] if p.table is not None else []
    for part in p.partitions:
        try:
            name = partition_name(keys, list(part.values))
        except StreamerError:  # values that do not fit the keys: the handler halts on them
            return None
        if ref.partition == name:
            return tuple(part.values)
    return None


def _managed(table: TableSnapshot | None) -> bool:
    """Whether a dropped table's files go with it on the target: a managed table's do. A Hive 2.3 drop
    message may carry no table; it counts as managed, the common case (an external table's directory
    kept after its drop is no table's data, on either side)."""
    return table is None or table.table_type == "MANAGED_TABLE"


def voids(event: Event, obj: ObjectKey) -> bool:
    """Whether ``event`` replaces or removes every file of ``obj``: an INSERT OVERWRITE of it, a drop
    or truncate of its table, a drop or truncate of its partition, or an ALTER of its statistics
    that syncs it from the source (a table replicated by state)."""
    if _table(event) != obj[:2]:
        return False
    p, values = event.payload, obj[2]
    if isinstance(p, InsertPayload):
        return p.replace and written_object(event) == obj
    if isinstance(p, DropTablePayload):  # the target removes a managed table's files only
        return _managed(p.table)
    if isinstance(p, DropPartitionPayload):
        return _managed(p.table) and bool(values) and any(tuple(v) == values for v in p.partition_values)
    if isinstance(p, AlterTablePayload):
        synced = _synced_by_state(p.after, p.before.parameters, p.after.parameters)
        return not p.is_rename and (p.is_truncate or synced)
    if isinstance(p, AlterPartitionPayload):
        synced = p.table is not None and _synced_by_state(p.table, p.before.parameters, p.after.parameters)
        return (p.is_truncate or synced) and bool(values) and tuple(p.after.values) == values
    if isinstance(p, AlterPartitionsPayload):
        return p.is_truncate and bool(values) and any(tuple(s.values) == values for s in p.partitions)
    return False


def voiding_run(
    failed: Sequence[Event], later: Sequence[Event], step_ends: Collection[int] | None = None
) -> VoidingRun | None:
    """The run that voids the files of ``failed`` (a step's events whose files could not be copied:
    an INSERT, or ADD_PARTITIONs of one table) within ``later`` (its database's next events, in
    order), or None when nothing voids them before the table is renamed, relocated, re-created or
    its database dropped.

    The run extends to the voiding event of every object written inside it that has one, so that
    none of them needs its files either, and (given ``step_ends``, the last event ids of the planned
    steps) to the end of the step that holds its end: a step is applied whole."""
    objects = [(-1, o) for e in failed for o in written_objects(e)]
    if not objects:
        return None
    table = objects[0][1][:2]
    window: list[Event] = []
    for event in later:
        if _stops(event, table):
            break
        if _table(event) != table:
            continue
        window.append(event)
        if event.event_type is EventType.DROP_TABLE:
            break
    ends = [v for _, o in objects if (v := _voider(window, -1, o)) is not None]
    if not ends:
        return None
    end = max(ends)
    writes = objects + [(i, o) for i, e in enumerate(window) for o in written_objects(e)]
    grown = True
    while grown:  # every object written inside the run whose voider lies further extends it
        grown = False
        for at, o in writes:
            found = _voider(window, at, o) if at <= end else None  # the end itself too
            if found is not None and found > end:
                end, grown = found, True
        while step_ends is not None and window[end].event_id not in step_ends:
            if end + 1 == len(window):
                return None  # its step holds events past the table's window
            end, grown = end + 1, True
    gone = {(at, o) for at, o in writes if at < end and _voided_by(window, at, o, end)}
    events = [*failed, *window[:end]]
    ats = [-1] * len(failed) + list(range(end))
    voided: set[int] = set()
    stripped: dict[int, frozenset[tuple[str, ...]]] = {}
    for at, event in zip(ats, events, strict=True):
        if isinstance(event.payload, AddPartitionPayload):
            parts = frozenset(o[2] for o in written_objects(event) if (at, o) in gone)
            if parts:
                stripped[event.event_id] = parts
        elif (obj := written_object(event)) is not None and (at, obj) in gone:
            voided.add(event.event_id)
    deferred = tuple(e.event_id for e in events if e.event_id not in voided)
    starts = tuple(e.event_id for e in failed)
    return VoidingRun(table, starts, window[end].event_id, frozenset(voided), deferred, stripped)


def _voided_by(window: Sequence[Event], after: int, obj: ObjectKey, end: int) -> bool:
    found = _voider(window, after, obj)
    return found is not None and found <= end


def _voider(window: Sequence[Event], after: int, obj: ObjectKey) -> int | None:
    """Index of the first event of ``window`` after ``after`` that voids ``obj``."""
    for i in range(after + 1, len(window)):
        if voids(window[i], obj):
            return i
    return None


def _synced_by_state(table: TableSnapshot, before: Mapping[str, str], after: Mapping[str, str]) -> bool:
    """Whether an ALTER of ``table``'s file statistics makes the target sync its directories from
    the source's (a table Spark writes logging no INSERT, ``streamer.target.apply.by_state``): the
    sync replaces whatever files earlier events named."""
    return state_sync_reason(table) is not None and stats_changed(before, after)


def _table(event: Event) -> TableKey:
    return ((event.db or "").lower(), (event.table or "").lower())


def _stops(event: Event, table: TableKey) -> bool:
    """Whether a run on ``table`` cannot reach past ``event``: the table renamed (either way),
    re-created, relocated or made transactional, a partition of it renamed or relocated, a
    constraint on or referencing it added, its database dropped."""
    p = event.payload
    if event.event_type is EventType.DROP_DATABASE:
        return (event.db or "").lower() == table[0]
    if isinstance(p, AlterTablePayload):
        names = {(p.before.db.lower(), p.before.name.lower()), (p.after.db.lower(), p.after.name.lower())}
        moved = p.is_rename or not _same_location(p.before.sd.location, p.after.sd.location)
        return table in names and (moved or p.before.is_transactional != p.after.is_transactional)
    if isinstance(p, AddConstraintsPayload):  # another table's key on this one must find it as logged
        named = {(c.db.lower(), c.table.lower()) for c in p.constraints}
        named |= {((c.ref_db or "").lower(), (c.ref_table or "").lower()) for c in p.constraints}
        return table in named
    if _table(event) != table:
        return False
    if event.event_type is EventType.CREATE_TABLE:
        return True
    if isinstance(p, AlterPartitionPayload):
        moved = not _same_location(p.before.sd.location, p.after.sd.location)
        return p.before.values != p.after.values or moved
    return False


def _same_location(before: str | None, after: str | None) -> bool:
    """Whether an ALTER left a location where it was: unknown on either side counts as unchanged (a
    Hive 2.3 message may carry one side only), and ``file:/x`` is ``file:///x``."""
    if not before or not after:
        return True
    return _spelled(before) == _spelled(after)


def _spelled(location: str) -> tuple[str, str, str]:
    parts = urlsplit(location)
    return (parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"))
