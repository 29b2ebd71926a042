"""Incremental directory sync of the tables whose files change without events: external tables, and
tables replicated by state (``streamer.target.apply.by_state``: Spark datasource tables, Hive tables
Spark writes with its conversion on), every ``--external-sync-seconds``.

As Hive's replication does, every cycle lists each such table's source directories
and copies new or changed files, deletes vanished visible ones, and
leaves hidden files alone; a missing source directory is skipped, never mirrored as empty
(``streamer.target.apply.dir_sync``). No point-in-time guarantee. Details: docs/design/consistency.md.
A failed directory is logged and tried again next cycle; a table replicated by state is also synced
by the applier when an ALTER of its file statistics arrives, where a failure halts its database.

Which source directory a target directory mirrors follows the external layout
(``TargetPaths.external_location``): ``authority`` directories (``<base>/<scheme>/<authority>/<path>``)
name their source filesystem themselves; ``path`` ones (``<base>/<path>``, replicas made before the
namespacing) are read through ``source_prefix`` (``--external-source-prefix``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from streamer.errors import PathEscapeError, StreamerError
from streamer.events.model import TableSnapshot
from streamer.metastore.catalog import REPL_SOURCE_PARAM, Catalog
from streamer.target import db_map as names
from streamer.target.apply import door
from streamer.target.apply.by_state import REGISTRY, source_location, state_sync_reason
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.dir_sync import ChecksumCache, DirPlan, plan_dir
from streamer.target.apply.files import FileCopier
from streamer.target.apply.layout import check_external_layout
from streamer.target.apply.paths import EXTERNAL_TYPES, TargetPaths, partition_name
from streamer.target.apply.sources import SourceRules

if TYPE_CHECKING:
    from streamer.target.job.settings import TargetSettings

log = logging.getLogger(__name__)

__all__ = ["DirPlan", "ExternalSync", "SyncThread", "plan_dir", "source_dir", "start_background"]


def source_dir(paths: TargetPaths, target_dir: str, source_prefix: str) -> str:
    """The source directory an external target directory mirrors; refuses what escapes the base dir."""
    if paths.external is None:
        raise StreamerError("external sync needs --external-base-dir")
    base = paths.external
    if not base.contains(target_dir):
        raise PathEscapeError(
            f"{target_dir} is not under the external base dir {base.join()}", obj=target_dir
        )
    if paths.external_layout == "authority":
        source = paths.external_source(target_dir)
    else:
        path = _path_of(target_dir)[len(base.path.rstrip("/")) :] or "/"
        prefix = source_prefix if source_prefix.endswith("://") else source_prefix.rstrip("/")
        source = prefix + path
    mapped = paths.external_location(source, target_dir)  # PathEscapeError for '..', bad schemes
    if _path_of(mapped).rstrip("/") != _path_of(target_dir).rstrip("/"):
        raise PathEscapeError(f"{source} maps to {mapped}, not back to {target_dir}", obj=target_dir)
    return source


@dataclass
class SyncReport:
    dirs: int = 0
    copied: int = 0
    deleted: int = 0
    bytes_copied: int = 0
    missing_sources: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # target dir -> cause


class ExternalSync:
    """Mirrors the data directories of one source's external tables onto this target."""

    def __init__(
        self,
        catalog: Catalog,
        paths: TargetPaths,
        source_id: str,
        *,
        copier: FileCopier | None = None,
        source_prefix: str = "file://",
        clock: Callable[[], float] = time.monotonic,
        db_map: Mapping[str, str] | None = None,
        allow_existing_db: bool = False,
    ) -> None:
        self.catalog = catalog
        self.paths = paths
        self.source_id = source_id
        # reads pass the read rules (a sync's directory: SourceRules.check_sync_dir), writes the guard
        self.copier = copier or FileCopier(roots=paths.roots, sources=SourceRules())
        self.db_map = names.normalized(db_map)
        # every write passes the door's place check too: a database this source owns, or an external
        # directory no other source holds (streamer.target.apply.door)
        self.side = ApplyContext(catalog, self.copier, paths, source_id, db_map=db_map,
                                 allow_existing_db=allow_existing_db)
        self.source_prefix = source_prefix
        self.clock = clock
        self._cache = ChecksumCache()
        self._last: float | None = None

    def run_if_due(self, every_seconds: float) -> SyncReport | None:
        """Sync when ``every_seconds`` passed since the last sync (or never ran); else ``None``."""
        now = self.clock()
        if every_seconds <= 0 or (self._last is not None and now - self._last < every_seconds):
            return None
        self._last = now
        return self.sync_once()

    def directories(self) -> list[str]:
        """Target data directories of every external table (and partition) replicated from our source."""
        return [target for target, src in self.pairs() if src is None]

    def pairs(self) -> list[tuple[str, str | None]]:
        """(target dir, source dir) of every directory synced: external tables' (source ``None``:
        mapped by ``source_dir``) and tables replicated by state (``by_state``: their recorded one)."""
        return [(target, src) for target, src, _ in self._dirs()]

    def _dirs(self) -> list[tuple[str, str | None, str]]:
        """``pairs``, each with the source database its object replicates (what its read may not cross)."""
        out: dict[str, tuple[str | None, str]] = {}
        for db in self.catalog.list_databases():
            snap = self.catalog.get_database(db)
            if snap is None or snap.parameters.get(REPL_SOURCE_PARAM) != self.source_id:
                continue
            source_db = names.source_name(self.db_map, db) or db
            for name in self.catalog.list_tables(db):
                table = self.catalog.get_table(db, name)
                if table is None or table.parameters.get(REPL_SOURCE_PARAM) != self.source_id:
                    continue
                if table.table_type in EXTERNAL_TYPES:
                    out.update((d, (None, source_db)) for d in self._external_dirs(table))
                elif source_location(table):
                    REGISTRY.note(db, name, state_sync_reason(table) or "a table replicated by state")
                    out.update((d, (src, source_db)) for d, src in self._state_dirs(table))
        return [(target, src, source_db) for target, (src, source_db) in out.items()]

    def _external_dirs(self, table: TableSnapshot) -> list[str]:
        if table.partition_keys:
            parts = self.catalog.list_partitions(table.db, table.name)
            return [p.sd.location for p in parts if p.sd.location]
        return [table.sd.location] if table.sd.location else []

    def _state_dirs(self, table: TableSnapshot) -> list[tuple[str, str]]:
        base = source_location(table) or ""
        if not table.partition_keys:
            return [(table.sd.location, base)] if table.sd.location else []
        keys = [c.name for c in table.partition_keys]
        return [
            (p.sd.location, source_location(p) or base.rstrip("/") + "/" + partition_name(keys, p.values))
            for p in self.catalog.list_partitions(table.db, table.name)
            if p.sd.location
        ]

    def sync_once(self) -> SyncReport:
        report = SyncReport()
        for target_dir, src, source_db in self._dirs():
            report.dirs += 1
            try:
                self._sync_dir(target_dir, src, source_db, report)
            except (StreamerError, OSError) as exc:
                report.failures[target_dir] = f"{type(exc).__name__}: {exc}"
                log.warning("directory sync of %s failed (retried next cycle): %s", target_dir, exc)
        log.info(
            "directory sync: %d dirs, %d files copied (%d bytes), %d deleted, %d failed",
            report.dirs,
            report.copied,
            report.bytes_copied,
            report.deleted,
            len(report.failures),
        )
        return report

    def _sync_dir(self, target_dir: str, src: str | None, source_db: str, report: SyncReport) -> None:
        src = src or source_dir(self.paths, target_dir, self.source_prefix)
        done = door.sync_dir(self.side, src, target_dir, self._cache, event_id=None, database=source_db)
        if done is None:
            report.missing_sources.append(src)
            log.warning("directory sync: source directory %s is missing; %s left as it is", src, target_dir)
            return
        report.copied += done.copied
        report.bytes_copied += done.bytes_copied
        report.deleted += done.deleted


def _path_of(url: str) -> str:
    return urlsplit(url).path


class SyncThread:
    """Runs the sync every ``every_seconds`` in a daemon thread, holding ``lock`` while it works so
    that it never interleaves with an applied batch (a DROP_TABLE, say)."""

    def __init__(
        self,
        sync: ExternalSync,
        every_seconds: float,
        lock: AbstractContextManager[Any],
        close: Callable[[], None],
    ) -> None:
        self.sync = sync
        self.every_seconds = every_seconds
        self.lock = lock
        self._close = close
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="external-sync", daemon=True)

    def start(self) -> SyncThread:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with self.lock:
                    self.sync.run_if_due(self.every_seconds)
            except Exception:  # a catalog outage: log and try again next cycle, never kill the job
                log.exception("external sync cycle failed")
            self._stop.wait(min(1.0, self.every_seconds))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self._close()


def start_background(settings: TargetSettings, lock: AbstractContextManager[Any]) -> SyncThread | None:
    """The target job's hook: a running sync thread, or ``None`` when ``external_sync_seconds`` is 0."""
    if settings.external_sync.seconds <= 0:
        return None
    from streamer.metastore.thrift import HmsCatalog

    layout = settings.layout
    paths = TargetPaths(layout.warehouse_root, layout.external_base_dir, layout.external_layout)
    check_external_layout(paths)
    # its own connection: the batch thread has the other
    catalog = HmsCatalog(settings.metastore.uri, auth=settings.metastore.auth)
    # reads pass the source rules, writes the guard, as the applier's do (docs/security.md)
    copier = FileCopier(max_workers=settings.scale.copy_workers, roots=paths.roots,
                        sources=settings.trust.source_rules())
    sync = ExternalSync(
        catalog, paths, settings.source_id, copier=copier, source_prefix=settings.external_sync.source_prefix,
        db_map=settings.layout.db_map, allow_existing_db=settings.trust.allow_existing_db,
    )
    return SyncThread(sync, settings.external_sync.seconds, lock, catalog.close).start()
