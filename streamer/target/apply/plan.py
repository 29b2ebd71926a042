"""The target planner: a micro-batch of events + what the target has applied -> ordered steps. Pure.

Sorts, de-duplicates, drops what was applied, holds halted databases' events, and groups events
into steps (merged ADD_PARTITIONs, collapsed create..drop runs, coalesced full after-states). The
rules and why grouping keeps DESIGN's invariants: docs/design/apply.md.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from streamer.events.codec import tracked_db
from streamer.events.model import (
    AlterPartitionPayload,
    AlterTablePayload,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    BootstrapScope,
    CreateFunctionPayload,
    CreateTablePayload,
    DropFunctionPayload,
    DropTablePayload,
    Event,
    EventType,
    InsertPayload,
    ProgressPayload,
    UpdateColumnStatsPayload,
)

GLOBAL_DB = "<global>"
"""Pseudo-database for events that belong to no database (transactions); not a legal Hive name."""

_EXTERNAL = "EXTERNAL_TABLE"
# Events that touch only the table named by ``event.db``/``event.table`` and may sit inside a collapsed run.
_TABLE_LOCAL = frozenset(
    {
        EventType.ALTER_TABLE,
        EventType.ADD_PARTITION,
        EventType.ALTER_PARTITION,
        EventType.ALTER_PARTITIONS,
        EventType.DROP_PARTITION,
        EventType.INSERT,
        EventType.UPDATE_TABLE_COLUMN_STAT,
        EventType.DELETE_TABLE_COLUMN_STAT,
        EventType.UPDATE_PARTITION_COLUMN_STAT,
        EventType.DELETE_PARTITION_COLUMN_STAT,
    }
)


_STATS = frozenset({EventType.UPDATE_TABLE_COLUMN_STAT, EventType.UPDATE_PARTITION_COLUMN_STAT})


class StepKind(StrEnum):
    EVENT = "event"  # apply one event
    ADD_PARTITIONS = "add_partitions"  # consecutive ADD_PARTITION of one table, one catalog call
    DROP_PARTITIONS = "drop_partitions"  # consecutive DROP_PARTITION of one table, one catalog call
    COLLAPSED = "collapsed"  # create ... drop of one object: only the last event (the drop) is applied
    COALESCED = "coalesced"  # full after-states of one object: only the last event is applied
    BOOTSTRAP = "bootstrap"  # one bootstrap record or marker (streamer.target.apply.bootstrap)


@dataclass(frozen=True)
class Step:
    """Events applied as one unit; afterwards ``db``'s ``repl.last.id`` is ``last_event_id``."""

    kind: StepKind
    events: tuple[Event, ...]
    db: str  # source database name (or GLOBAL_DB) whose progress this step advances
    fenced: bool = False  # applied out of event-id order, its database fenced (apply.reorder)

    @property
    def event_ids(self) -> tuple[int, ...]:
        return tuple(e.event_id for e in self.events)

    @property
    def first(self) -> Event:
        return self.events[0]

    @property
    def last(self) -> Event:
        return self.events[-1]

    @property
    def last_event_id(self) -> int:
        return self.events[-1].event_id

    @property
    def superseded(self) -> tuple[int, ...]:
        """Ids of the events a coalesced step does not execute (the last one stands for them)."""
        return self.event_ids[:-1] if self.kind is StepKind.COALESCED else ()


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...] = ()
    already_applied: tuple[int, ...] = ()  # dropped: ``<=`` their database's applied id
    held: tuple[int, ...] = ()  # events of halted databases
    progress: tuple[int, ...] = ()  # STREAMER_PROGRESS records
    source_head: int | None = None  # newest source event id known after this batch
    duplicates: tuple[int, ...] = field(default=())  # ids delivered more than once in the batch

    @property
    def event_ids(self) -> tuple[int, ...]:
        return tuple(i for s in self.steps for i in s.event_ids)

    @property
    def coalesced(self) -> tuple[int, ...]:
        """Planned events not executed themselves: a later event of their coalesced run carries their
        object's full state (they still count as applied: ``repl.last.id`` passes them)."""
        return tuple(i for s in self.steps for i in s.superseded)


def step_db(event: Event) -> str:
    """The database whose progress an event advances (source name; ``GLOBAL_DB`` when it has none;
    a bounded stand-in for a name no metastore holds, whose records are all refused: ``tracked_db``)."""
    return tracked_db(event.db) if event.db else GLOBAL_DB


def plan(events: Iterable[Event], applied: Mapping[str, int], halted: Collection[str] = ()) -> Plan:
    """Order, filter and group one batch; ``applied`` maps source db -> last applied event id."""
    ordered: list[Event] = []
    seen: set[int] = set()
    seen_bootstrap: set[tuple[int, int]] = set()
    duplicates: list[int] = []
    for event in sorted(events, key=lambda e: e.event_id):
        # a PROGRESS record carries the id of the last event it passed: it never replaces that event
        if event.event_type is EventType.PROGRESS:
            ordered.append(event)
            continue
        record = _bootstrap_key(event) or _watch_key(event)
        if record is not None:
            if record in seen_bootstrap:
                duplicates.append(event.event_id)
            else:
                seen_bootstrap.add(record)
                ordered.append(event)
            continue
        if event.event_id in seen:
            duplicates.append(event.event_id)
            continue
        seen.add(event.event_id)
        ordered.append(event)

    todo: list[Event] = []
    done: list[int] = []
    held: list[int] = []
    progress: list[int] = []
    head: int | None = None
    for event in ordered:
        head = event.event_id if head is None else max(head, event.event_id)
        if isinstance(event.payload, ProgressPayload) or event.event_type is EventType.PROGRESS:
            progress.append(event.event_id)
            if isinstance(event.payload, ProgressPayload):
                head = max(head, event.payload.source_head_event_id, event.payload.last_event_id)
            continue
        db = step_db(event)
        last = applied.get(db)
        if _is_bootstrap(event):
            if _bootstrapped(event, last):
                done.append(event.event_id)
            elif db in halted:
                held.append(event.event_id)
            else:
                todo.append(event)
        elif last is not None and (event.event_id < last if _watch_key(event) else event.event_id <= last):
            done.append(event.event_id)  # a watch record follows its event id: applied again at it
        elif db in halted:
            held.append(event.event_id)
        else:
            todo.append(event)

    return Plan(
        steps=tuple(_group(todo)),
        already_applied=tuple(done),
        held=tuple(held),
        progress=tuple(progress),
        source_head=head,
        duplicates=tuple(duplicates),
    )


MERGED_KINDS = {
    EventType.ADD_PARTITION: StepKind.ADD_PARTITIONS,
    EventType.DROP_PARTITION: StepKind.DROP_PARTITIONS,
}
"""Events of one table that are applied together in one catalog call when they follow each other
(Hive 2.x logs one DROP_PARTITION per partition of an ``ALTER TABLE ... DROP PARTITION``)."""


def _group(events: list[Event]) -> list[Step]:
    steps: list[Step] = []
    i = 0
    while i < len(events):
        event = events[i]
        if _is_bootstrap(event):
            steps.append(Step(StepKind.BOOTSTRAP, (event,), step_db(event)))
            i += 1
            continue
        end = collapsible_run(events, i)
        if end is not None:
            steps.append(Step(StepKind.COLLAPSED, tuple(events[i : end + 1]), step_db(event)))
            i = end + 1
            continue
        j = i + 1
        state = full_state_key(event)
        if state is not None:
            while j < len(events) and full_state_key(events[j]) == state:
                j += 1
            steps.append(Step(StepKind.COALESCED if j - i > 1 else StepKind.EVENT, tuple(events[i:j]),
                              step_db(event)))
            i = j
            continue
        merged = MERGED_KINDS.get(event.event_type)
        if merged is not None:
            while (
                j < len(events)
                and events[j].event_type is event.event_type
                and table_key(events[j]) == table_key(event)
            ):
                j += 1
        kind = merged if merged is not None and j - i > 1 else StepKind.EVENT
        steps.append(Step(kind, tuple(events[i:j]), step_db(event)))
        i = j
    return steps


def named_tables(event: Event) -> list[tuple[str, str]]:
    """(source db, table) of every table ``event`` names (a rename: both names), lower case."""
    p = event.payload
    if isinstance(p, AlterTablePayload):
        return [(p.before.db.lower(), p.before.name.lower()), (p.after.db.lower(), p.after.name.lower())]
    if event.db and event.table:
        return [(event.db.lower(), event.table.lower())]
    return []


def _is_bootstrap(event: Event) -> bool:
    return isinstance(event.payload, BootstrapObjectPayload | BootstrapMarkerPayload)


def _bootstrap_key(event: Event) -> tuple[int, int] | None:
    """(bootstrap id, sequence) of a bootstrap record; the marker counts as sequence 0."""
    p = event.payload
    if isinstance(p, BootstrapObjectPayload):
        return (p.bootstrap_id, p.sequence)
    if isinstance(p, BootstrapMarkerPayload):
        return (p.bootstrap_id, 0)
    return None


def _watch_key(event: Event) -> tuple[int, int] | None:
    """(event id, number) of a source agent's watch record (``InsertPayload.watch``): it carries the id
    of the event published before it, so neither that event nor another watch record is its duplicate.
    Applied once its database's position is at most that id (after a restart at exactly that id, again:
    each carries a directory's whole state, and the records after it follow)."""
    p = event.payload
    if isinstance(p, InsertPayload) and p.watch:
        return (event.event_id, -p.watch)  # negative: never a bootstrap record's (id, sequence)
    return None


def _bootstrapped(event: Event, applied: int | None) -> bool:
    """A FULL bootstrap record of a database that already applied the bootstrap's id changes nothing."""
    p = event.payload
    return (
        isinstance(p, BootstrapObjectPayload)
        and p.scope is BootstrapScope.FULL
        and applied is not None
        and applied >= p.bootstrap_id
    )


def table_key(event: Event) -> tuple[str, str]:
    return ((event.db or "").lower(), (event.table or "").lower())


def full_state_key(event: Event) -> tuple[object, ...] | None:
    """The object whose full after-state ``event`` carries, for coalescing; None when it carries
    less (or more: a rename moves the object, a truncate also clears files)."""
    p = event.payload
    db = (event.db or "").lower()
    if not db:
        return None
    if event.event_type is EventType.ALTER_TABLE and isinstance(p, AlterTablePayload):
        if p.is_rename or p.is_truncate or p.after.db.lower() != db:
            return None
        return (EventType.ALTER_TABLE, db, p.after.name.lower())
    if event.event_type is EventType.ALTER_PARTITION and isinstance(p, AlterPartitionPayload):
        if p.is_truncate or p.before.values != p.after.values or not event.table:
            return None
        return (EventType.ALTER_PARTITION, db, event.table.lower(), tuple(p.after.values))
    if event.event_type in _STATS and isinstance(p, UpdateColumnStatsPayload):
        if p.db.lower() != db or not p.statistics:
            return None
        columns = frozenset(s.column.lower() for s in p.statistics)
        if len(columns) != len(p.statistics):
            return None  # a column twice in one event: which one wins is the catalog's business
        return (event.event_type, db, p.table.lower(), tuple(p.partition_values), columns)
    return None


def collapsible_run(events: list[Event], start: int) -> int | None:
    """Index of the drop ending a create...drop run that starts at ``start``, if the run may collapse."""
    first = events[start]
    if start + 1 >= len(events):
        return None
    nxt = events[start + 1]
    if first.event_type is EventType.CREATE_DATABASE:
        same_db = (nxt.db or "").lower() == (first.db or "").lower()
        return start + 1 if nxt.event_type is EventType.DROP_DATABASE and same_db and first.db else None
    if first.event_type is EventType.CREATE_FUNCTION:
        key = _function_key(first)
        same = nxt.event_type is EventType.DROP_FUNCTION and key is not None and key == _function_key(nxt)
        return start + 1 if same else None
    if first.event_type is not EventType.CREATE_TABLE or not isinstance(first.payload, CreateTablePayload):
        return None
    if first.payload.table.table_type == _EXTERNAL or not first.table:
        return None
    table = table_key(first)
    for j in range(start + 1, len(events)):
        event = events[j]
        if table_key(event) != table:
            return None
        if event.event_type is EventType.DROP_TABLE:
            dropped = event.payload.table if isinstance(event.payload, DropTablePayload) else None
            return None if dropped is not None and dropped.table_type == _EXTERNAL else j
        if event.event_type not in _TABLE_LOCAL:
            return None
        if isinstance(event.payload, AlterTablePayload) and (
            event.payload.is_rename or event.payload.after.table_type == _EXTERNAL
        ):
            return None
    return None


def _function_key(event: Event) -> tuple[str, str] | None:
    payload = event.payload
    if isinstance(payload, CreateFunctionPayload):
        return ((event.db or payload.function.db).lower(), payload.function.name.lower())
    if isinstance(payload, DropFunctionPayload) and event.db:
        return (event.db.lower(), payload.function_name.lower())
    return None
