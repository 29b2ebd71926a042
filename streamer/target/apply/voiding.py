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

from collections.abc import Sequence
from dataclasses import dataclass

from streamer.events.model import (
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
    DropPartitionPayload,
    Event,
    EventType,
    InsertPayload,
)

TableKey = tuple[str, str]  # (source database, table), lower case
ObjectKey = tuple[str, str, tuple[str, ...]]  # a table and its partition values (() when unpartitioned)


@dataclass(frozen=True)
class VoidingRun:
    """The events of ``table`` from the INSERT ``start`` through ``end``, applied as one step."""

    table: TableKey
    start: int  # the INSERT whose files were gone
    end: int  # the event that replaces or drops the last voided INSERT's files
    voided: frozenset[int]  # INSERTs (``start`` among them) a later event of the run replaces
    deferred: tuple[int, ...]  # the table's other events before ``end``, applied just before it

    def holds(self, event_id: int) -> bool:
        """Whether ``event_id`` belongs to the run and comes before its end."""
        return event_id in self.voided or event_id in self.deferred

    def describe(self) -> str:
        voided = ", ".join(str(i) for i in sorted(self.voided))
        return (
            f"{self.table[0]}.{self.table[1]}: events {self.start}..{self.end} as one step, "
            f"INSERTs {voided} voided by a later overwrite or drop"
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


def voids(event: Event, obj: ObjectKey) -> bool:
    """Whether ``event`` replaces or removes every file of ``obj``: an INSERT OVERWRITE of it, a drop
    or truncate of its table, a drop or truncate of its partition."""
    if _table(event) != obj[:2]:
        return False
    p, values = event.payload, obj[2]
    if isinstance(p, InsertPayload):
        return p.replace and written_object(event) == obj
    if event.event_type is EventType.DROP_TABLE:
        return True
    if isinstance(p, DropPartitionPayload):
        return bool(values) and any(tuple(v) == values for v in p.partition_values)
    if isinstance(p, AlterTablePayload):
        return p.is_truncate and not p.is_rename
    if isinstance(p, AlterPartitionPayload):
        return p.is_truncate and bool(values) and tuple(p.after.values) == values
    if isinstance(p, AlterPartitionsPayload):
        return p.is_truncate and bool(values) and any(tuple(s.values) == values for s in p.partitions)
    return False


def voiding_run(failed: Event, later: Sequence[Event]) -> VoidingRun | None:
    """The run that voids ``failed`` (an INSERT whose files could not be copied) within ``later``
    (its database's next events, in order), or None when none does before the table is renamed,
    relocated, re-created or its database dropped.

    The run extends to the voiding event of every INSERT of the table before its end that has one,
    so that none of them needs its files either."""
    obj = written_object(failed)
    if obj is None:
        return None
    table = obj[:2]
    window: list[Event] = []
    for event in later:
        if _stops(event, table):
            break
        if _table(event) != table:
            continue
        window.append(event)
        if event.event_type is EventType.DROP_TABLE:
            break
    positions = [(-1, obj)] + [(i, o) for i, e in enumerate(window) if (o := written_object(e)) is not None]
    end = _voider(window, -1, obj)
    if end is None:
        return None
    grown = True
    while grown:  # every INSERT inside the run whose voider lies further extends it
        grown = False
        for at, o in positions:
            found = _voider(window, at, o) if at < end else None
            if found is not None and found > end:
                end, grown = found, True
    voided = {failed.event_id} | {
        window[at].event_id for at, o in positions
        if 0 <= at < end and (v := _voider(window, at, o)) is not None and v <= end
    }
    deferred = tuple(e.event_id for e in window[:end] if e.event_id not in voided)
    return VoidingRun(table, failed.event_id, window[end].event_id, frozenset(voided), deferred)


def _voider(window: Sequence[Event], after: int, obj: ObjectKey) -> int | None:
    """Index of the first event of ``window`` after ``after`` that voids ``obj``."""
    for i in range(after + 1, len(window)):
        if voids(window[i], obj):
            return i
    return None


def _table(event: Event) -> TableKey:
    return ((event.db or "").lower(), (event.table or "").lower())


def _stops(event: Event, table: TableKey) -> bool:
    """Whether a run on ``table`` cannot reach past ``event``: the table renamed (either way),
    re-created or relocated, a partition of it renamed or relocated, its database dropped."""
    p = event.payload
    if event.event_type is EventType.DROP_DATABASE:
        return (event.db or "").lower() == table[0]
    if isinstance(p, AlterTablePayload):
        names = {(p.before.db.lower(), p.before.name.lower()), (p.after.db.lower(), p.after.name.lower())}
        return table in names and (p.is_rename or p.before.sd.location != p.after.sd.location)
    if _table(event) != table:
        return False
    if event.event_type is EventType.CREATE_TABLE:
        return True
    if isinstance(p, AlterPartitionPayload):
        return p.before.values != p.after.values or p.before.sd.location != p.after.sd.location
    return False
