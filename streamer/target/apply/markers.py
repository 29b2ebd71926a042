"""``repl.last.id`` writes: now (a step outside a batch) or once per database at a batch's end.

``Applier.batch`` defers them: each step is recorded in the journal (``streamer.target.apply.journal``)
and noted here, and the batch's end writes one marker per database. Design: docs/design/apply.md
("Progress per batch").
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import MutableMapping
from pathlib import Path

from streamer import metrics
from streamer.errors import ApplyError
from streamer.events.model import AlterTablePayload, DatabaseSnapshot, EventType
from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.effects import AlterDatabase
from streamer.target.apply.journal import ANY_OBJECT, ObjectKey, ProgressJournal
from streamer.target.apply.plan import GLOBAL_DB, Step
from streamer.target.apply.view import last_id
from streamer.target.state.state_file import TargetState

log = logging.getLogger(__name__)

_DATABASE_EVENTS = frozenset({EventType.CREATE_DATABASE, EventType.ALTER_DATABASE, EventType.DROP_DATABASE})


# With --markers-per-batch, batches of fewer events (live traffic) still write repl.last.id after every
# step: a reader's bracket (streamer.read.sql) then sees every step, and a marker per step costs little
DEFER_MIN_EVENTS = 8


class DeferredMarkers:
    """The markers a batch owes: source db -> last applied id (lanes note theirs concurrently)."""

    def __init__(self, per_batch: bool = False) -> None:
        # --markers-per-batch: off, every step writes its marker (SQL brackets see each step)
        self.per_batch = per_batch
        self.deferring = False
        self.journal: ProgressJournal | None = None
        self._pending: dict[str, int] = {}
        # source dbs this batch fenced (or found fenced): no journal line for them; the batch's end
        # lifts the fence with the marker, unless the database halted (streamer.target.apply.reorder)
        self.fenced: set[str] = set()
        self._lock = threading.Lock()

    def note(self, src: str, event_id: int) -> None:
        with self._lock:
            self._pending[src] = max(self._pending.get(src, event_id), event_id)

    def defer_for(self, events: int, has_state: bool) -> None:
        """Whether this batch defers: only per batch, with a state dir (the journal), for a backlog."""
        self.deferring = self.per_batch and has_state and events >= DEFER_MIN_EVENTS

    def take(self) -> dict[str, int]:
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending

    def journal_in(self, ctx: ApplyContext) -> ProgressJournal:
        """The journal in the applier's state dir (a deferring batch has one)."""
        assert ctx.state is not None
        return self._journal_at(ctx.state.dir)

    def _journal_at(self, state_dir: Path) -> ProgressJournal:
        journal = self.journal
        if journal is None or journal.path.parent != Path(state_dir):
            journal = self.journal = ProgressJournal(state_dir)
        return journal

    def fence(
        self, ctx: ApplyContext, src: str, db: DatabaseSnapshot, event_id: int, opening: bool
    ) -> DatabaseSnapshot:
        """Note ``src`` as fenced in this batch; ``opening`` (a step out of event-id order) also marks its
        database (``FENCE_PARAM``) if it is not marked yet, before the step. Returns the snapshot now."""
        with self._lock:
            self.fenced.add(src)
        if not opening or FENCE_PARAM in db.parameters:
            return db
        name = ctx.target_db(src)
        fenced = dataclasses.replace(db, parameters={**db.parameters, FENCE_PARAM: str(event_id)})
        ctx.do(AlterDatabase(name, fenced, exists=True))
        ctx.memory.remember(name, fenced)
        return fenced

    def is_fenced(self, src: str) -> bool:
        with self._lock:
            return src in self.fenced

    def record(self, ctx: ApplyContext, src: str, last: int, db: DatabaseSnapshot | None) -> None:
        """A step of ``src`` through ``last`` is applied: a journal line (none for a fenced database,
        whose steps are out of order: a crash re-applies its batch); its marker is owed."""
        if not self.is_fenced(src):
            self.journal_in(ctx).record(src, last)
        self.note(src, last)
        if db is not None:  # unchanged by the step: the next steps' ownership check reads no more
            ctx.memory.remember(ctx.target_db(src), db)

    def flush(self, ctx: ApplyContext, progress: MutableMapping[str, int]) -> None:
        """Write every owed ``repl.last.id`` (one call per database), then empty the journal."""
        pending = self.take()
        with self._lock:
            fenced, self.fenced = self.fenced, set()
        halted = {src for src in fenced if ctx.state is not None and ctx.state.is_halted(src)}
        for src in halted:  # applied out of order up to the failure: marker and fence stay
            pending.pop(src, None)
        lift = fenced - halted
        for src in lift - pending.keys():  # found fenced, nothing owed: the fence alone goes
            if src in progress:
                pending[src] = progress[src]
        if not pending:
            return
        journal = self.journal_in(ctx) if ctx.state is not None else None
        try:
            if journal is not None:
                journal.sync()
            for src, last in sorted(pending.items()):
                write_marker(ctx, src, last, max(progress.get(src, last), last), lift=src in lift)
                if src in lift:
                    progress[src] = max(progress.get(src, last), last)
        except BaseException:  # a metastore failure: still owed (and journaled), by the next batch
            for src, last in pending.items():
                self.note(src, last)
            with self._lock:
                self.fenced |= fenced
            raise
        if journal is not None:
            journal.clear()

    def recover(self, state_dir: Path, progress: MutableMapping[str, int]) -> bool:
        """Steps a killed job journaled but whose markers it never wrote: into ``progress``, and
        owed again; True when there were any (the caller writes them at once)."""
        found = False
        for src, event_id in self._journal_at(state_dir).read().items():
            if event_id > progress.get(src, -1):
                progress[src] = event_id
                self.note(src, event_id)
                found = True
        return found


def changed_objects(step: Step) -> set[ObjectKey]:
    """The tables a step changes (``ANY_OBJECT`` when not known one by one: a database, function or
    transaction event), for the journal's sync rule."""
    out: set[ObjectKey] = set()
    for event in step.events:
        payload = event.payload
        if isinstance(payload, AlterTablePayload):
            out |= {(payload.before.db.lower(), payload.before.name.lower()),
                    (payload.after.db.lower(), payload.after.name.lower())}
        elif event.db and event.table and event.event_type not in _DATABASE_EVENTS:
            out.add((event.db.lower(), event.table.lower()))
        else:
            out.add(ANY_OBJECT)
    return out


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
