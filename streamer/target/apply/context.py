"""The apply context: what every event handler works with, and the checks every change goes through.

One object per applier (a lane gets a copy with its own catalog), so handlers are plain functions of
``(context, event)``. Design: docs/design/apply.md.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar
from urllib.parse import urlsplit

from streamer.errors import ApplyError
from streamer.events.model import (
    AddConstraintsPayload,
    AlterTablePayload,
    BootstrapObjectPayload,
    CommitTxnPayload,
    DatabaseSnapshot,
    Event,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    TableSnapshot,
)
from streamer.metastore.catalog import (
    FAILOVER_CUT_PARAM,
    READONLY_PARAM,
    REPL_SOURCE_PARAM,
    REPL_TARGET_PARAM,
    Catalog,
)
from streamer.target import db_map as names
from streamer.target.apply import door
from streamer.target.apply.dir_fsync import DirFsyncs
from streamer.target.apply.effects import CatalogEffect
from streamer.target.apply.external_owners import ExternalOwners, Owner, check_location
from streamer.target.apply.files import FileCopier, Staged
from streamer.target.apply.owed_markers import DeferredMarkers
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.sources import SourceRules
from streamer.target.state.state_file import TargetState
from streamer.target.state.visibility import Txn, VisibilityStore

P = TypeVar("P")


class BatchMemory:
    """What the steps of one batch read or wrote, so that the next steps need not read it again.

    Databases: target db -> its snapshot as the applier last read or wrote it. Nothing else writes
    a replicated database while a batch runs (the job's lock; a failover needs the job stopped), so
    re-reading it per step would only repeat what the last step wrote. Tables: (target db, table) ->
    the table as a create or alter step of this batch left it, or as a data or partition step read
    it (``table_for``), for the next step of it (a canary bumped every 100 ms is one get_table less
    per event; a backlog of INSERTs reads its table once). Any other kind of step forgets the tables:
    only these handlers leave the table object exactly as known. Both are None outside a batch.
    """

    def __init__(self) -> None:
        self._databases: dict[str, DatabaseSnapshot] | None = None
        self._tables: dict[tuple[str, str], TableSnapshot | None] | None = None  # None: known absent
        self._owned: set[str] | None = None  # databases the door found this source's in this batch

    @contextmanager
    def remembering(self) -> Iterator[None]:
        """Within: remembered between steps (``Applier.reusing_snapshots``); outside, nothing is."""
        self._databases, self._tables, self._owned = {}, {}, set()
        try:
            yield
        finally:
            self._databases, self._tables, self._owned = None, None, None

    # (each reads its map once: a concurrent batch ending may set it to None meanwhile)
    def forget(self, name: str | None = None) -> None:
        known, owned = self._databases, self._owned
        if known is not None:
            if name is None:
                known.clear()
            else:
                known.pop(name, None)
        if owned is not None:
            if name is None:
                owned.clear()
            else:
                owned.discard(name)

    def owned(self, name: str) -> bool:
        """Whether the door found ``name`` this source's earlier in this batch (no change to it since)."""
        owned = self._owned
        return owned is not None and name in owned

    def note_owned(self, name: str) -> None:
        owned = self._owned
        if owned is not None:
            owned.add(name)

    def remember(self, name: str, db: DatabaseSnapshot) -> None:
        known = self._databases
        if known is not None:
            known[name] = db

    def forget_tables(self) -> None:
        known = self._tables
        if known is not None:
            known.clear()

    def remember_table(self, table: TableSnapshot) -> None:
        known = self._tables
        if known is not None:
            known[(table.db, table.name)] = table

    def remember_absent(self, db: str, name: str) -> None:
        """Known not to exist (a batch's prefetch, ``prefetch_tables``) until a step forgets it."""
        known = self._tables
        if known is not None:
            known[(db, name)] = None

    def knows_table(self, db: str, name: str) -> bool:
        """Whether the batch knows the table: as a step left it, or that it does not exist."""
        known = self._tables
        return known is not None and (db, name) in known

    def forget_table(self, db: str, name: str) -> None:
        known = self._tables
        if known is not None:
            known.pop((db, name), None)

    def database(self, name: str) -> DatabaseSnapshot | None:
        known = self._databases
        return known.get(name) if known is not None else None

    def table(self, db: str, name: str) -> TableSnapshot | None:
        known = self._tables
        return known.get((db, name)) if known is not None else None


class ApplyContext:
    """The target's services for one source, its names mapped, and what the current batch remembers."""

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
    ) -> None:
        self.catalog = catalog
        self.mark_readonly = mark_readonly
        self.copier = copier
        self.paths = paths
        self.source_id = source_id
        self.db_map = names.normalized(db_map)
        self.allow_existing_db = allow_existing_db
        self.state = state
        self.clock = clock
        self.acid = acid if acid is not None else VisibilityStore(paths.warehouse.join(), source_id)
        if self.acid.source_id != source_id:  # each source writes its own file, never another's
            raise ValueError(
                f"visibility store of source {self.acid.source_id!r} given to source {source_id!r}"
            )
        self.memory = BatchMemory()
        # progress (markers.advance): source db -> last applied id; a voiding run's cap on it (runner);
        # the markers a batch owes (a lane's copy shares all three)
        self.progress: dict[str, int] = {}
        self.pins: dict[str, int] = {}
        self.markers = DeferredMarkers()
        # where the current step's directory fsyncs go when its batch's end records it (executor.run)
        self.dir_fsyncs: DirFsyncs | None = None
        if not copier.roots:
            copier.roots = paths.roots
        # what may be read (streamer.target.apply.sources): every copy of every handler checks it
        self.sources = sources or copier.sources or SourceRules()
        copier.sources = self.sources
        # who owns each external directory (streamer.target.apply.external_owners)
        self.owners = ExternalOwners(paths, source_id)

    def settle_dir_fsyncs(self) -> None:
        """Wait for every queued directory fsync (``dir_fsync``: they go by path) before a directory moves."""
        self.markers.dir_fsyncs.wait()

    def target_db(self, source_db: str) -> str:
        return names.target_name(self.db_map, source_db)

    def source_db(self, target_db: str) -> str | None:
        """The source database ``target_db`` replicates under ``db_map``; None for a database that only
        bears a source database's name which ``--db-map`` sends elsewhere (``db_map.source_name``)."""
        return names.source_name(self.db_map, target_db)

    def check_mapping(self, source_db: str) -> str:
        """The target database of ``source_db``; refuses one another source database is mapped to."""
        return names.check_mapping(self.db_map, source_db)

    def replica_marks(self) -> dict[str, str]:
        """Parameters every replicated database carries until ``streamer failover`` removes them."""
        marks = {REPL_SOURCE_PARAM: self.source_id, REPL_TARGET_PARAM: self.source_id}
        if self.mark_readonly:
            marks[READONLY_PARAM] = "true"
        return marks

    # --- the door ----------------------------------------------------------------------------
    def do(self, effect: CatalogEffect) -> None:
        """Check and do one catalog change (``streamer.target.apply.door``): the only way a handler
        changes the catalog."""
        door.execute(self, effect)

    def owned_checked(self, name: str) -> bool:
        return self.memory.owned(name)

    def note_owned(self, name: str, changed: bool) -> None:
        """After an effect on ``name``: a database effect leaves it to be checked again."""
        if changed:
            self.memory.forget(name)
        else:
            self.memory.note_owned(name)

    # --- ownership ---------------------------------------------------------------------------
    def check_owned(self, name: str) -> DatabaseSnapshot | None:
        """The target database (None if absent); refuses one this source does not own."""
        known = self.memory.database(name)
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

    def existing_table(self, db: str, name: str) -> TableSnapshot | None:
        table = self.catalog.get_table(db, name)
        if (
            table is not None
            and not self.allow_existing_db
            and table.parameters.get(REPL_SOURCE_PARAM) != (self.source_id)
        ):
            raise ApplyError("target table exists and was not created by replication", obj=f"{db}.{name}")
        return table

    def known_table(self, db: str, name: str) -> TableSnapshot | None:
        """``existing_table``, answered without a call when a step of this batch wrote or read the
        table, or the batch's prefetch found it (or found it absent: ``runner.prefetch``)."""
        if self.memory.knows_table(db, name):
            return self.memory.table(db, name)
        return self.existing_table(db, name)

    # --- the view handlers read (``view.View``) ------------------------------------------------
    def database(self, name: str) -> DatabaseSnapshot | None:
        return self.catalog.get_database(name)

    def partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None:
        return self.catalog.get_partition(db, table, values)

    def txn(self, txn_id: int) -> Txn | None:
        return self.acid.current().txn(self.source_id, txn_id)

    def function(self, db: str, name: str) -> FunctionSnapshot | None:
        return self.catalog.get_function(db, name)

    def partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        return self.catalog.list_partitions(db, table)

    # --- target objects ----------------------------------------------------------------------
    def claim_external(self, source_location: str, target_dir: str, table: str) -> None:
        """Place ``table`` (target ``db.table``) in external directory ``target_dir`` only when no
        other source owns it, one holding it or one inside it, and its source location is one the
        operator allows (``external_owners``)."""
        check_location(source_location, self.sources.prefix_roots, table)
        self.owners.claim(target_dir, table, self.owner_exists)

    def owner_exists(self, owner: Owner) -> bool:
        """Whether ``owner``'s claim is live: its table exists here, replicated from its source."""
        db, _, name = owner.table.partition(".")
        table = self.catalog.get_table(db, name)
        return table is not None and table.parameters.get(REPL_SOURCE_PARAM) == owner.source_id

    def stage_files(
        self, event_id: int, refs: Iterable[FileRef], target_dir: str, source_dir: str | None,
        read_location: str | None = None,
    ) -> Staged:
        """Stage files of one object into its target directory ``target_dir``, each at its path
        relative to the object's source location ``source_dir`` (``delta_5_5/bucket_0``), else by
        ``subdir`` and name: never where its URI's path says. Read as ``ctx.sources`` allow, against
        ``read_location`` (default ``source_dir``: where the event says the object lives)."""

        def dest(ref: FileRef) -> str:
            rel = _relative_dir(ref, source_dir)
            if rel:
                self.paths.relative_file(rel, ref.uri)
                return target_dir.rstrip("/") + "/" + rel
            return target_dir

        location = read_location or source_dir
        return door.stage(self, list(refs), dest, target_dir, event_id=event_id, source_location=location)


# --- helpers shared by the handlers ---------------------------------------------------------------






def touched_databases(event: Event) -> list[str]:
    """Source databases ``event`` changes other than its envelope's (which the applier checks, and
    the bootstrap for a record). (A FULL bootstrap's closing marker moves only databases this source
    owns: ``bootstrap._finish``.)"""
    payload = event.payload
    names: list[str | None] = []
    if isinstance(payload, AlterTablePayload):
        names += [payload.before.db, payload.after.db]
    elif isinstance(payload, AddConstraintsPayload):
        names += [c.db for c in payload.constraints]
    elif isinstance(payload, CommitTxnPayload):
        names += [w.table_snapshot.db if w.table_snapshot else w.db for w in payload.writes]
    elif isinstance(payload, BootstrapObjectPayload):  # its own object's (``check_envelope``: the envelope's)
        names += [payload.database.name if payload.database else None,
                  payload.table.db if payload.table else None,
                  payload.function.db if payload.function else None]
        names += [p.db for p in payload.partitions] + [c.db for c in payload.constraints]
    own = (event.db or "").lower()
    return list(dict.fromkeys(n for n in names if n and n.lower() != own))






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
