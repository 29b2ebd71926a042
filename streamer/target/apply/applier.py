"""The applier: executes planned steps on the target, idempotently, and advances ``repl.last.id``.

Each step's events go to the handlers (``handlers.DECIDERS``), which decide its effects with the
applier as their view; the batch's mode wraps them (``step_effects.around``: a regrouped step's fence,
the journal, the step's marker) and the executor does the list (``executor.run``); bootstrap records
go to ``bootstrap``. Why the order of changes keeps readers on source states, and
how a crash converges on replay: docs/design/apply.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

from streamer import metrics
from streamer.errors import ApplyError, EventError
from streamer.events.codec import check_envelope
from streamer.events.model import Event
from streamer.metastore.catalog import REPL_SOURCE_PARAM, Catalog
from streamer.target.apply import (
    bootstrap,  # called through the module: tests stand in for it
    executor,
    markers,
)
from streamer.target.apply.bootstrap import BootstrapApplier
from streamer.target.apply.context import ApplyContext, touched_databases
from streamer.target.apply.files import FileCopier
from streamer.target.apply.markers import DEFER_MIN_EVENTS, DeferredMarkers
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import GLOBAL_DB, Plan, Step, StepKind
from streamer.target.apply.reorder import reorder
from streamer.target.apply.sources import SourceRules
from streamer.target.apply.step_effects import StepMode, around, decided
from streamer.target.apply.view import last_id, object_name
from streamer.target.state.state_file import TargetState
from streamer.target.state.visibility import VisibilityStore

log = logging.getLogger(__name__)


class Applier(ApplyContext):
    """Applies steps of one source onto one target: the apply context the handlers work with (one
    object: a lane's applier is a copy with its own catalog), plus the progress it keeps."""

    def __init__(
        self,
        catalog: Catalog,
        copier: FileCopier,
        paths: TargetPaths,
        source_id: str,
        *,
        db_map: Mapping[str, str] | None = None,
        allow_existing_db: bool = False,
        state: TargetState | None = None,
        clock: Callable[[], float] = time.time,
        acid: VisibilityStore | None = None,
        mark_readonly: bool = False,
        sources: SourceRules | None = None,
        markers_per_batch: bool = False,
        coalesce_backlog: bool = False,
    ) -> None:
        super().__init__(
            catalog, copier, paths, source_id, db_map=db_map, allow_existing_db=allow_existing_db,
            state=state, clock=clock, acid=acid, mark_readonly=mark_readonly, sources=sources,
        )
        self.markers = DeferredMarkers(markers_per_batch or coalesce_backlog)  # shared with the lanes' copies
        self.coalesce_backlog = coalesce_backlog  # a backlog's batch regrouped per table (``regrouped``)
        self.bootstrap_applier = BootstrapApplier(self, self._bootstrapped)

    def __copy__(self) -> Applier:
        """A lane's applier (``job.lane_runner``): its own ``catalog`` once the lane sets it; everything
        else shared (``progress``, state, copier, visibility, the batch's snapshots, bootstrap progress)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.bootstrap_applier = self.bootstrap_applier.sharing(clone, clone._bootstrapped)
        return clone

    # --- names and progress ---------------------------------------------------------------
    def load_progress(self) -> dict[str, int]:
        """Last applied id per source database: catalog markers of our databases, then the state file."""
        in_catalog = _catalog_progress(self)
        progress = dict(in_catalog)
        if self.state is not None:
            for src, event_id in self.state.applied().items():
                progress[src] = max(progress.get(src, event_id), event_id)
            # steps applied in a batch whose markers were not written (the job died mid-batch)
            if self.markers.recover(self.state.dir, progress) and not self.markers.deferring:
                markers.flush(self, progress)  # the markers catch up before any new step
        self.progress = progress
        _progress_series(self, in_catalog, progress)
        return dict(progress)

    def _bootstrapped(self, source_db: str, event_id: int) -> None:
        """A FULL bootstrap's closing marker set ``source_db``'s ``repl.last.id`` to ``event_id``."""
        self.progress[source_db] = max(self.progress.get(source_db, 0), event_id)
        metrics.database_created(self.target_db(source_db))

    # --- steps ----------------------------------------------------------------------------
    def reusing_snapshots(self) -> AbstractContextManager[None]:
        """Within: a database or table read or written by a step is not read again by the next ones
        (``run_plan`` runs each batch so). Outside, every step reads what it changes."""
        return self.memory.remembering()

    @contextmanager
    def batch(self, events: int = DEFER_MIN_EVENTS) -> Iterator[None]:
        """One micro-batch of ``events`` planned events: snapshots reused and, with a state dir and at
        least ``DEFER_MIN_EVENTS`` events (a backlog), one ``repl.last.id`` write per database when it
        ends normally, each step journaled meanwhile (``markers.DeferredMarkers``)."""
        with self.memory.remembering():
            self.markers.defer_for(events, self.state is not None)
            try:
                yield
                markers.flush(self, self.progress)
            finally:
                self.markers.deferring = False

    def apply(self, step: Step) -> None:
        """Apply one step and advance its database's ``repl.last.id``; errors name the event.

        The handlers decide the step's effects (``step_effects.decided``), the batch's mode wraps them
        (``step_effects.around``: fence, journal, marker), and the executor does the list."""
        ctx: ApplyContext = self
        name = ctx.target_db(step.db)
        try:
            check_events(ctx, step)
            if step.kind is StepKind.BOOTSTRAP:  # bootstrap records: streamer.target.apply.bootstrap
                ctx.memory.forget()
                ctx.memory.forget_tables()  # a bootstrap record replaces tables by its own rules
                try:
                    bootstrap.apply_bootstrap(self.bootstrap_applier, step)
                finally:
                    ctx.memory.forget_tables()
                return
            db = ctx.check_owned(name) if step.db != GLOBAL_DB else None
            mode = StepMode(db, deferring=self.markers.deferring, fenced=self.markers.is_fenced(step.db),
                            pin=self.pins.get(step.db))
            executor.run(ctx, around(ctx, step, decided(ctx, step), mode))
        except EventError as exc:
            ctx.memory.forget(name)  # a failed step may have left it in any state
            ctx.memory.forget_tables()
            raise _with_event(exc, step.first, _run_note(step)) from exc
        except Exception as exc:  # a catalog or filesystem failure: halt this database, do not crash
            ctx.memory.forget(name)
            ctx.memory.forget_tables()
            raise ApplyError(
                f"{type(exc).__name__}: {exc}{_run_note(step)}",
                event_id=step.first.event_id,
                event_type=str(step.first.event_type),
                obj=object_name(step.first),
            ) from exc
        _count_applied(step, ctx.clock())


def regrouped(applier: Applier, the_plan: Plan) -> Plan:
    """``the_plan`` regrouped per table (``--coalesce-backlog``) when its batch will write its markers at
    its end (a backlog: ``DEFER_MIN_EVENTS`` or more events, a state dir); else as is."""
    if not (applier.coalesce_backlog and applier.markers.per_batch and applier.state is not None):
        return the_plan
    if len(the_plan.event_ids) < DEFER_MIN_EVENTS:
        return the_plan
    replaying = applier.state.pending_replays()
    if any(s.db in replaying for s in the_plan.steps):
        return the_plan  # events re-read after a halt go in order: a failure halts at its own event
    backlog = reorder(the_plan)
    fenced = sum(s.fenced for s in backlog.steps)
    metrics.TARGET_EVENTS_REGROUPED.inc(sum(len(s.events) for s in backlog.steps if s.fenced))
    log.info("backlog of %d events regrouped per table: %d steps instead of %d (%d fenced)",
             len(the_plan.event_ids), len(backlog.steps), len(the_plan.steps), fenced)
    return backlog


def check_events(ctx: ApplyContext, step: Step) -> None:
    """Every event of the step (a run's superseded ones too, bootstrap records too) acts only on the
    database its envelope names (``check_envelope``), each source database it names has a target
    database of its own (``ApplyContext.check_mapping``), and it acts on no other this source does not
    own (``touched_databases``, through ``ApplyContext.check_owned``, the one ownership check: ``apply``
    checks an incremental step's own database with it, ``bootstrap`` each record's); a failure halts
    the step's database at its first event, naming the event refused."""
    for event in step.events:
        try:
            check_envelope(event)
            if event.db:  # never two source databases in one target database (``--db-map``)
                ctx.check_mapping(event.db)
            for name in touched_databases(event):
                ctx.check_owned(ctx.check_mapping(name))
        except EventError as exc:
            if event is step.first:
                raise
            raise ApplyError(f"event {event.event_id} of this step: {exc.cause}", obj=exc.obj) from exc


def _catalog_progress(ctx: ApplyContext) -> dict[str, int]:
    """``repl.last.id`` of every target database this source replicates, by source name: only the
    database a source database is mapped to holds its progress. One that merely bears a source
    database's name that ``--db-map`` sends elsewhere (left by a run without the map) is no replica
    of it: its marker read as that source's progress would drop the source's events as applied."""
    progress: dict[str, int] = {}
    for name in ctx.catalog.list_databases():
        source = ctx.source_db(name)
        if source is None:
            continue
        db = ctx.catalog.get_database(name)
        if db is None or db.parameters.get(REPL_SOURCE_PARAM) != ctx.source_id:
            continue
        marker = last_id(db)
        if marker is not None:
            progress[source] = marker
    return progress


def _progress_series(ctx: ApplyContext, in_catalog: Mapping[str, int], progress: Mapping[str, int]) -> None:
    for src in in_catalog:  # databases that exist: a dropped one's progress is no series
        metrics.TARGET_LAST_APPLIED.labels(db=ctx.target_db(src)).set(progress[src])
    for src in progress.keys() - in_catalog.keys() - {GLOBAL_DB}:  # dropped before this process
        metrics.forget_database(ctx.target_db(src))


def _count_applied(step: Step, now: float) -> None:
    if step.superseded:
        metrics.TARGET_EVENTS_COALESCED.inc(len(step.superseded))
    for event in step.events:
        metrics.TARGET_EVENTS_APPLIED.labels(event_type=str(event.event_type)).inc()
        metrics.TARGET_LAG_SECONDS.observe(max(0.0, now - event.source.event_time))


def _run_note(step: Step) -> str:
    """Where a coalesced step's failure came from: the run is halted at its first event, but the
    call made was the last event's (an operator reading the halt must know both)."""
    if step.kind is not StepKind.COALESCED:
        return ""
    return (
        f" (coalesced run of events {step.first.event_id}..{step.last_event_id}, "
        f"applied as event {step.last_event_id})"
    )


def _with_event(exc: EventError, event: Event, note: str = "") -> ApplyError:
    if isinstance(exc, ApplyError) and exc.event_id is not None and not note:
        return exc
    cls = type(exc) if isinstance(exc, ApplyError) else ApplyError
    try:
        return cls(
            exc.cause + note,
            event_id=event.event_id,
            event_type=exc.event_type or str(event.event_type),
            obj=exc.obj or object_name(event),
        )
    except TypeError:  # a subclass with another constructor
        return ApplyError(
            exc.cause + note,
            event_id=event.event_id,
            event_type=str(event.event_type),
            obj=exc.obj or object_name(event),
        )
