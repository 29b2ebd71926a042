"""A backlog batch regrouped per table: the fewest catalog calls that reach the batch's end state. Pure.

``target run --coalesce-backlog``: within a micro-batch, events of one table that are apart in the
stream (other tables' events between them) are applied together: a table's ADD_PARTITIONs in one
``add_partitions`` call and its DROP_PARTITIONs in one ``drop_partitions`` call, its full
after-states (ALTER_TABLE, ALTER_PARTITION, statistics) as the last one, a create..drop as the drop.
Only events that act on one table alone move (a *segment* between barriers: renames, database,
function, constraint, transaction and bootstrap events stay in place, and nothing moves across
them); inside a table, events that touch the same object keep their order (a table-level event
orders everything of its table, a partition event the events of its partitions). So the batch ends
in the state applying every event in order ends in, but while it runs a table can show a state the
source never had next to another's: each step of a regrouped segment is *fenced*, and the applier
marks its database (``FENCE_PARAM``) until the batch's end, so readers read again instead
(docs/design/apply.md, "Coalescing a backlog").
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from streamer.events.model import (
    AddPartitionPayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
    DeleteColumnStatsPayload,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    InsertPayload,
    TableSnapshot,
    UpdateColumnStatsPayload,
)
from streamer.target.apply.by_state import (
    PROVIDER_PARAM,
    SOURCE_LOCATION_PARAM,
    SPARK_CREATED_PARAM,
    state_sync_reason,
)
from streamer.target.apply.plan import (
    MERGED_KINDS,
    Plan,
    Step,
    StepKind,
    collapsible_run,
    full_state_key,
    step_db,
    table_key,
)

# Events that act on the one table their envelope names, and nothing else: they may move within a segment
_MOVABLE = frozenset({
    EventType.CREATE_TABLE, EventType.DROP_TABLE, EventType.ALTER_TABLE, EventType.INSERT,
    EventType.ADD_PARTITION, EventType.ALTER_PARTITION, EventType.ALTER_PARTITIONS, EventType.DROP_PARTITION,
    EventType.UPDATE_TABLE_COLUMN_STAT, EventType.DELETE_TABLE_COLUMN_STAT,
    EventType.UPDATE_PARTITION_COLUMN_STAT, EventType.DELETE_PARTITION_COLUMN_STAT,
})

TABLE, PROPERTIES, PARTITIONS = "table", "properties", "partitions"
"""What a unit touches of its table: all of it; the table object's parameters only (an ALTER_TABLE
that changes nothing else, which no partition or file event reads); some partitions."""

Partition = tuple[str, ...]

_EXTERNAL = "EXTERNAL_TABLE"
_MERGED_STEPS = frozenset(MERGED_KINDS.values())
# Events that name at most one partition in ``partition_values`` (none: the table's own level)
_PARTITION_LEVEL = frozenset({
    EventType.INSERT, EventType.UPDATE_PARTITION_COLUMN_STAT, EventType.DELETE_PARTITION_COLUMN_STAT,
})
# Table parameters that change how the target applies the table's other events: an ALTER changing
# one stays ordered with all of them
_DECISIVE = frozenset({
    "transactional", "transactional_properties", "external", "external.table.purge",
    PROVIDER_PARAM.lower(), SPARK_CREATED_PARAM.lower(), SOURCE_LOCATION_PARAM.lower(),
})
_DECISIVE_PREFIXES = ("spark.sql.sources.", "streamer.", "repl.")


@dataclass(frozen=True)
class Unit:
    """Events of one table applied as one step (or merged into one ``add_partitions`` step)."""

    kind: StepKind
    events: tuple[Event, ...]
    touches: str  # TABLE, PROPERTIES or PARTITIONS
    partitions: frozenset[Partition] = frozenset()


def reorder(the_plan: Plan) -> Plan:
    """``the_plan`` with each segment's events regrouped per table; steps of a segment whose order
    changed are ``fenced``. A plan without movable runs comes back with the same steps."""
    steps: list[Step] = []
    for segment, barrier in _segments(the_plan.steps):
        steps.extend(_regroup(segment))
        if barrier is not None:
            steps.append(barrier)
    return dataclasses.replace(the_plan, steps=tuple(steps))


def movable(event: Event) -> bool:
    """Whether ``event`` acts on its envelope's table alone (and may move within a segment)."""
    if event.event_type not in _MOVABLE or not event.db or not event.table:
        return False
    p = event.payload
    own = (event.db.lower(), event.table.lower())
    if isinstance(p, AlterTablePayload):
        after = (p.after.db.lower(), p.after.name.lower())
        return not p.is_rename and after == own and _own_directory(p.before) and _own_directory(p.after)
    if isinstance(p, UpdateColumnStatsPayload | DeleteColumnStatsPayload):
        return (p.db.lower(), p.table.lower()) == own  # metadata only
    if isinstance(p, DropTablePayload | DropPartitionPayload) and p.table is None:
        return True  # deletes the managed table's own directories, or nothing (external)
    table = getattr(p, "table", None)
    return isinstance(table, TableSnapshot) and _own_directory(table)


def _own_directory(table: TableSnapshot) -> bool:
    """A managed table's files are in its own directories, which the target derives; an external
    table's location can be shared with another table (whose events would then not commute)."""
    return table.table_type != _EXTERNAL


def _segments(steps: Sequence[Step]) -> Iterator[tuple[list[Step], Step | None]]:
    """Runs of steps of movable events, each followed by the step that ends it (None at the plan's end)."""
    run: list[Step] = []
    for step in steps:
        if step.kind is not StepKind.BOOTSTRAP and all(movable(e) for e in step.events):
            run.append(step)
            continue
        yield run, step
        run = []
    yield run, None


def _regroup(segment: list[Step]) -> list[Step]:
    """One segment: units per table, layered (a unit after every unit it must follow), each layer's
    ADD_PARTITION units of a table merged, and its DROP_PARTITION units; fenced when the events'
    order changed. Never more steps than the segment had: the plan's own steps then stand (layers
    can part partition events the plan had merged, e.g. two drops whose partitions were added in
    different layers)."""
    events = [e for step in segment for e in step.events]
    joined = {e.event_id for step in segment if step.kind in _MERGED_STEPS for e in step.events[1:]}
    units = sorted(
        (u for table_events in _by_table(events).values() for u in _units(table_events, joined)),
        key=lambda u: u.events[-1].event_id,  # a unit stands where its last event stands
    )
    layers: dict[int, list[Unit]] = defaultdict(list)
    for unit, layer in zip(units, _layers(units), strict=True):
        layers[layer].append(unit)
    steps: list[Step] = []
    for layer in sorted(layers):
        steps.extend(_layer_steps(layers[layer]))
    if len(steps) > len(segment):
        return segment
    order = [e.event_id for s in steps for e in s.events]
    if order == [e.event_id for e in events]:
        return steps
    return [dataclasses.replace(s, fenced=True) for s in steps]


def _by_table(events: list[Event]) -> dict[tuple[str, str], list[Event]]:
    out: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for event in events:
        out[table_key(event)].append(event)
    return out


def _units(events: list[Event], joined: frozenset[int] | set[int] = frozenset()) -> list[Unit]:
    """One table's events (in order) as units: create..drop collapsed, full after-states coalesced
    (a run of property-only ALTER_TABLEs across the partition events between them), and the
    partition events the plan merged into one call (``joined``: each but the first of such a run)
    kept together."""
    units: list[Unit | list[Event]] = []  # a list: property-only ALTER_TABLEs still being collected
    alters: list[Event] | None = None  # the open run: only partition events since its last ALTER
    i = 0
    while i < len(events):
        event = events[i]
        end = collapsible_run(events, i)
        if end is not None:
            alters = None
            units.append(Unit(StepKind.COLLAPSED, tuple(events[i : end + 1]), TABLE))
            i = end + 1
            continue
        touches, partitions = _touches(event)
        i += 1
        if i < len(events) and events[i].event_id in joined:
            run = [event]
            while i < len(events) and events[i].event_id in joined:
                run.append(events[i])
                i += 1
            alters = None if touches == TABLE else alters
            units.append(_merged_unit(run))
            continue
        if touches == PROPERTIES:
            if alters is not None:
                alters.append(event)  # the later after-state carries the earlier ones' parameters
            else:
                alters = [event]
                units.append(alters)
            continue
        if touches == TABLE:
            alters = None
        run = [event]
        key = full_state_key(event)
        while key is not None and i < len(events) and full_state_key(events[i]) == key:
            run.append(events[i])
            i += 1
        kind = StepKind.COALESCED if len(run) > 1 else StepKind.EVENT
        units.append(Unit(kind, tuple(run), touches, partitions))
    return [u if isinstance(u, Unit) else _alter_unit(u) for u in units]


def _merged_unit(events: list[Event]) -> Unit:
    """Partition events the plan applies in one call, as one unit touching all their partitions."""
    kind = MERGED_KINDS[events[0].event_type]
    touched = [_touches(e) for e in events]
    if any(t == TABLE for t, _ in touched):
        return Unit(kind, tuple(events), TABLE)
    return Unit(kind, tuple(events), PARTITIONS, frozenset().union(*(p for _, p in touched)))


def _alter_unit(events: list[Event]) -> Unit:
    return Unit(StepKind.COALESCED if len(events) > 1 else StepKind.EVENT, tuple(events), PROPERTIES)


def _touches(event: Event) -> tuple[str, frozenset[Partition]]:
    """What ``event`` touches of its table; partition events that name no partition touch it all."""
    p = event.payload
    parts: list[Sequence[str]] = []
    if isinstance(p, AlterTablePayload):
        return (PROPERTIES if _properties_only(p) else TABLE), frozenset()
    if isinstance(p, AddPartitionPayload | AlterPartitionsPayload):
        parts = [q.values for q in p.partitions]
    elif isinstance(p, AlterPartitionPayload):
        parts = [p.before.values, p.after.values]
    elif isinstance(p, DropPartitionPayload):
        parts = list(p.partition_values)
    elif isinstance(p, InsertPayload | UpdateColumnStatsPayload | DeleteColumnStatsPayload) and (
        event.event_type in _PARTITION_LEVEL
    ):
        parts = [p.partition_values] if p.partition_values else []
    if not parts:
        return TABLE, frozenset()
    return PARTITIONS, frozenset(tuple(v) for v in parts)


def _properties_only(p: AlterTablePayload) -> bool:
    """An ALTER_TABLE that changes the table's parameters and nothing else (no location, columns,
    format, type or owner), none that decides how the table is replicated: no partition or file
    event of the table depends on it."""
    if p.is_truncate or p.is_rename or state_sync_reason(p.before) or state_sync_reason(p.after):
        return False
    if dataclasses.replace(p.before, parameters={}) != dataclasses.replace(p.after, parameters={}):
        return False
    before, after = p.before.parameters, p.after.parameters
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    return not any(k.lower() in _DECISIVE or k.lower().startswith(_DECISIVE_PREFIXES) for k in changed)


def _layers(units: list[Unit]) -> list[int]:
    """Each unit's layer: one past the highest layer of the earlier units of its table it must follow
    (table-level: all of them; properties: table-level and properties; partitions: table-level and
    those sharing a partition). Units of one layer commute."""
    table: dict[tuple[str, str], int] = {}  # highest layer of a table-level unit
    props: dict[tuple[str, str], int] = {}
    every: dict[tuple[str, str], int] = {}
    parts: dict[tuple[tuple[str, str], Partition], int] = {}
    out: list[int] = []
    for unit in units:
        key = table_key(unit.events[0])
        if unit.touches == TABLE:
            before = every.get(key, -1)
        elif unit.touches == PROPERTIES:
            before = max(table.get(key, -1), props.get(key, -1))
        else:
            before = max([table.get(key, -1), *(parts.get((key, p), -1) for p in unit.partitions)])
        layer = before + 1
        out.append(layer)
        every[key] = max(every.get(key, -1), layer)
        if unit.touches == TABLE:
            table[key] = layer
        elif unit.touches == PROPERTIES:
            props[key] = layer
        for p in unit.partitions:
            parts[(key, p)] = layer
    return out


def _layer_steps(units: list[Unit]) -> list[Step]:
    """One layer's steps: each table's single ADD_PARTITION units as one step, and its single
    DROP_PARTITION units as another (a layer's units of one table share no partition), the others
    one each."""
    merged: dict[tuple[EventType, tuple[str, str]], list[Event]] = defaultdict(list)
    steps: list[Step] = []
    for unit in units:
        event = unit.events[0]
        if (unit.kind is StepKind.EVENT or unit.kind in _MERGED_STEPS) and event.event_type in MERGED_KINDS:
            merged[(event.event_type, table_key(event))].extend(unit.events)
            continue
        steps.append(Step(unit.kind, unit.events, step_db(event)))
    for (event_type, _), events in merged.items():
        kind = MERGED_KINDS[event_type] if len(events) > 1 else StepKind.EVENT
        in_order = tuple(sorted(events, key=lambda e: e.event_id))
        steps.append(Step(kind, in_order, step_db(events[0])))
    return sorted(steps, key=lambda s: s.events[0].event_id)
