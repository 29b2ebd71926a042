"""A step's effects: what its handlers decide, then what the batch's mode adds around them.

plan -> ``decided`` (the handlers, ``handlers.DECIDERS``) -> ``around`` (this batch's mode: a regrouped
step's fence, the journal's sync rule, the snapshots the step makes stale, its ``repl.last.id``,
capped below a pending voiding run) -> ``executor.run``. Each mode of a batch is a rewrite of the list,
not a branch of the applier: a batch that defers its markers turns the step's marker into a journal
line; ``--coalesce-backlog`` (``reorder``) puts a fence first; a voiding run (``runner.VoidingRuns``)
pins the marker below its start. Pure: no I/O, so every mode's list can be read and tested as data.
Design: docs/design/apply.md ("A step's effects").
"""

from __future__ import annotations

from dataclasses import dataclass

from streamer.errors import ApplyError
from streamer.events.model import AlterTablePayload, DatabaseSnapshot, Event, EventType
from streamer.metastore.catalog import FENCE_PARAM
from streamer.target.apply.effects import (
    ANY_OBJECT,
    Advance,
    Effect,
    FenceDatabase,
    ForgetDatabase,
    ForgetTable,
    ForgetTables,
    ObjectKey,
    Refuse,
    SyncJournal,
)
from streamer.target.apply.handlers import decide as decide_event
from streamer.target.apply.partitions import add_partitions, drop_partitions
from streamer.target.apply.plan import GLOBAL_DB, Step, StepKind
from streamer.target.apply.view import View

# Events that change the database object itself (and so its parameters, where repl.last.id lives).
DATABASE_EVENTS = frozenset({EventType.CREATE_DATABASE, EventType.ALTER_DATABASE, EventType.DROP_DATABASE})


@dataclass(frozen=True)
class StepMode:
    """How the batch runs a step: what ``around`` needs to know of it beyond the step itself."""

    db: DatabaseSnapshot | None  # the step's target database as its ownership check read it (None: global)
    deferring: bool = False  # the batch writes its markers at its end (``markers.DeferredMarkers``)
    fenced: bool = False  # the batch fenced the step's database before this step
    pin: int | None = None  # a pending voiding run's cap on the database's progress (``runner``)


def decided(view: View, step: Step) -> list[Effect]:
    """The effects the handlers decide for ``step``: its partitions in one call, a collapsed or
    coalesced run as its last event (which stands for the run), else its one event."""
    if step.kind is StepKind.ADD_PARTITIONS:
        return add_partitions(view, list(step.events))
    if step.kind is StepKind.DROP_PARTITIONS:
        return drop_partitions(view, list(step.events))
    if step.kind in (StepKind.COLLAPSED, StepKind.COALESCED):
        return decide_event(view, step.last)
    return decide_event(view, step.first)


def around(view: View, step: Step, effects: list[Effect], mode: StepMode) -> list[Effect]:
    """``effects`` of ``step`` as the batch does them: fence and journal sync before, what the batch
    forgets and the step's marker after."""
    name = view.target_db(step.db)
    db = mode.db if step.db != GLOBAL_DB else None
    fencing = db is not None and (step.fenced or FENCE_PARAM in db.parameters)
    before: list[Effect] = []
    if fencing:
        assert db is not None
        if step.fenced and not mode.deferring:
            error = ApplyError("a step regrouped out of event-id order needs a batch that writes its "
                               "markers at its end", event_id=step.first.event_id, obj=step.db)
            return [Refuse(error)]
        before.append(FenceDatabase(step.db, db, step.first.event_id, opening=step.fenced))
    if mode.deferring:
        before.append(SyncJournal(frozenset(changed_objects(step))))
    # the snapshot read before the step is still current unless the step changed the database
    unchanged = db is not None and not any(e.event_type in DATABASE_EVENTS for e in step.events)
    after: list[Effect] = [] if unchanged else [ForgetDatabase(name)]
    for event in step.events:
        after += forgotten_tables(view, event)
    fenced = mode.fenced or fencing
    last = min(step.last_event_id, mode.pin if mode.pin is not None else step.last_event_id)
    after.append(Advance(
        step.db, last, deferred=mode.deferring, journaled=not fenced,
        progressed=not (mode.deferring and fenced), db=db if unchanged and not fencing else None,
    ))
    return [*before, *effects, *after]


def changed_objects(step: Step) -> set[ObjectKey]:
    """The tables a step changes (``ANY_OBJECT`` when not known one by one: a database, function or
    transaction event), for the journal's sync rule."""
    out: set[ObjectKey] = set()
    for event in step.events:
        payload = event.payload
        if isinstance(payload, AlterTablePayload):
            out |= {(payload.before.db.lower(), payload.before.name.lower()),
                    (payload.after.db.lower(), payload.after.name.lower())}
        elif event.db and event.table and event.event_type not in DATABASE_EVENTS:
            out.add((event.db.lower(), event.table.lower()))
        else:
            out.add(ANY_OBJECT)
    return out


# Events whose handlers never write a table object (files and partitions only): the table they read
# stays exact. (Column statistics are not among them: the metastore rewrites the table's parameters.)
_TABLE_UNCHANGED = frozenset({
    EventType.INSERT, EventType.ADD_PARTITION, EventType.ALTER_PARTITION, EventType.ALTER_PARTITIONS,
    EventType.DROP_PARTITION,
})
# Events that change no table object at all: the tables a batch knows stay exact.
_NO_TABLE = frozenset({
    EventType.CREATE_DATABASE, EventType.ALTER_DATABASE, EventType.CREATE_FUNCTION, EventType.DROP_FUNCTION,
})
# Events that change only the table their envelope names (the metastore rewrites its parameters, or
# drops it): that one is forgotten.
_OWN_TABLE = frozenset({
    EventType.DROP_TABLE, EventType.UPDATE_TABLE_COLUMN_STAT, EventType.DELETE_TABLE_COLUMN_STAT,
    EventType.UPDATE_PARTITION_COLUMN_STAT, EventType.DELETE_PARTITION_COLUMN_STAT,
})


def forgotten_tables(view: View, event: Event) -> list[Effect]:
    """The tables a batch knows that ``event`` may have changed: none after a create or a plain alter
    (whose handler remembers what it wrote) or an event that writes no table object, the renamed
    names after a rename, the event's own table after a drop or a statistics change, and every table
    after anything else (a database drop, a transaction, a constraint, ...)."""
    kind, payload = event.event_type, event.payload
    if kind is EventType.CREATE_TABLE or kind in _TABLE_UNCHANGED or kind in _NO_TABLE:
        return []
    if kind is EventType.ALTER_TABLE and isinstance(payload, AlterTablePayload):
        if payload.is_rename:
            return [ForgetTable(view.target_db(snap.db), snap.name.lower())
                    for snap in (payload.before, payload.after)]
        return []
    if kind in _OWN_TABLE and event.db and event.table:
        return [ForgetTable(view.target_db(event.db), event.table.lower())]
    return [ForgetTables()]
