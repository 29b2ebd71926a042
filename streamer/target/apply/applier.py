"""The applier: executes planned steps on the target catalog and filesystem, idempotently.

Metadata is impressed from the event's snapshots (as Hive's REPL LOAD does) with names mapped by
``db_map`` and every location re-derived by ``TargetPaths``. After each step the database's
``repl.last.id`` holds the step's last event id (for database events in the same catalog call), so a
crash anywhere replays at most one step, and every handler converges when replayed: creating an
existing object makes it equal to the snapshot, dropping a missing object does nothing, files that
are already in place are not copied again.

Order of data and metadata changes, chosen so readers see source states (DESIGN invariant 2):
- new objects: files first, then the metadata that makes them visible;
- removals (drop, truncate): metadata first, files after (DESIGN §3.5);
- INSERT [OVERWRITE]: all files of the event are copied and verified under hidden names; then, on a
  local filesystem, the directory's next state is built beside it (hard links of what stays plus
  the new files) and swapped in with one ``RENAME_EXCHANGE`` (``streamer.target.apply.swap``): readers
  list the old directory or the new one, never part of an insert or old files next to new ones.
  Elsewhere the files are renamed into place together at the end and, for an overwrite, the old
  files removed after: readers can then see a mix during those renames and deletes (no copying
  happens in that window); a crash in the window leaves a superset that the replay completes, since
  "old" is recomputed as "every visible file the event does not name". Nothing of a failed event
  becomes visible. Such publishes count in ``streamer_target_nonatomic_publishes_total{db}``; on
  object stores each "rename" is a server-side copy and a delete (``streamer.filesystems``).
- managed rename: the data directory moves first, then the table is altered to the new derived
  location (explicit, so the metastore does not move it again) and its partitions re-pointed.

Transactions (``streamer.target.state.visibility``): ``OPEN_TXN`` maps the source txn to a target id and
``ALLOC_WRITE_ID``/``ACID_WRITE`` change nothing visible (the agent ships every write with its
``COMMIT_TXN``, so nothing of an open txn needs buffering here). A ``COMMIT_TXN`` stages every file of
every write (all tables) into its delta directory, verifies and publishes them, and only then adds the
txn's write ids to the visibility file in one atomic replace: readers going through
``streamer.target.read_table`` see all of it at once or nothing. ``ABORT_TXN`` copies nothing. A crash
anywhere converges on replay: published files are skipped by checksum, the visibility update is a set
union, and a txn already committed is not redone. Hive's ``transactional`` table parameters are kept
under streamer's keys (``acid.target_parameters``): the Hive 2.3 target metastore refuses them.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import unquote, urlsplit

from streamer import metrics
from streamer.errors import ApplyError, EventError
from streamer.events.model import (
    AbortTxnPayload,
    AcidWritePayload,
    AddConstraintsPayload,
    AddPartitionPayload,
    AlterDatabasePayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
    CommitTxnPayload,
    CreateFunctionPayload,
    CreateTablePayload,
    DatabasePayload,
    DatabaseSnapshot,
    DeleteColumnStatsPayload,
    DropConstraintPayload,
    DropFunctionPayload,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    InsertPayload,
    OpenTxnPayload,
    PartitionSnapshot,
    ReloadPayload,
    TableSnapshot,
    UnknownPayload,
    UpdateColumnStatsPayload,
)
from streamer.filesystems import atomic_rename
from streamer.metastore.catalog import (
    FAILOVER_CUT_PARAM,
    LAST_ID_PARAM,
    READONLY_PARAM,
    REPL_SOURCE_PARAM,
    REPL_TARGET_PARAM,
    Catalog,
    source_params,
)
from streamer.target.apply import function_resources as functions
from streamer.target.apply.files import (
    CopyReport,
    FileCopier,
    Staged,
    clear_dir,
    link_dir,
    move_dir,
    remove_tree,
)
from streamer.target.apply.paths import EXTERNAL_TYPES, VIEW_TYPES, TargetPaths, partition_name
from streamer.target.apply.plan import GLOBAL_DB, Plan, Step, StepKind
from streamer.target.apply.swap import publish_swapped
from streamer.target.state.state_file import Halt, TargetState
from streamer.target.state.visibility import TxnState, VisibilityStore, table_key, target_parameters

log = logging.getLogger(__name__)

P = TypeVar("P")

# Events that change the database object itself (and so its parameters, where repl.last.id lives).
_DATABASE_EVENTS = frozenset({EventType.CREATE_DATABASE, EventType.ALTER_DATABASE, EventType.DROP_DATABASE})

# Events that change nothing on a target (their effect arrives with a later event, or never).
_NO_OPS = frozenset(
    {
        EventType.ALLOC_WRITE_ID,
        EventType.COMMIT_COMPACTION,
        EventType.PROGRESS,
    }
)


class Applier:
    """Applies steps of one source onto one target."""

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
    ) -> None:
        self.catalog = catalog
        self.mark_readonly = mark_readonly
        self.copier = copier
        self.paths = paths
        self.source_id = source_id
        self.db_map = {k.lower(): v.lower() for k, v in (db_map or {}).items()}
        self.allow_existing_db = allow_existing_db
        self.state = state
        self.clock = clock
        self.acid = acid if acid is not None else VisibilityStore(paths.warehouse.join())
        self.progress: dict[str, int] = {}  # source db -> last applied id, kept current by apply()
        # target db -> its snapshot as this applier last read or wrote it, kept across the steps of
        # one batch only (``reusing_snapshots``; None outside one): nothing else writes a replicated
        # database while a batch runs (the job's lock; a failover needs the job stopped), so
        # re-reading it per step would only repeat what the last step wrote
        self._databases: dict[str, DatabaseSnapshot] | None = None
        # (target db, table) -> the table as a create or alter step of this batch left it, for the
        # next create/alter of it (a canary bumped every 100 ms is one get_table less per event).
        # Any other kind of step forgets them all: only these two handlers' results are known exactly
        self._tables: dict[tuple[str, str], TableSnapshot] | None = None
        if not copier.roots:
            copier.roots = paths.roots

    # --- names and progress ---------------------------------------------------------------
    def target_db(self, source_db: str) -> str:
        return self.db_map.get(source_db.lower(), source_db.lower())

    def load_progress(self) -> dict[str, int]:
        """Last applied id per source database: catalog markers of our databases, then the state file."""
        reverse = {v: k for k, v in self.db_map.items()}
        progress: dict[str, int] = {}
        for name in self.catalog.list_databases():
            db = self.catalog.get_database(name)
            if db is None or db.parameters.get(REPL_SOURCE_PARAM) != self.source_id:
                continue
            marker = _marker(db)
            if marker is not None:
                progress[reverse.get(name.lower(), name.lower())] = marker
        if self.state is not None:
            for src, event_id in self.state.applied().items():
                progress[src] = max(progress.get(src, event_id), event_id)
        self.progress = progress
        for src, event_id in progress.items():
            metrics.TARGET_LAST_APPLIED.labels(db=src).set(event_id)
        return dict(progress)

    # --- steps ----------------------------------------------------------------------------
    @contextmanager
    def reusing_snapshots(self) -> Iterator[None]:
        """Within: a database read or written by one step is not read again by the next steps, nor
        a table a create or alter step wrote by the next create or alter of it (``run_plan`` runs
        each batch so). Outside, every step reads what it changes."""
        self._databases, self._tables = {}, {}
        try:
            yield
        finally:
            self._databases, self._tables = None, None

    # (each reads self._databases once: a concurrent batch ending may set it to None meanwhile)
    def _forget(self, name: str | None = None) -> None:
        known = self._databases
        if known is not None:
            if name is None:
                known.clear()
            else:
                known.pop(name, None)

    def _remember(self, name: str, db: DatabaseSnapshot) -> None:
        known = self._databases
        if known is not None:
            known[name] = db

    def _forget_tables(self) -> None:
        known = self._tables
        if known is not None:
            known.clear()

    def _remember_table(self, table: TableSnapshot) -> None:
        known = self._tables
        if known is not None:
            known[(table.db, table.name)] = table

    def _forget_table(self, db: str, name: str) -> None:
        known = self._tables
        if known is not None:
            known.pop((db, name), None)

    def apply(self, step: Step) -> None:
        """Apply one step and advance its database's ``repl.last.id``; errors name the event."""
        name = self.target_db(step.db)
        try:
            if step.kind is StepKind.BOOTSTRAP:  # bootstrap records: streamer.target.apply.bootstrap
                from streamer.target.apply.bootstrap import apply_bootstrap

                self._forget()
                self._forget_tables()  # a bootstrap record replaces tables by its own rules
                try:
                    apply_bootstrap(self, step)
                finally:
                    self._forget_tables()
                return
            db = self._check_owned(name) if step.db != GLOBAL_DB else None
            if step.kind is StepKind.ADD_PARTITIONS:
                self._add_partitions(list(step.events))
            elif step.kind in (StepKind.COLLAPSED, StepKind.COALESCED):  # the last stands for the run
                self._apply_event(step.last)
            else:
                self._apply_event(step.first)
            # the snapshot read before the step is still current unless the step changed the database
            unchanged = db is not None and not any(e.event_type in _DATABASE_EVENTS for e in step.events)
            if not unchanged:
                self._forget(name)
            if not all(_keeps_known_tables(e) for e in step.events):
                self._forget_tables()
            self._advance(step, db if unchanged else None)
        except EventError as exc:
            self._forget(name)  # a failed step may have left it in any state
            self._forget_tables()
            raise _with_event(exc, step.first, _run_note(step)) from exc
        except Exception as exc:  # a catalog or filesystem failure: halt this database, do not crash
            self._forget(name)
            self._forget_tables()
            raise ApplyError(
                f"{type(exc).__name__}: {exc}{_run_note(step)}",
                event_id=step.first.event_id,
                event_type=str(step.first.event_type),
                obj=_obj(step.first),
            ) from exc
        if step.superseded:
            metrics.TARGET_EVENTS_COALESCED.inc(len(step.superseded))
        now = self.clock()
        for event in step.events:
            metrics.TARGET_EVENTS_APPLIED.labels(event_type=str(event.event_type)).inc()
            metrics.TARGET_LAG_SECONDS.observe(max(0.0, now - event.source.event_time))

    def _advance(self, step: Step, db: DatabaseSnapshot | None = None) -> None:
        """Write the step's last id as ``repl.last.id``; ``db`` spares re-reading an unchanged database."""
        last = step.last_event_id
        self.progress[step.db] = max(self.progress.get(step.db, last), last)
        metrics.TARGET_LAST_APPLIED.labels(db=step.db).set(self.progress[step.db])
        if step.db == GLOBAL_DB:
            self._record_off_catalog(step.db, last)
            return
        name = self.target_db(step.db)
        db = db if db is not None else self.catalog.get_database(name)
        if db is None:  # dropped by this step (or collapsed create..drop): keep progress in the state
            self._forget(name)
            self._record_off_catalog(step.db, last)
            return
        marker = _marker(db)
        params = {**db.parameters, LAST_ID_PARAM: str(max(marker or 0, last)), **self._replica_marks()}
        if marker is not None and marker >= last and params == db.parameters:
            self._remember(name, db)
            return
        advanced = dataclasses.replace(db, parameters=params)
        # db was read in this batch (this step or an earlier one), so it is there: no second read
        self.catalog.alter_database(name, advanced, exists=True)
        self._remember(name, advanced)

    def _replica_marks(self) -> dict[str, str]:
        """Parameters every replicated database carries until ``streamer failover`` removes them."""
        marks = {REPL_SOURCE_PARAM: self.source_id, REPL_TARGET_PARAM: self.source_id}
        if self.mark_readonly:
            marks[READONLY_PARAM] = "true"
        return marks

    def _record_off_catalog(self, db: str, event_id: int) -> None:
        if self.state is None:
            raise ApplyError(f"no state dir to record progress of {db!r}", event_id=event_id, obj=db)
        self.state.record_applied(db, event_id)

    def _check_owned(self, name: str) -> DatabaseSnapshot | None:
        """The target database (None if absent); refuses one this source does not own."""
        databases = self._databases
        known = databases.get(name) if databases is not None else None
        db = known if known is not None else self.catalog.get_database(name)
        if db is not None and FAILOVER_CUT_PARAM in db.parameters:
            raise ApplyError(
                f"target database {name!r} was failed over at source event "
                f"{db.parameters[FAILOVER_CUT_PARAM]} and is a primary now; refusing to replicate into "
                "it (see docs/failover.md: fail back first)",
                obj=name,
            )
        if db is None or self.allow_existing_db:
            return db
        owner = db.parameters.get(REPL_SOURCE_PARAM)
        if owner != self.source_id:
            who = f"replicated from source {owner!r}" if owner else "not created by replication"
            raise ApplyError(
                f"target database {name!r} exists and is {who}; refusing to change it "
                "(use --allow-existing-db to adopt it, or --db-map to replicate into another name)",
                obj=name,
            )
        return db

    def _apply_event(self, event: Event) -> None:
        handler = _HANDLERS.get(event.event_type)
        if handler is not None:
            handler(self, event)
        elif event.event_type not in _NO_OPS:
            raise ApplyError(
                f"event type {event.event_type} is not supported by this target", obj=_obj(event)
            )

    # --- databases ------------------------------------------------------------------------
    def _db_snapshot(
        self, snap: DatabaseSnapshot, event_id: int, current: DatabaseSnapshot | None
    ) -> DatabaseSnapshot:
        name = self.target_db(snap.name)
        marker = max(_marker(current) or 0, event_id) if current is not None else event_id
        own = source_params(snap.parameters)  # never another stream's bookkeeping
        return dataclasses.replace(
            snap,
            name=name,
            location=self.paths.database_location(name),
            managed_location=None,
            parameters={**own, **self._replica_marks(), LAST_ID_PARAM: str(marker)},
        )

    def _create_database(self, event: Event) -> None:
        payload = _payload(event, DatabasePayload)
        snap = payload.database or DatabaseSnapshot(name=event.db or "")
        current = self.catalog.get_database(self.target_db(snap.name))
        desired = self._db_snapshot(snap, event.event_id, current)
        if current is None:
            self.catalog.create_database(desired)
        elif current != desired:
            self.catalog.alter_database(desired.name, desired)

    def _alter_database(self, event: Event) -> None:
        payload = _payload(event, AlterDatabasePayload)
        name = self.target_db(payload.after.name)
        current = self.catalog.get_database(name)
        if current is None:
            raise ApplyError("database is missing on the target", obj=name)
        desired = self._db_snapshot(payload.after, event.event_id, current)
        if current != desired:
            self.catalog.alter_database(name, desired)

    def _drop_database(self, event: Event) -> None:
        payload = _payload(event, DatabasePayload)
        name = self.target_db(payload.database.name if payload.database else event.db or "")
        if self.catalog.get_database(name) is not None:
            self.catalog.drop_database(name)
        remove_tree(self.paths.database_location(name), self.paths.roots)

    # --- tables ---------------------------------------------------------------------------
    def _target_table(self, snap: TableSnapshot) -> TableSnapshot:
        """The snapshot with the target's db name, derived location and our source marker."""
        renamed = dataclasses.replace(snap, db=self.target_db(snap.db), name=snap.name.lower())
        location = self.paths.table_target(renamed)
        return dataclasses.replace(
            renamed,
            sd=dataclasses.replace(snap.sd, location=location),
            parameters=target_parameters({**snap.parameters, REPL_SOURCE_PARAM: self.source_id}),
        )

    def _existing_table(self, db: str, name: str) -> TableSnapshot | None:
        table = self.catalog.get_table(db, name)
        if (
            table is not None
            and not self.allow_existing_db
            and table.parameters.get(REPL_SOURCE_PARAM) != (self.source_id)
        ):
            raise ApplyError("target table exists and was not created by replication", obj=f"{db}.{name}")
        return table

    def _known_table(self, db: str, name: str) -> TableSnapshot | None:
        """``_existing_table``, answered without a call when a step of this batch wrote the table."""
        known = self._tables
        table = known.get((db, name)) if known is not None else None
        return table if table is not None else self._existing_table(db, name)

    def _create_table(self, event: Event) -> None:
        payload = _payload(event, CreateTablePayload)
        desired = self._target_table(payload.table)
        current = self._known_table(desired.db, desired.name)  # refuses a foreign table before any copy
        if payload.files and desired.sd.location:
            source_dir = payload.table.sd.location
            self._copy(event, payload.files, desired.sd.location, source_dir, desired.table_type).publish()
        if current is None:
            # a new table has no committed write ids yet, whatever an earlier namesake left behind
            self.acid.update(lambda v: v.reset_table(table_key(desired.db, desired.name)))
            self.catalog.create_table(desired)
        elif current != desired:
            self.catalog.alter_table(desired.db, desired.name, desired)
        self._remember_table(desired)

    def _alter_table(self, event: Event) -> None:
        payload = _payload(event, AlterTablePayload)
        desired = self._target_table(payload.after)
        if payload.is_rename:
            self._rename_table(event, payload, desired)
            return
        current = self._known_table(desired.db, desired.name)
        if current is None:
            raise ApplyError("table is missing on the target", obj=f"{desired.db}.{desired.name}")
        if current != desired:
            self.catalog.alter_table(desired.db, desired.name, desired)
        self._remember_table(desired)
        if payload.is_truncate and _is_managed(desired) and desired.sd.location:
            clear_dir(desired.sd.location, self.paths.roots, recursive_files=True, event_id=event.event_id)

    def _rename_table(self, event: Event, payload: AlterTablePayload, desired: TableSnapshot) -> None:
        old_db, old_name = self.target_db(payload.before.db), payload.before.name.lower()
        self._forget_table(old_db, old_name)  # (apply() forgets all after a rename; this holds within)
        self._forget_table(desired.db, desired.name)
        old = self._existing_table(old_db, old_name)
        new = self._existing_table(desired.db, desired.name)
        if old is None and new is None:
            raise ApplyError("table to rename is missing on the target", obj=f"{old_db}.{old_name}")
        old_key, new_key = table_key(old_db, old_name), table_key(desired.db, desired.name)
        if old is not None:  # readers find the write ids under the new name before the table appears
            self.acid.update(lambda v: v.copy_table(old_key, new_key))
        # Readers must never see the table half-moved: where the filesystem can link, the new
        # location gets a complete copy first, metadata switches over, and the old tree goes last.
        old_dir = self.paths.table_location(old_db, old_name)
        linked = False
        if _is_managed(desired):
            new_dir = self.paths.table_location(desired.db, desired.name)
            linked = link_dir(old_dir, new_dir, self.paths.roots, event_id=event.event_id)
            if not linked:
                move_dir(old_dir, new_dir, self.paths.roots, event_id=event.event_id)
        if old is not None:
            self.catalog.alter_table(old_db, old_name, desired)
        elif new != desired:
            self.catalog.alter_table(desired.db, desired.name, desired)
        if _is_managed(desired) and desired.partition_keys:
            keys = [c.name for c in desired.partition_keys]
            moved = []
            for p in self.catalog.list_partitions(desired.db, desired.name):
                loc = self.paths.partition_location(desired.db, desired.name, keys, p.values)
                if p.sd.location != loc or (p.db, p.table) != (desired.db, desired.name):
                    moved.append(
                        dataclasses.replace(
                            p, db=desired.db, table=desired.name, sd=dataclasses.replace(p.sd, location=loc)
                        )
                    )
            if moved:
                self.catalog.alter_partitions(desired.db, desired.name, moved)
        if linked and old_dir != self.paths.table_location(desired.db, desired.name):
            remove_tree(old_dir, self.paths.roots, event_id=event.event_id)
        if old_key != new_key:
            self.acid.update(lambda v: v.reset_table(old_key))

    def _drop_table(self, event: Event) -> None:
        payload = _payload(event, DropTablePayload)
        snap = payload.table
        db = self.target_db(snap.db if snap else event.db or "")
        name = (snap.name if snap else event.table or "").lower()
        self._forget_table(db, name)
        current = self._existing_table(db, name)
        if current is not None:
            self.catalog.drop_table(db, name)
        known = snap or current
        kind = known.table_type if known is not None else "MANAGED_TABLE"
        if kind not in EXTERNAL_TYPES and kind not in VIEW_TYPES:
            remove_tree(self.paths.table_location(db, name), self.paths.roots, event_id=event.event_id)

    def _table_for(
        self, event: Event, snap: TableSnapshot | None
    ) -> tuple[TableSnapshot, TableSnapshot | None]:
        """(target table, source snapshot if the event carried one); the table must exist on the target."""
        db = self.target_db(snap.db if snap else event.db or "")
        name = (snap.name if snap else event.table or "").lower()
        current = self._existing_table(db, name)
        if current is None:
            raise ApplyError("table is missing on the target", obj=f"{db}.{name}")
        return current, snap

    # --- partitions -----------------------------------------------------------------------
    def _partition_dir(self, table: TableSnapshot, source: TableSnapshot | None, p: PartitionSnapshot) -> str:
        """Target dir of a partition of ``table`` (a target snapshot); ``source`` locates external ones."""
        keys = [c.name for c in table.partition_keys]
        if table.table_type in EXTERNAL_TYPES:
            if p.sd.location:
                return self.paths.external_location(p.sd.location, f"{table.qualified_name}")
            base = table.sd.location or ""
            return self.paths.ensure_inside(base.rstrip("/") + "/" + partition_name(keys, p.values))
        return self.paths.partition_location(table.db, table.name, keys, p.values)

    def _target_partition(
        self, table: TableSnapshot, source: TableSnapshot | None, p: PartitionSnapshot
    ) -> PartitionSnapshot:
        return dataclasses.replace(
            p,
            db=table.db,
            table=table.name,
            sd=dataclasses.replace(p.sd, location=self._partition_dir(table, source, p)),
        )

    def _add_partitions(self, events: list[Event]) -> None:
        first = _payload(events[0], AddPartitionPayload)
        table, source = self._table_for(events[0], first.table)
        keys = [c.name for c in table.partition_keys]
        wanted: dict[tuple[str, ...], PartitionSnapshot] = {}
        staged: list[Staged] = []
        try:
            for event in events:
                payload = _payload(event, AddPartitionPayload)
                by_name = {partition_name(keys, p.values): p for p in payload.partitions}
                for p in payload.partitions:
                    wanted[tuple(p.values)] = self._target_partition(table, source, p)
                groups: dict[str, list[FileRef]] = {}
                for ref in payload.files:
                    name = _partition_of(ref, by_name, keys)
                    groups.setdefault(name, []).append(ref)
                for name, refs in groups.items():
                    p = by_name[name]
                    target = wanted[tuple(p.values)]
                    staged.append(
                        self._copy(event, refs, target.sd.location or "", p.sd.location, table.table_type)
                    )
        except BaseException:
            for s in staged:
                s.discard()
            raise
        for s in staged:
            s.publish()  # partition directories are invisible until the metastore lists them
        try:  # the common case, one call; all or nothing, so a failure leaves nothing half-added
            self.catalog.add_partitions(table.db, table.name, list(wanted.values()))
            return
        except ApplyError:  # some exist (a replay after a crash) or a real failure: look, then decide
            pass
        existing = {
            v: got for v in wanted if (got := self.catalog.get_partition(table.db, table.name, list(v)))
        }
        new = [p for v, p in wanted.items() if v not in existing]
        changed = [p for v, p in wanted.items() if v in existing and existing[v] != p]
        if new:
            self.catalog.add_partitions(table.db, table.name, new)
        if changed:
            self.catalog.alter_partitions(table.db, table.name, changed)

    def _add_partition(self, event: Event) -> None:
        self._add_partitions([event])

    def _alter_partition(self, event: Event) -> None:
        payload = _payload(event, AlterPartitionPayload)
        table, source = self._table_for(event, payload.table)
        if payload.before.values != payload.after.values:
            self._rename_partition(event, table, source, payload)
            return
        self._alter_partition_list(event, table, source, [payload.after], payload.is_truncate)

    def _alter_partitions(self, event: Event) -> None:
        payload = _payload(event, AlterPartitionsPayload)
        table, source = self._table_for(event, payload.table)
        self._alter_partition_list(event, table, source, payload.partitions, payload.is_truncate)

    def _alter_partition_list(
        self,
        event: Event,
        table: TableSnapshot,
        source: TableSnapshot | None,
        partitions: list[PartitionSnapshot],
        truncate: bool,
    ) -> None:
        desired = [self._target_partition(table, source, p) for p in partitions]
        missing = [
            p.values for p in desired if self.catalog.get_partition(table.db, table.name, p.values) is None
        ]
        if missing:
            raise ApplyError(f"partitions {missing} are missing on the target", obj=table.qualified_name)
        changed = [p for p in desired if self.catalog.get_partition(table.db, table.name, p.values) != p]
        if changed:
            self.catalog.alter_partitions(table.db, table.name, changed)
        if truncate and _is_managed(table):
            for p in desired:
                clear_dir(
                    p.sd.location or "", self.paths.roots, recursive_files=True, event_id=event.event_id
                )

    def _rename_partition(
        self, event: Event, table: TableSnapshot, source: TableSnapshot | None, payload: AlterPartitionPayload
    ) -> None:
        """Hive's partition rename: move the directory, add the new partition, then drop the old one."""
        old = self._target_partition(table, source, payload.before)
        new = self._target_partition(table, source, payload.after)
        if _is_managed(table):
            move_dir(old.sd.location or "", new.sd.location or "", self.paths.roots, event_id=event.event_id)
        current = self.catalog.get_partition(table.db, table.name, new.values)
        if current is None:
            self.catalog.add_partitions(table.db, table.name, [new])
        elif current != new:
            self.catalog.alter_partitions(table.db, table.name, [new])
        if self.catalog.get_partition(table.db, table.name, old.values) is not None:
            self.catalog.drop_partitions(table.db, table.name, [old.values])

    def _drop_partition(self, event: Event) -> None:
        payload = _payload(event, DropPartitionPayload)
        db = self.target_db(payload.table.db if payload.table else event.db or "")
        name = (payload.table.name if payload.table else event.table or "").lower()
        table = self._existing_table(db, name)
        if table is None:
            return  # the table is gone (replay after a later drop): nothing to drop
        present = [v for v in payload.partition_values if self.catalog.get_partition(db, name, v) is not None]
        if present:
            self.catalog.drop_partitions(db, name, present)
        if _is_managed(table):
            keys = [c.name for c in table.partition_keys]
            for values in payload.partition_values:
                remove_tree(
                    self.paths.partition_location(db, name, keys, values),
                    self.paths.roots,
                    event_id=event.event_id,
                )

    # --- data -----------------------------------------------------------------------------
    def _insert(self, event: Event) -> None:
        payload = _payload(event, InsertPayload)
        table, source = self._table_for(event, payload.table)
        if payload.partition_values:
            part = payload.partition or PartitionSnapshot(values=payload.partition_values)
            target_dir = self._partition_dir(table, source, part)
            source_dir = part.sd.location
        else:
            target_dir = table.sd.location or ""
            source_dir = source.sd.location if source else None
        staged = self._copy(event, payload.files, target_dir, source_dir, table.table_type)
        roots = self.paths.roots
        if publish_swapped(staged, target_dir, replace=payload.replace, roots=roots, event_id=event.event_id):
            return  # one atomic switch of the directory (streamer.target.apply.swap)
        staged.publish()
        removed: list[str] = []
        if payload.replace:
            keep = {_top_level(f.final, target_dir) for f in staged.files}
            removed = clear_dir(target_dir, roots, keep=keep, event_id=event.event_id)
        published = sum(1 for f in staged.files if not f.skipped)
        if published > 1 or (published and removed):
            _count_nonatomic(table.db, target_dir)

    def _open_txn(self, event: Event) -> None:
        payload = _payload(event, OpenTxnPayload)
        self.acid.update(lambda v: v.opened(self.source_id, payload.txn_ids))

    def _acid_write(self, event: Event) -> None:
        """Hive 3 logs ACID_WRITE before the commit: only its size is kept, for the aborted-bytes metric."""
        payload = _payload(event, AcidWritePayload)
        size = sum(f.size or 0 for f in payload.write.files)
        self.acid.update(lambda v: v.noted_bytes(self.source_id, payload.txn_id, size))

    def _commit_txn(self, event: Event) -> None:
        payload = _payload(event, CommitTxnPayload)
        txn = self.acid.current().txn(self.source_id, payload.txn_id)
        if txn is not None and txn.state is TxnState.COMMITTED:
            return  # a replay after the visibility flip: everything is in place
        if txn is not None and txn.state is TxnState.ABORTED:
            raise ApplyError(
                f"transaction {payload.txn_id} was aborted; it cannot commit", obj=f"txn {payload.txn_id}"
            )
        if txn is None and not payload.writes:
            return  # opened before this target's history and wrote nothing we replicate
        staged: list[Staged] = []
        visible: dict[str, set[int]] = {}
        try:
            for write in payload.writes:
                snap = write.table_snapshot
                db = self.target_db(snap.db if snap else write.db)
                name = (snap.name if snap else write.table).lower()
                table = self._existing_table(db, name)
                if table is None:
                    raise ApplyError(
                        f"table of a write (write id {write.write_id}) of transaction {payload.txn_id} "
                        "is missing on the target (out of the replication policy?)",
                        obj=f"{db}.{name}",
                    )
                if write.partition:
                    part = write.partition_snapshot or PartitionSnapshot(values=_values(write.partition))
                    target_dir = self._partition_dir(table, snap, part)
                    source_dir = part.sd.location
                else:  # derived, not the catalog's location, which a metastore may have qualified
                    target_dir = self.paths.table_location(db, name) if _is_managed(table) else ""
                    target_dir = target_dir or table.sd.location or ""
                    source_dir = snap.sd.location if snap else None
                staged.append(self._copy(event, write.files, target_dir, source_dir, table.table_type))
                visible.setdefault(table_key(db, name), set()).add(write.write_id)
        except BaseException:
            for s in staged:
                s.discard()
            raise
        report = CopyReport()
        for s in staged:
            report += s.publish()
        # the one step that makes the whole transaction visible, across all its tables
        self.acid.update(lambda v: v.committed(self.source_id, payload.txn_id, visible))
        metrics.TARGET_TXNS_COMMITTED.inc()
        log.debug("txn %s committed: %s write(s), %s", payload.txn_id, len(payload.writes), report)

    def _abort_txn(self, event: Event) -> None:
        payload = _payload(event, AbortTxnPayload)
        txn = self.acid.current().txn(self.source_id, payload.txn_id)
        if txn is None or txn.state is not TxnState.OPEN:
            return  # unknown (opened before this target's history) or a replay: nothing to drop
        self.acid.update(lambda v: v.aborted(self.source_id, payload.txn_id))
        metrics.TARGET_TXNS_ABORTED.inc()
        metrics.TARGET_ABORTED_BYTES_SKIPPED.inc(txn.pending_bytes)

    def _copy(
        self, event: Event, refs: Iterable[FileRef], target_dir: str, source_dir: str | None, table_type: str
    ) -> Staged:
        """Stage files of one object: managed ones keep their path relative to the source object."""
        external = table_type in EXTERNAL_TYPES

        def dest(ref: FileRef) -> str:
            if external:
                return self.paths.external_location(posixpath.dirname(_path(ref.uri)), ref.uri)
            rel = _relative_dir(ref, source_dir)
            if rel:
                self.paths.relative_file(rel, ref.uri)
                return self.paths.ensure_inside(target_dir.rstrip("/") + "/" + rel, ref.uri)
            return self.paths.ensure_inside(target_dir, ref.uri)

        return self.copier.stage_all(list(refs), dest, event_id=event.event_id)

    # --- functions, constraints, statistics, reload ---------------------------------------
    def _create_function(self, event: Event) -> None:
        payload = _payload(event, CreateFunctionPayload)
        fn = dataclasses.replace(
            payload.function, db=self.target_db(payload.function.db), name=payload.function.name.lower()
        )
        fn = functions.copy_resources(fn, self.paths, self.copier, event.event_id)
        current = self.catalog.get_function(fn.db, fn.name)
        if current == fn:
            return
        if current is not None:
            self.catalog.drop_function(fn.db, fn.name)
        self.catalog.create_function(fn)

    def _drop_function(self, event: Event) -> None:
        payload = _payload(event, DropFunctionPayload)
        db, name = self.target_db(event.db or ""), payload.function_name.lower()
        if self.catalog.get_function(db, name) is not None:
            self.catalog.drop_function(db, name)
        functions.remove_resources(self.paths, db, name, event.event_id)

    def _add_constraints(self, event: Event) -> None:
        payload = _payload(event, AddConstraintsPayload)
        constraints = [
            dataclasses.replace(
                c,
                db=self.target_db(c.db),
                table=c.table.lower(),
                ref_db=self.target_db(c.ref_db) if c.ref_db else None,
            )
            for c in payload.constraints
        ]
        for key in dict.fromkeys((c.db, c.table, c.name) for c in constraints):
            self.catalog.drop_constraint(*key)  # a replay replaces instead of failing on "exists"
        if constraints:
            self.catalog.add_constraints(constraints)

    def _drop_constraint(self, event: Event) -> None:
        payload = _payload(event, DropConstraintPayload)
        self.catalog.drop_constraint(
            self.target_db(payload.db), payload.table.lower(), payload.constraint_name
        )

    def _update_stats(self, event: Event) -> None:
        payload = _payload(event, UpdateColumnStatsPayload)
        self.catalog.update_column_statistics(
            self.target_db(payload.db),
            payload.table.lower(),
            payload.partition_values or None,
            payload.statistics,
        )

    def _delete_stats(self, event: Event) -> None:
        payload = _payload(event, DeleteColumnStatsPayload)
        self.catalog.delete_column_statistics(
            self.target_db(payload.db),
            payload.table.lower(),
            payload.partition_values or None,
            payload.column,
        )

    def _reload(self, event: Event) -> None:
        payload = _payload(event, ReloadPayload)
        if payload.table is None:
            return
        desired = self._target_table(payload.table)
        current = self._existing_table(desired.db, desired.name)
        if current is None:
            raise ApplyError("table is missing on the target", obj=desired.qualified_name)
        if current != desired:
            self.catalog.alter_table(desired.db, desired.name, desired)
        if payload.partitions:
            self._alter_partition_list(event, desired, payload.table, payload.partitions, truncate=False)

    def _unknown(self, event: Event) -> None:
        """An event the source agent could not decode: its database halts here, by design."""
        payload = _payload(event, UnknownPayload)
        fmt = payload.message_format or "no format"
        raise ApplyError(
            f"unknown source event type {payload.hive_event_type!r} ({fmt}, {len(payload.message)} bytes): "
            "this streamer cannot apply it; apply its change on the target by hand and `streamer target "
            "skip` it, or `streamer target retry` with a streamer that knows the type",
            event_type=payload.hive_event_type,
            obj=_obj(event),
        )


_HANDLERS: dict[EventType, Callable[[Applier, Event], None]] = {
    EventType.CREATE_DATABASE: Applier._create_database,
    EventType.ALTER_DATABASE: Applier._alter_database,
    EventType.DROP_DATABASE: Applier._drop_database,
    EventType.CREATE_TABLE: Applier._create_table,
    EventType.ALTER_TABLE: Applier._alter_table,
    EventType.DROP_TABLE: Applier._drop_table,
    EventType.ADD_PARTITION: Applier._add_partition,
    EventType.ALTER_PARTITION: Applier._alter_partition,
    EventType.ALTER_PARTITIONS: Applier._alter_partitions,
    EventType.DROP_PARTITION: Applier._drop_partition,
    EventType.INSERT: Applier._insert,
    EventType.OPEN_TXN: Applier._open_txn,
    EventType.ACID_WRITE: Applier._acid_write,
    EventType.COMMIT_TXN: Applier._commit_txn,
    EventType.ABORT_TXN: Applier._abort_txn,
    EventType.CREATE_FUNCTION: Applier._create_function,
    EventType.DROP_FUNCTION: Applier._drop_function,
    EventType.ADD_PRIMARYKEY: Applier._add_constraints,
    EventType.ADD_FOREIGNKEY: Applier._add_constraints,
    EventType.ADD_UNIQUECONSTRAINT: Applier._add_constraints,
    EventType.ADD_NOTNULLCONSTRAINT: Applier._add_constraints,
    EventType.ADD_DEFAULTCONSTRAINT: Applier._add_constraints,
    EventType.ADD_CHECKCONSTRAINT: Applier._add_constraints,
    EventType.DROP_CONSTRAINT: Applier._drop_constraint,
    EventType.UPDATE_TABLE_COLUMN_STAT: Applier._update_stats,
    EventType.UPDATE_PARTITION_COLUMN_STAT: Applier._update_stats,
    EventType.DELETE_TABLE_COLUMN_STAT: Applier._delete_stats,
    EventType.DELETE_PARTITION_COLUMN_STAT: Applier._delete_stats,
    EventType.RELOAD: Applier._reload,
    EventType.UNKNOWN: Applier._unknown,
}


# --- running a plan -----------------------------------------------------------------------------


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
    with applier.reusing_snapshots():
        for step in plan.steps:
            run_step(applier, step, state, report, on_halt)
    if plan.source_head is not None:
        metrics.TARGET_SOURCE_HEAD.set(plan.source_head)  # lag: streamer.target.state.status.lag_events
    return report


def run_step(
    applier: Applier,
    step: Step,
    state: TargetState,
    report: RunReport,
    on_halt: Callable[[str], None] | None = None,
) -> None:
    """Apply one step unless its database is halted; a failure halts the database (then
    ``on_halt(db)``). Records the outcome in ``report`` (the lane runner, ``streamer.target.job.lane_runner``,
    passes one per step)."""
    if state.is_halted(step.db):
        report.held.extend(step.event_ids)
        return
    try:
        applier.apply(step)
    except ApplyError as exc:
        halt = state.halt(
            step.db,
            exc.event_id or step.first.event_id,
            exc.cause,
            event_type=exc.event_type or str(step.first.event_type),
            obj=exc.obj,
        )
        log.error("database %s halted at event %s (%s): %s", step.db, halt.event_id, halt.object, halt.cause)
        report.halted[step.db] = halt
        report.held.extend(step.event_ids)
        if on_halt is not None:
            on_halt(step.db)
        return
    report.applied.extend(step.event_ids)
    report.coalesced.extend(step.superseded)


# --- helpers ------------------------------------------------------------------------------------


def _payload(event: Event, kind: type[P]) -> P:
    if not isinstance(event.payload, kind):
        raise ApplyError(
            f"payload is {type(event.payload).__name__}, expected {kind.__name__}", obj=_obj(event)
        )
    return event.payload


def _obj(event: Event) -> str | None:
    if event.db and event.table:
        return f"{event.db}.{event.table}"
    return event.db


def _marker(db: DatabaseSnapshot | None) -> int | None:
    if db is None:
        return None
    try:
        return int(db.parameters[LAST_ID_PARAM])
    except (KeyError, ValueError):
        return None


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
            obj=exc.obj or _obj(event),
        )
    except TypeError:  # a subclass with another constructor
        return ApplyError(
            exc.cause + note,
            event_id=event.event_id,
            event_type=str(event.event_type),
            obj=exc.obj or _obj(event),
        )


def _keeps_known_tables(event: Event) -> bool:
    """Whether the tables remembered in a batch are still exact after ``event``: it is a create or a
    plain alter, whose handler remembers what it wrote (a rename moves a table away from its key)."""
    if event.event_type is EventType.CREATE_TABLE:
        return True
    return (
        event.event_type is EventType.ALTER_TABLE
        and isinstance(event.payload, AlterTablePayload)
        and not event.payload.is_rename
    )


def _is_managed(table: TableSnapshot) -> bool:
    return table.table_type not in EXTERNAL_TYPES and table.table_type not in VIEW_TYPES


_warned_nonatomic: set[str] = set()


def _count_nonatomic(db: str, target_dir: str) -> None:
    """An INSERT became visible file by file: counted, and said once per filesystem kind (local
    filesystems without directory exchange say so in ``streamer.target.apply.swap``)."""
    metrics.TARGET_NONATOMIC_PUBLISHES.labels(db=db).inc()
    scheme = urlsplit(target_dir).scheme.lower() or "file"
    if scheme != "file" and scheme not in _warned_nonatomic:
        _warned_nonatomic.add(scheme)
        how = "" if atomic_rename(target_dir) else "; a rename there is a server-side copy and a delete"
        log.warning(
            "publishing on %s is not atomic (no directory exchange%s): an INSERT's files appear one by "
            "one (each whole, hidden while staged) and an INSERT OVERWRITE briefly shows old and new "
            "files together; streamer_target_nonatomic_publishes_total counts such publishes",
            scheme,
            how,
        )


def _path(uri: str) -> str:
    return urlsplit(uri).path


def _relative_dir(ref: FileRef, source_dir: str | None) -> str:
    """Directory of the file relative to its object's source location (``delta_5_5``), or ``subdir``."""
    if source_dir:
        base = _path(source_dir).rstrip("/") + "/"
        path = _path(ref.uri)
        if path.startswith(base):
            return posixpath.dirname(path[len(base) :])
    return ref.subdir or ""


def _top_level(final: str, target_dir: str) -> str:
    """The first path segment of ``final`` below ``target_dir``, whatever their URL spellings.

    A metastore hands back ``file:/x`` for ``file:///x``: comparing URL text would miss the prefix
    and an overwrite would then delete the files it had just published.
    """
    base = urlsplit(target_dir).path.rstrip("/") + "/"
    path = urlsplit(final).path
    if not path.startswith(base):
        raise ApplyError(f"file {final} is not below {target_dir}", obj=final)
    return path[len(base) :].split("/", 1)[0]


def _values(name: str) -> list[str]:
    return [unquote(kv.split("=", 1)[1]) if "=" in kv else kv for kv in name.split("/")]


def _partition_of(ref: FileRef, by_name: dict[str, PartitionSnapshot], keys: list[str]) -> str:
    """The partition name (as computed here) a file of an ADD_PARTITION event belongs to."""
    if ref.partition is None:
        if len(by_name) == 1:
            return next(iter(by_name))
        raise ApplyError("file names no partition in a multi-partition event", obj=ref.uri)
    if ref.partition in by_name:
        return ref.partition
    normalised = partition_name(keys, _values(ref.partition)) if keys else ref.partition
    if normalised in by_name:
        return normalised
    raise ApplyError(f"file belongs to partition {ref.partition!r}, not one the event adds", obj=ref.uri)
