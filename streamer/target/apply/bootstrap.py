"""Bootstrap, target side: apply bootstrap records (``STREAMER_BOOTSTRAP`` / ``_END``) to the target.

Each record is impressed with the event handlers (names mapped, locations re-derived, files
copied and verified), but a database's ``repl.last.id`` is set only by the closing marker: until
then the database is being bootstrapped, and a crash resumes the bootstrap rather than skipping it.
The last applied record of each bootstrap is kept in ``<state dir>/bootstrap-progress.json``, so an
interrupted bootstrap resumes after the last finished object instead of redoing them all.
Progress shows as a bar while stderr is a terminal, as a log line every 5% otherwise.

Every record, whatever its kind, changes only a database this source owns, by the check incremental
events pass (``ApplyContext.check_owned``: ``check_owned`` here), and a DATABASE record also refuses
one replicated before (it has a ``repl.last.id``), unless the applier allows existing databases.
A table is created afresh by its TABLE record: a leftover table of that name is dropped first.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamer.errors import ApplyError
from streamer.events.model import (
    AddConstraintsPayload,
    AddPartitionPayload,
    BootstrapKind,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    BootstrapScope,
    CreateFunctionPayload,
    CreateTablePayload,
    DatabaseSnapshot,
    DropTablePayload,
    Event,
    EventType,
    InsertPayload,
    Payload,
)
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM, source_params
from streamer.target.apply import executor
from streamer.target.apply.by_state import SOURCE_LOCATION_PARAM
from streamer.target.apply.catalog_objects import add_constraints, create_function
from streamer.target.apply.context import ApplyContext, touched_databases
from streamer.target.apply.data import insert
from streamer.target.apply.databases import source_location_params
from streamer.target.apply.effects import AlterDatabase, CreateDatabase, Effect, UpdateStatistics
from streamer.target.apply.partitions import add_partitions
from streamer.target.apply.plan import Step
from streamer.target.apply.tables import create_table, drop_table
from streamer.target.apply.view import View
from streamer.target.state.files import StateFileError, read_json, write_json
from streamer.target.state.lock import state_lock
from streamer.target.state.visibility import table_key

log = logging.getLogger(__name__)

PROGRESS_FILE = "bootstrap-progress.json"


class BootstrapProgress:
    """Last applied record per bootstrap id, in one small JSON file of the state dir, changed under
    the state dir's lock (re-read, merged, written atomically) like every other state file."""

    def __init__(self, state_dir: str | Path | None) -> None:
        self.path = Path(state_dir) / PROGRESS_FILE if state_dir is not None else None
        self.done: dict[int, int] = _read_progress(self.path) if self.path is not None else {}

    def applied_through(self, bootstrap_id: int) -> int:
        return self.done.get(bootstrap_id, 0)

    def record(self, bootstrap_id: int, sequence: int) -> None:
        if self.done.get(bootstrap_id, 0) >= sequence:
            return
        self.done[bootstrap_id] = sequence
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with state_lock(self.path.parent):
            merged = _read_progress(self.path)
            for key, value in self.done.items():
                merged[key] = max(value, merged.get(key, 0))
            self.done = merged
            write_json(self.path, {str(k): v for k, v in sorted(merged.items())})


def _read_progress(path: Path) -> dict[int, int]:
    body = read_json(path)
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise StateFileError(f"{path}: must be an object of bootstrap id -> record sequence, "
                             f"not {type(body).__name__}")
    out: dict[int, int] = {}
    for key, value in body.items():
        if not str(key).isdigit() or isinstance(value, bool) or not isinstance(value, int):
            raise StateFileError(f"{path}: entry {key!r}: {value!r} must map a bootstrap id to an integer")
        out[int(key)] = value
    return out


class BootstrapApplier:
    """What applying bootstrap records needs besides the handlers: the context they run in, the
    records' progress, and ``advance(source db, id)``, which moves the applier's progress when a
    FULL bootstrap ends."""

    def __init__(self, ctx: ApplyContext, advance: Callable[[str, int], None]) -> None:
        self.ctx = ctx
        self.advance = advance
        self._progress: BootstrapProgress | None = None

    @property
    def progress(self) -> BootstrapProgress:
        """Read at the first bootstrap step: the state dir may be given after the applier is built."""
        if self._progress is None:
            state = self.ctx.state
            self._progress = BootstrapProgress(state.dir if state is not None else None)
        return self._progress

    def sharing(self, ctx: ApplyContext, advance: Callable[[str, int], None]) -> BootstrapApplier:
        """Another applier's (a lane's): its own context and progress map, the same records' progress."""
        other = BootstrapApplier(ctx, advance)
        other._progress = self._progress
        return other


def apply_bootstrap(applier: BootstrapApplier, step: Step) -> None:
    """Apply one bootstrap record or marker (the planner makes one step of each)."""
    progress = applier.progress
    ctx = applier.ctx
    for event in step.events:
        payload = event.payload
        if isinstance(payload, BootstrapMarkerPayload):
            _finish(applier, event, payload)
            progress.record(payload.bootstrap_id, payload.records + 1)
            continue
        if not isinstance(payload, BootstrapObjectPayload):
            raise ApplyError(f"payload is {type(payload).__name__}, not a bootstrap record", obj=event.db)
        if payload.sequence <= progress.applied_through(payload.bootstrap_id):
            continue  # finished before an interruption
        check_owned(ctx, event, payload)
        _apply_object(ctx, event, payload)
        progress.record(payload.bootstrap_id, payload.sequence)
        _report(payload)


def check_owned(ctx: ApplyContext, event: Event, p: BootstrapObjectPayload) -> None:
    """Every record, of any kind, changes only a database this source owns (or may adopt:
    ``--allow-existing-db``) or one still to be made, by the check incremental events pass
    (``ApplyContext.check_owned``; ``Applier.apply`` calls it for a step's database). A refusal names
    the record (its bootstrap's records share one event id) and halts its database before any of it
    is applied."""
    for name in dict.fromkeys([n for n in (event.db,) if n] + touched_databases(event)):
        try:
            ctx.check_owned(ctx.target_db(name))
        except ApplyError as exc:
            what = record_object(event, p)
            raise ApplyError(
                f"bootstrap record {p.sequence} of {p.total} ({p.kind} {what}): {exc.cause}",
                event_id=event.event_id,
                event_type=str(event.event_type),
                obj=what,
            ) from exc


def record_object(event: Event, p: BootstrapObjectPayload) -> str:
    """The object a record is about, by its source names (``db.table``, ``db.function``, ``db``)."""
    if p.table is not None:
        return f"{p.table.db}.{p.table.name}"
    if p.function is not None:
        return f"{p.function.db}.{p.function.name}"
    return p.database.name if p.database is not None else event.db or "?"


def _synth(event: Event, event_type: EventType, payload: Payload, table: str | None = None) -> Event:
    return Event(
        event.source, event_type, payload, db=event.db, table=table or event.table, ts_ms=event.ts_ms
    )


def _decided(ctx: ApplyContext, decide: Callable[[View, Event], list[Effect]], event: Event) -> None:
    """A record's object as the incremental handler ``decide``s it, done by the executor."""
    executor.run(ctx, decide(ctx, event))


def _apply_object(ctx: ApplyContext, event: Event, p: BootstrapObjectPayload) -> None:
    kind = p.kind
    if kind is BootstrapKind.DATABASE and p.database is not None:
        _database(ctx, p.database, p.scope)
    elif kind is BootstrapKind.FUNCTION and p.function is not None:
        created = CreateFunctionPayload(p.function)
        _decided(ctx, create_function, _synth(event, EventType.CREATE_FUNCTION, created))
    elif kind is BootstrapKind.DROP_TABLE and p.table is not None:
        dropped = DropTablePayload(p.table)
        _decided(ctx, drop_table, _synth(event, EventType.DROP_TABLE, dropped, p.table.name))
    elif kind is BootstrapKind.TABLE and p.table is not None:
        _table(ctx, event, p)
    elif kind is BootstrapKind.PARTITIONS and p.table is not None:
        _partitions(ctx, event, p)
    else:
        raise ApplyError(f"bootstrap record {p.sequence} ({kind}) carries no object", obj=event.db)


def _database(ctx: ApplyContext, snap: DatabaseSnapshot, scope: BootstrapScope) -> None:
    name = ctx.target_db(snap.name)
    current = ctx.catalog.get_database(name)  # absent, ours or adopted: ``check_owned`` refused the rest
    if current is not None and not ctx.allow_existing_db and LAST_ID_PARAM in current.parameters:
        raise ApplyError(  # replicated before: a bootstrap would overwrite what it replicated
            f"target database {name!r} already exists; a bootstrap refuses to overwrite it "
            "(drop it, use --db-map to bootstrap into another name, or --allow-existing-db to "
            "replace its content)",
            obj=name,
        )
    own = source_params(snap.parameters)
    own.pop(SOURCE_LOCATION_PARAM, None)  # another replica's record, never this target's
    # where the source keeps the database: the root its functions' resources may be read below
    params = {**own, **source_location_params(snap, current), REPL_SOURCE_PARAM: ctx.source_id}
    if current is not None and LAST_ID_PARAM in current.parameters:
        params[LAST_ID_PARAM] = current.parameters[LAST_ID_PARAM]  # never moves back; the marker sets E1
    desired = DatabaseSnapshot(
        name=name,
        description=snap.description,
        location=ctx.paths.database_location(name),
        parameters=params,
        owner_name=snap.owner_name,
        owner_type=snap.owner_type,
    )
    executor.run(ctx, [CreateDatabase(desired)] if current is None else
                 [AlterDatabase(name, desired)] if current != desired else [])


def _table(ctx: ApplyContext, event: Event, p: BootstrapObjectPayload) -> None:
    assert p.table is not None
    table = p.table
    db, name = ctx.target_db(table.db), table.name.lower()
    if ctx.catalog.get_table(db, name) is not None:  # stale: start from nothing
        _decided(ctx, drop_table, _synth(event, EventType.DROP_TABLE, DropTablePayload(None), name))
    _decided(ctx, create_table, _synth(event, EventType.CREATE_TABLE, CreateTablePayload(table), name))
    _partitions(ctx, event, p)
    if p.write_ids:
        ids = list(p.write_ids)
        ctx.acid.update(
            lambda v: v.committed(ctx.source_id, -p.bootstrap_id, {table_key(db, name): ids})
        )
    if p.constraints:
        _decided(ctx, add_constraints, _synth(event, EventType.ADD_PRIMARYKEY, _constraints(p)))
    if p.statistics:
        executor.run(ctx, [UpdateStatistics(db, name, None, list(p.statistics))])


def _constraints(p: BootstrapObjectPayload) -> Payload:
    return AddConstraintsPayload(list(p.constraints))


def _partitions(ctx: ApplyContext, event: Event, p: BootstrapObjectPayload) -> None:
    """The record's partitions with their files and column statistics (or an unpartitioned table's
    files); setting statistics again is harmless, so a record redone after a crash converges."""
    assert p.table is not None
    table = p.table
    if table.partition_keys:
        if p.partitions:
            add = AddPartitionPayload(table, list(p.partitions), list(p.files))
            executor.run(ctx, add_partitions(ctx, [_synth(event, EventType.ADD_PARTITION, add, table.name)]))
        db, name = ctx.target_db(table.db), table.name.lower()
        for ps in p.partition_statistics:  # as UPDATE_PART_COL_STAT events are applied
            executor.run(ctx, [UpdateStatistics(db, name, list(ps.values), list(ps.statistics))])
    elif p.files:
        files = InsertPayload(table, None, [], True, list(p.files))
        _decided(ctx, insert, _synth(event, EventType.INSERT, files, table.name))


def _finish(applier: BootstrapApplier, event: Event, marker: BootstrapMarkerPayload) -> None:
    """Databases of a FULL bootstrap are now at its event id; incremental events follow."""
    if marker.scope is not BootstrapScope.FULL:
        return
    ctx = applier.ctx
    for source_db in marker.databases:
        name = ctx.target_db(source_db)
        try:
            current = ctx.check_owned(name)  # the one ownership check; the marker names many: no halt
        except ApplyError as exc:
            log.warning("bootstrap %d: %s; its repl.last.id stays", marker.bootstrap_id, exc.cause)
            continue
        if current is None:
            continue
        last = int(current.parameters.get(LAST_ID_PARAM, "0") or 0)
        if last >= marker.bootstrap_id:
            continue
        params = {**current.parameters, LAST_ID_PARAM: str(marker.bootstrap_id)}
        ctx.markers.dir_fsyncs.wait()  # a marker covers earlier steps: their renames on disk first
        executor.run(ctx, [AlterDatabase(name, _with_params(current, params))])
        applier.advance(source_db, marker.bootstrap_id)
    log.info("bootstrap %d applied: %d records, databases %s", marker.bootstrap_id, marker.records,
             ", ".join(marker.databases))


def _with_params(db: DatabaseSnapshot, params: dict[str, str]) -> DatabaseSnapshot:
    return dataclasses.replace(db, parameters=params)


def _report(p: BootstrapObjectPayload) -> None:
    """A progress bar on a terminal (stderr); a log line every 5% otherwise (logs, containers)."""
    if _BARS.show(p):
        return
    step = max(1, p.total // 20)
    if p.sequence % step == 0 or p.sequence == p.total:
        log.info("bootstrap %d: %d/%d records applied (%.0f%%)", p.bootstrap_id, p.sequence, p.total,
                 100.0 * p.sequence / max(1, p.total))


class _Bars:
    """One rich progress bar per bootstrap being applied, while stderr is a terminal."""

    def __init__(self) -> None:
        self.progress: Any = None
        self.tasks: dict[int, Any] = {}

    def show(self, p: BootstrapObjectPayload) -> bool:
        if not sys.stderr.isatty():
            return False
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        if self.progress is None:
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=Console(stderr=True))
            self.progress.start()
        if p.bootstrap_id not in self.tasks:
            self.tasks[p.bootstrap_id] = self.progress.add_task(
                f"bootstrap {p.bootstrap_id} records applied", total=p.total)
        self.progress.update(self.tasks[p.bootstrap_id], completed=p.sequence)
        if p.sequence >= p.total:
            del self.tasks[p.bootstrap_id]
            if not self.tasks:
                self.progress.stop()
                self.progress = None
        return True


_BARS = _Bars()
