"""Running a plan: steps in order, a failing step halts its database and holds its later steps
(the lane runner, ``streamer.target.job.lane_runner``, runs steps concurrently with ``run_step``),
unless it is an INSERT whose files are gone and a later event of the batch voids them
(``VoidingRuns``). Design: docs/design/apply.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from streamer import metrics
from streamer.errors import ApplyError, ChecksumMismatchError, EventError, UnverifiableFileError
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.target.apply.applier import Applier, check_events
from streamer.target.apply.markers import DEFER_MIN_EVENTS
from streamer.target.apply.plan import Plan, Step, StepKind, named_tables
from streamer.target.apply.voiding import VoidingRun, strip_files, voiding_run
from streamer.target.state.state_file import REGROUPED_HALT, VOIDING_RUN_HALT, Halt, HaltKind, TargetState

log = logging.getLogger(__name__)


@dataclass
class RunReport:
    applied: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    halted: dict[str, Halt] = field(default_factory=dict)  # halts that happened in this run
    coalesced: list[int] = field(default_factory=list)  # applied as part of a later event (plan.coalesced)


def run_plan(
    applier: Applier, plan: Plan, state: TargetState, on_halt: Callable[[str], None] | None = None
) -> RunReport:
    """Apply steps in order; a failing step halts its database, whose later steps are then held.

    ``on_halt(db)`` runs right after a halt is recorded, before any later step: the target job
    publishes the halt there, so readers know it before other databases move past it.
    """
    report = RunReport(held=list(plan.held))
    runs = VoidingRuns(plan, applier)
    try:
        with applier.batch(len(plan.event_ids)):  # snapshots reused; a backlog's markers once per database
            prefetch(applier, plan)
            for step in plan.steps:
                run_step(applier, step, state, report, on_halt, runs)
    finally:
        applier.pins.clear()  # every run ended or was abandoned; after a crash of the batch, none holds
    if plan.source_head is not None:
        metrics.TARGET_SOURCE_HEAD.set(plan.source_head)  # lag: streamer.target.state.status.lag_events
    return report


def prefetch(applier: Applier, plan: Plan) -> None:
    """A batch reads the tables its events name in one call per database instead of one
    ``get_table`` per step that first needs each: those this source owns are known to the batch, the
    absent ones known absent (``ApplyContext.known_table``). A backlog's batch (``DEFER_MIN_EVENTS``
    or more events) reads every database so; a smaller one (live traffic) those whose events name
    two tables or more, and reads a single table as it goes (one call would spare none)."""
    names: dict[str, set[str]] = {}
    for step in plan.steps:
        if step.kind is StepKind.BOOTSTRAP:
            continue
        for event in step.events:
            for db, name in named_tables(event):
                names.setdefault(applier.target_db(db), set()).add(name)
    if len(plan.event_ids) < DEFER_MIN_EVENTS:
        names = {db: tables for db, tables in names.items() if len(tables) > 1}
    ctx = applier
    for db, tables in sorted(names.items()):
        try:
            database = ctx.memory.database(db) or ctx.catalog.get_database(db)
            listed = ctx.catalog.get_tables(db, sorted(tables)) if database is not None else []
            found = {t.name.lower(): t for t in listed}
        except ApplyError as exc:  # the steps read as they go, and meet the failure with their event
            log.warning("reading the tables of %s for this batch failed: %s", db, exc.cause)
            continue
        if database is not None:
            ctx.memory.remember(db, database)  # the first step's ownership check reads no more
        for name in tables:  # a foreign table stays unknown: the step that reads it refuses it
            table = found.get(name)
            if table is None:
                ctx.memory.remember_absent(db, name)
            elif ctx.allow_existing_db or table.parameters.get(REPL_SOURCE_PARAM) == ctx.source_id:
                ctx.memory.remember_table(table)


def run_step(
    applier: Applier,
    step: Step,
    state: TargetState,
    report: RunReport,
    on_halt: Callable[[str], None] | None = None,
    runs: VoidingRuns | None = None,
) -> None:
    """Apply one step unless its database is halted; a failure halts the database (then
    ``on_halt(db)``), unless ``runs`` starts a voiding run at it. Records the outcome in ``report``
    (the lane runner, ``streamer.target.job.lane_runner``, passes one per step)."""
    if state.is_halted(step.db):
        report.held.extend(step.event_ids)
        return
    if runs is not None and runs.defer(step, applier):
        return  # applied when its run ends
    ending = runs.ending(step) if runs is not None else None
    try:
        if ending is None:
            applier.apply(step)
        else:
            for deferred in ending.to_apply():
                applier.apply(deferred)  # progress held below the run's start meanwhile
            assert runs is not None
            runs.finish(ending)
            applier.apply(step)
    except ApplyError as exc:
        if ending is None and runs is not None and runs.start(step, exc):
            return
        _halt(step, exc, state, report, on_halt, runs, ending)
        return
    if ending is not None:  # the run's events before its end, in order
        report.applied.extend(ending.event_ids)
        report.coalesced.extend(sorted(ending.run.voided))
        metrics.TARGET_EVENTS_VOIDED.inc(len(ending.run.voided) + len(ending.run.stripped))
    report.applied.extend(step.event_ids)
    report.coalesced.extend(step.superseded)


def _halt(
    step: Step,
    exc: ApplyError,
    state: TargetState,
    report: RunReport,
    on_halt: Callable[[str], None] | None,
    runs: VoidingRuns | None,
    ending: PendingRun | None,
) -> None:
    """Halt the step's database: at the failed event, or at the start of the earliest voiding run it
    leaves pending (the stream must be re-read from there), naming both."""
    failed_id = exc.event_id or step.first.event_id
    event_id, obj, cause, kind = failed_id, exc.obj, exc.cause, HaltKind.EVENT
    event_type = exc.event_type or str(step.first.event_type)
    pending = runs.abandon(step.db) if runs is not None else []
    if ending is not None and all(r is not ending for r in pending):
        pending.append(ending)  # finished (its deferred steps applied) when its end step failed
    if pending:
        first = min(pending, key=lambda r: r.run.start)
        event_id, obj = first.run.start, ".".join(first.run.table)
        event_type = str(first.start.first.event_type)
        runs_note = "; ".join(r.run.describe() for r in pending)
        cause = f"event {failed_id} {VOIDING_RUN_HALT} ({runs_note}): {exc.cause}"
        kind = HaltKind.VOIDING_RUN
        for r in pending:
            report.held.extend(r.event_ids)
    fenced_from = runs.first_fenced(step.db) if runs is not None else None
    if fenced_from is not None and fenced_from < event_id:
        # out of order: the database's events from its first regrouped one are not all applied (and
        # its marker stays before them): the stream is re-read from there, the failed event named
        event_id = fenced_from
        cause = f"event {failed_id} {REGROUPED_HALT} (re-read from event {fenced_from}): {exc.cause}"
        kind = HaltKind.REGROUPED
    halt = state.halt(step.db, event_id, cause, event_type=event_type, obj=obj, kind=kind,
                      failed_event_id=failed_id)
    log.error("database %s halted at event %s (%s): %s", step.db, halt.event_id, halt.object, halt.cause)
    report.halted[step.db] = halt
    report.held.extend(step.event_ids)
    if on_halt is not None:
        on_halt(step.db)


@dataclass
class PendingRun:
    """A voiding run started in this batch: its INSERT and the steps deferred until its end."""

    run: VoidingRun
    start: Step
    deferred: list[Step] = field(default_factory=list)  # applied just before the end step
    voided: list[Step] = field(default_factory=list)  # later voided INSERTs: never applied

    @property
    def event_ids(self) -> list[int]:
        """The run's events applied or voided before its end step."""
        steps = [self.start, *self.deferred, *self.voided]
        return sorted({i for s in steps for i in s.event_ids})

    def to_apply(self) -> list[Step]:
        """The steps to apply before the end step, in order: the failed one unless voided, then the
        deferred ones, ADD_PARTITIONs without the files the run voids."""
        steps = [self.start] if self.start.last_event_id in self.run.deferred else []
        stripped = self.run.stripped
        return [
            Step(s.kind, tuple(strip_files(e, stripped.get(e.event_id, frozenset())) for e in s.events), s.db)
            for s in [*steps, *self.deferred]
        ]


class VoidingRuns:
    """The voiding runs of one batch (``streamer.target.apply.voiding``): one starts where an
    INSERT's files are gone and a later event of its database in the batch replaces or drops them;
    the table's steps until then wait, and the database's ``repl.last.id`` stays before the INSERT
    (``ApplyContext.pins``, which caps each step's ``Advance``: ``step_effects``) so that a crash
    re-reads the run whole. Other tables' steps go on."""

    def __init__(self, plan: Plan, applier: Applier) -> None:
        self._applier = applier
        self._plan = plan  # read only when a write's files are gone: nothing per batch otherwise
        self._pending: dict[str, list[PendingRun]] = {}
        self._lock = threading.Lock()  # lanes of different databases share this object

    def start(self, step: Step, exc: ApplyError) -> bool:
        """Start the run that voids ``step``'s INSERT after ``exc`` (its files could not be copied),
        if the batch holds one whose steps it can take whole."""
        if step.kind not in (StepKind.EVENT, StepKind.ADD_PARTITIONS):
            return False
        if not isinstance(exc, ChecksumMismatchError | UnverifiableFileError):
            return False  # only files gone (or never checksummed) are voided; never a refused location
        at = next(i for i, s in enumerate(self._plan.steps) if s is step)
        later = [s for s in self._plan.steps[at + 1 :] if s.db == step.db]
        try:
            events = [e for s in later for e in s.events]
            run = voiding_run(step.events, events, {s.last_event_id for s in later})
        except Exception:  # an event the planner cannot read is no run: the step halts, naming its cause
            log.exception("event %s: looking for a voiding run failed", step.first.event_id)
            return False
        if run is None or not _whole_steps(run, later):
            return False
        with self._lock:
            if any(p.run.table == run.table for p in self._pending.get(step.db, [])):
                return False  # a step of a table whose run is pending failed on its own: halt
        with self._lock:
            self._pending.setdefault(step.db, []).append(PendingRun(run, step))
            self._pin(step.db)
        log.warning(
            "event %s (%s): %s; a later event voids them: applying %s",
            step.first.event_id, exc.obj, exc.cause, run.describe(),
        )
        return True

    def defer(self, step: Step, applier: Applier) -> bool:
        """Whether ``step`` belongs to a pending run before its end (kept for the run's end). A voided
        step is never applied, so it is checked here as every applied step is (``check_events``):
        one that fails is not taken, and applying it halts the database naming it."""
        with self._lock:
            runs = self._pending.get(step.db, [])
            pending = next((p for p in runs if all(p.run.holds(i) for i in step.event_ids)), None)
        if pending is None:
            return False
        if not all(i in pending.run.voided for i in step.event_ids):
            pending.deferred.append(step)  # (one lane, or a regrouped table's sub-lane, runs the run's steps)
            return True
        try:
            check_events(applier, step)  # the lane's own context and catalog
        except EventError:
            return False
        pending.voided.append(step)
        return True

    def first_fenced(self, db: str) -> int | None:
        """The first event of ``db``'s regrouped steps in this batch (``Step.fenced``), if any."""
        return min((s.first.event_id for s in self._plan.steps if s.db == db and s.fenced), default=None)

    def ending(self, step: Step) -> PendingRun | None:
        """The pending run ``step`` ends, if any."""
        with self._lock:
            for pending in self._pending.get(step.db, []):
                if step.last_event_id == pending.run.end:
                    return pending
        return None

    def finish(self, pending: PendingRun) -> None:
        """``pending``'s deferred steps are applied: its end step advances progress again."""
        db = pending.start.db
        with self._lock:
            runs = self._pending.get(db, [])
            if pending in runs:  # else abandoned meanwhile: another table's lane halted the database
                runs.remove(pending)
            self._pin(db)

    def abandon(self, db: str) -> list[PendingRun]:
        """The database halts: its pending runs end unapplied (the halt re-reads them)."""
        with self._lock:
            pending = self._pending.pop(db, [])
            self._applier.pins.pop(db, None)
        return pending

    def _pin(self, db: str) -> None:
        starts = [p.run.start for p in self._pending.get(db, [])]
        if starts:
            self._applier.pins[db] = min(starts) - 1
        else:
            self._applier.pins.pop(db, None)


def _whole_steps(run: VoidingRun, later: list[Step]) -> bool:
    """Every later step holding an event of the run holds only events of it, and the run's end is
    the last event of its step (a step is applied whole, so none may straddle the run's end)."""
    for step in later:
        ids = step.event_ids
        inside = [run.holds(i) or i == run.end for i in ids]
        if any(inside) and not all(inside):
            return False
        if run.end in ids and ids[-1] != run.end:
            return False
    return True
