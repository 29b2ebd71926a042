"""``repl.last.id`` writes: now (a step outside a batch) or once per database at a batch's end.

A step's marker is its last effect (``effects.Advance``, added by ``step_effects.around``), which the
executor does here (``advance``). ``Applier.batch`` defers them: each step is recorded in the journal
(``streamer.target.apply.journal``) and noted here, and the batch's end writes one marker per database.
Design: docs/design/apply.md ("Progress per batch").
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import MutableMapping

from streamer import metrics
from streamer.errors import ApplyError
from streamer.events.model import DatabaseSnapshot
from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.effects import Advance, AlterDatabase, FenceDatabase
from streamer.target.apply.journal import ProgressJournal
from streamer.target.apply.owed_markers import DEFER_MIN_EVENTS, DeferredMarkers
from streamer.target.apply.plan import GLOBAL_DB
from streamer.target.apply.view import last_id
from streamer.target.state.state_file import TargetState

log = logging.getLogger(__name__)

__all__ = ["DEFER_MIN_EVENTS", "DeferredMarkers", "advance", "fence", "flush", "journal_in", "write_marker"]


def fence(ctx: ApplyContext, effect: FenceDatabase) -> None:
    """Note the effect's database as fenced in this batch; an opening fence (a step out of event-id
    order) also marks its database (``FENCE_PARAM``) if it is not marked yet, before the step."""
    src = effect.src
    ctx.markers.add_fenced(src)
    if not effect.opening or FENCE_PARAM in effect.db.parameters:
        return
    name = ctx.target_db(src)
    with ctx.markers.fencing:  # the batch's table lanes (lane_runner) open it once, the first one
        db = ctx.memory.database(name) or effect.db
        if FENCE_PARAM in db.parameters:
            return
        fenced = dataclasses.replace(db, parameters={**db.parameters, FENCE_PARAM: str(effect.event_id)})
        ctx.do(AlterDatabase(name, fenced, exists=True))
        ctx.memory.remember(name, fenced)


def record(
    ctx: ApplyContext, src: str, last: int, db: DatabaseSnapshot | None, journaled: bool = True
) -> None:
    """A step of ``src`` through ``last`` is applied: a journal line (none for a fenced database,
    whose steps are out of order: a crash re-applies its batch); its marker is owed."""
    markers = ctx.markers
    if journaled and not markers.is_fenced(src):
        journal_in(ctx).record(src, last)
    markers.note(src, last)
    if db is not None:  # unchanged by the step: the next steps' ownership check reads no more
        ctx.memory.remember(ctx.target_db(src), db)


def flush(ctx: ApplyContext, progress: MutableMapping[str, int]) -> None:
    """Write every owed ``repl.last.id`` (one call per database), then empty the journal. The renames
    of steps no journal line records reach the disk first (``dir_fsync``)."""
    markers = ctx.markers
    markers.dir_fsyncs.wait()
    pending = markers.take()
    fenced = markers.take_fenced()
    halted = {src for src in fenced if ctx.state is not None and ctx.state.is_halted(src)}
    for src in halted:  # applied out of order up to the failure: marker and fence stay
        pending.pop(src, None)
    lift = fenced - halted
    for src in lift - pending.keys():  # found fenced, nothing owed: the fence alone goes
        if src in progress:
            pending[src] = progress[src]
    if not pending:
        return
    journal = journal_in(ctx) if ctx.state is not None else None
    try:
        if journal is not None:
            journal.sync()
        for src, last in sorted(pending.items()):
            write_marker(ctx, src, last, max(progress.get(src, last), last), lift=src in lift)
            if src in lift:
                progress[src] = max(progress.get(src, last), last)
    except BaseException:  # a metastore failure: still owed (and journaled), by the next batch
        for src, last in pending.items():
            markers.note(src, last)
        markers.refence(fenced)
        raise
    if journal is not None:
        journal.clear()


def journal_in(ctx: ApplyContext) -> ProgressJournal:
    """The journal in the applier's state dir (a deferring batch has one)."""
    assert ctx.state is not None
    return ctx.markers.journal_at(ctx.state.dir)


def advance(ctx: ApplyContext, effect: Advance) -> None:
    """A step's marker (``effects.Advance``): the applier's progress, then ``repl.last.id`` now, or in a
    deferring batch a journal line and the marker owed at its end."""
    src, last = effect.src, effect.last
    if effect.progressed:
        ctx.progress[src] = max(ctx.progress.get(src, last), last)
    if effect.deferred:
        record(ctx, src, last, effect.db, journaled=effect.journaled)
        return
    write_marker(ctx, src, last, ctx.progress[src], effect.db)


def write_marker(
    ctx: ApplyContext,
    src: str,
    last: int,
    progress: int,
    db: DatabaseSnapshot | None = None,
    lift: bool = False,
) -> None:
    """``repl.last.id`` of ``src``'s target database to at least ``last`` (the state file's progress
    when there is no database to hold it); ``db`` (or the batch's snapshot) spares a read;
    ``progress`` is the applier's, for the metric; ``lift`` removes the fence in the same call."""
    ctx.markers.dir_fsyncs.wait()  # the steps it covers are on disk first (streamer.target.apply.dir_fsync)
    if src == GLOBAL_DB:  # no database, so no series: the global watermark shows its progress
        record_off_catalog(ctx.state, src, last)
        return
    name = ctx.target_db(src)
    db = db if db is not None else (ctx.memory.database(name) or ctx.catalog.get_database(name))
    if db is None:  # dropped by this step (or collapsed create..drop): keep progress in the state
        ctx.memory.forget(name)
        record_off_catalog(ctx.state, src, last)
        metrics.forget_database(name)
        return
    owner = db.parameters.get(REPL_SOURCE_PARAM)
    if owner != ctx.source_id and not ctx.allow_existing_db:
        # a step of this source never changed it (each was checked): only a progress journal could
        # name it; this source's marks never go on a database it does not own
        log.warning("database %r is %s, not this source's (%s): its repl.last.id stays; progress of "
                    "event %d is kept in the state dir", name,
                    f"replicated from {owner!r}" if owner else "not made by replication", ctx.source_id, last)
        record_off_catalog(ctx.state, src, last)
        return
    metrics.database_created(name)  # it exists, whichever step created it
    metrics.TARGET_LAST_APPLIED.labels(db=name).set(progress)
    marker = last_id(db)
    params = {**db.parameters, LAST_ID_PARAM: str(max(marker or 0, last)), **ctx.replica_marks()}
    if lift:
        params.pop(FENCE_PARAM, None)
    if marker is not None and marker >= last and params == db.parameters:
        ctx.memory.remember(name, db)
        return
    advanced = dataclasses.replace(db, parameters=params)
    # db was read in this batch (this step or an earlier one), so it is there: no second read
    ctx.do(AlterDatabase(name, advanced, exists=True))
    ctx.memory.remember(name, advanced)


def record_off_catalog(state: TargetState | None, db: str, event_id: int) -> None:
    """Progress of a database without a catalog object to hold it (dropped, or ``GLOBAL_DB``)."""
    if state is None:
        raise ApplyError(f"no state dir to record progress of {db!r}", event_id=event_id, obj=db)
    state.record_applied(db, event_id)
