"""Apply lanes: which planned steps may run concurrently, and which must wait. Pure.

Turns a planned micro-batch into a schedule for ``streamer.target.job.lane_runner``: one lane in the
``global`` consistency mode, one lane per source database in ``database`` mode, with steps that
touch several lanes (transaction commits, cross-database renames and foreign keys, shared external
locations, bootstrap records) as barriers. Inside a lane, the fenced steps of a regrouped segment
(``--coalesce-backlog``: already out of event-id order, behind the apply fence) run on a sub-lane
per table, between the lane's steps before and after them. The rules and why they keep
exactly-once: docs/design/consistency.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streamer.events.model import (
    AcidWritePayload,
    AddConstraintsPayload,
    AlterTablePayload,
    CommitTxnPayload,
    CreateTablePayload,
    DropTablePayload,
    Event,
    EventType,
    InsertPayload,
    TableSnapshot,
)
from streamer.target.apply.plan import GLOBAL_DB, Plan, Step, StepKind, table_key


class Consistency(StrEnum):
    """What readers of a target are promised (see docs/design/consistency.md)."""

    GLOBAL = "global"
    DATABASE = "database"


GUARANTEES: dict[Consistency, str] = {
    Consistency.GLOBAL: "prefix consistency across all databases (one lane, event-id order)",
    Consistency.DATABASE: (
        "prefix consistency per database (a lane per database, applied concurrently); "
        "databases may show different source event ids"
    ),
}

ONE_LANE = "*"
"""The only lane of ``global`` mode."""

TXN_LANE = "txn:" + GLOBAL_DB
"""The lane of transaction events (``OPEN_TXN`` ... ``COMMIT_TXN``), whose progress is one id."""

_WRITES = frozenset({EventType.ALLOC_WRITE_ID, EventType.ACID_WRITE})
_EXTERNAL = "EXTERNAL_TABLE"


@dataclass(frozen=True)
class Node:
    """A step with its lanes and the nodes (indices into ``Schedule.nodes``) it must wait for."""

    step: Step
    lanes: frozenset[str]
    after: tuple[int, ...]
    full_barrier: bool = False

    @property
    def barrier(self) -> bool:
        return self.full_barrier or len(self.lanes) > 1


@dataclass(frozen=True)
class Schedule:
    consistency: Consistency
    nodes: tuple[Node, ...] = ()

    @property
    def lanes(self) -> frozenset[str]:
        return frozenset(lane for n in self.nodes for lane in n.lanes)

    @property
    def barriers(self) -> tuple[int, ...]:
        """Indices of the nodes that join lanes."""
        return tuple(i for i, n in enumerate(self.nodes) if n.barrier)

    def dependents(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.nodes]
        for i, node in enumerate(self.nodes):
            for j in node.after:
                out[j].append(i)
        return out


def schedule(plan: Plan, consistency: Consistency | str = Consistency.GLOBAL) -> Schedule:
    """The plan's steps with their lanes and dependencies (each step waits for the previous step of
    each of its lanes, and for the last full barrier). A fenced step of one table waits for the
    previous step of its table's sub-lane, else for its lane's last step; every later step of the
    lane waits for all of its sub-lanes."""
    mode = Consistency(consistency)
    last: dict[str, int] = {}
    subs: dict[str, set[str]] = {}  # lane -> its sub-lanes since the lane's last step
    floor: int | None = None  # the last full barrier
    nodes: list[Node] = []
    for i, step in enumerate(plan.steps):
        lanes, full = step_lanes(step, mode)
        sub = table_lane(step, lanes) if not full else None
        if full:
            after = set(last.values())
            if floor is not None:
                after.add(floor)
            last.clear()
            subs.clear()
            floor = i
        elif sub is not None:
            (lane,) = lanes
            after = {last[sub]} if sub in last else ({last[lane]} if lane in last else set())
            if floor is not None and not after:
                after.add(floor)
            subs.setdefault(lane, set()).add(sub)
            last[sub] = i
            lanes = frozenset({sub})
        else:
            after = set()
            for lane in lanes:
                joined = subs.pop(lane, None)
                if joined:  # each of them waited for the lane's last step
                    after |= {last.pop(s) for s in joined}
                elif lane in last:
                    after.add(last[lane])
            if floor is not None and not after:
                after.add(floor)  # earlier lanes' nodes already wait for it
            for lane in lanes:
                last[lane] = i
        nodes.append(Node(step, lanes, tuple(sorted(after)), full))
    return Schedule(mode, tuple(nodes))


def table_lane(step: Step, lanes: frozenset[str]) -> str | None:
    """The sub-lane of a fenced step of one table in its one lane, if it has one. A regrouped
    segment's steps are already out of event-id order behind the fence (``apply.reorder``); its
    events act on their managed table alone, whose directories the target derives, so steps of
    different tables commute and may run at once."""
    if not step.fenced or step.kind is StepKind.BOOTSTRAP or len(lanes) != 1:
        return None
    keys = {table_key(e) for e in step.events}  # (a fenced step's events are movable: reorder)
    if len(keys) != 1:
        return None
    (lane,) = lanes
    db, name = keys.pop()
    return f"{lane}/table:{db}.{name}"


def step_lanes(step: Step, mode: Consistency) -> tuple[frozenset[str], bool]:
    """(lanes of ``step``, whether it is a full barrier) in ``mode``."""
    if mode is Consistency.GLOBAL:
        return frozenset({ONE_LANE}), False
    if step.kind is StepKind.BOOTSTRAP:
        return frozenset({_db_lane(step.db)}), True
    if step.db == GLOBAL_DB and not all(_is_txn(e) for e in step.events):
        return frozenset({TXN_LANE}), True
    lanes: set[str] = set()
    for event in step.events:
        lanes |= event_lanes(event)
    return frozenset(lanes), False


def event_lanes(event: Event) -> set[str]:
    """The lanes one event touches in ``database`` mode."""
    if _is_txn(event):
        lanes = {TXN_LANE}
        if isinstance(event.payload, CommitTxnPayload):
            for write in event.payload.writes:
                snap = write.table_snapshot
                lanes.add(_db_lane(snap.db if snap is not None else write.db))
        return lanes
    lanes = {_db_lane(event.db or GLOBAL_DB)}
    p = event.payload
    if event.event_type in _WRITES or isinstance(p, AcidWritePayload):
        lanes.add(TXN_LANE)
    if isinstance(p, AlterTablePayload):
        lanes |= {_db_lane(p.before.db), _db_lane(p.after.db)}
        lanes |= _location_lanes(p.before) | _location_lanes(p.after)
    elif isinstance(p, AddConstraintsPayload):
        for c in p.constraints:
            lanes.add(_db_lane(c.db))
            if c.ref_db:
                lanes.add(_db_lane(c.ref_db))
    elif isinstance(p, CreateTablePayload | InsertPayload | DropTablePayload):
        lanes |= _location_lanes(p.table)
    return lanes


def _is_txn(event: Event) -> bool:
    return event.event_type in (EventType.OPEN_TXN, EventType.COMMIT_TXN, EventType.ABORT_TXN)


def _db_lane(db: str) -> str:
    return TXN_LANE if db == GLOBAL_DB else "db:" + db.lower()


def _location_lanes(table: TableSnapshot | None) -> set[str]:
    if table is None or table.table_type != _EXTERNAL or not table.sd.location:
        return set()
    return {"location:" + table.sd.location.rstrip("/")}
