"""Incremental directory sync of external tables' data (their files change without events).

As Hive's replication does, every cycle lists each replicated external table's source directories
and copies new or changed files, deletes vanished visible ones, and
leaves hidden files alone; a missing source directory is skipped, never mirrored as empty. No
point-in-time guarantee. Details: docs/design/consistency.md.

Which source directory a target directory mirrors follows the external layout
(``TargetPaths.external_location``): ``authority`` directories (``<base>/<scheme>/<authority>/<path>``)
name their source filesystem themselves; ``path`` ones (``<base>/<path>``, replicas made before the
namespacing) are read through ``source_prefix`` (``--external-source-prefix``).
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from streamer.errors import PathEscapeError, StreamerError
from streamer.events.model import FileRef
from streamer.filesystems import url_to_fs
from streamer.hive.files import is_hidden
from streamer.metastore.catalog import REPL_SOURCE_PARAM, Catalog
from streamer.target.apply.files import FileCopier
from streamer.target.apply.guard import check_write
from streamer.target.apply.layout import check_external_layout
from streamer.target.apply.paths import EXTERNAL_TYPES, TargetPaths

if TYPE_CHECKING:
    from streamer.target.job.settings import TargetSettings

log = logging.getLogger(__name__)

ALGORITHM = "sha256"


@dataclass(frozen=True)
class DirPlan:
    """What one directory needs: file names to copy and to delete."""

    copy: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()


def plan_dir(source: Mapping[str, str], target: Mapping[str, str]) -> DirPlan:
    """Names (with checksums) on each side -> what to copy (new or different) and delete (gone)."""
    copy = tuple(sorted(n for n, chk in source.items() if target.get(n) != chk))
    delete = tuple(sorted(n for n in target if n not in source))
    return DirPlan(copy, delete)


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


class _ChecksumCache:
    """sha256 of files keyed by (url, size, mtime): unchanged files are read once."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[Any, Any, Any, str]] = {}

    def listing(self, url: str) -> dict[str, str] | None:
        """Visible top-level files of ``url`` with checksums; ``None`` when the directory is absent."""
        fs, path = url_to_fs(url)
        if not fs.isdir(path):
            return None
        out: dict[str, str] = {}
        for info in fs.ls(path, detail=True):
            name = posixpath.basename(str(info["name"]).rstrip("/"))
            if info.get("type") != "file" or is_hidden(name) or info.get("islink"):
                continue
            file_url = url.rstrip("/") + "/" + name
            mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
            key = (info.get("size"), mtime, info.get("ino"))
            cached = self._known.get(file_url)
            if cached is not None and cached[:3] == key:
                out[name] = cached[3]
                continue
            digest = hashlib.sha256()
            with fs.open(str(info["name"]), "rb") as fh:
                while chunk := fh.read(1 << 20):
                    digest.update(chunk)
            out[name] = digest.hexdigest()
            self._known[file_url] = (*key, out[name])
        return out


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
    ) -> None:
        self.catalog = catalog
        self.paths = paths
        self.source_id = source_id
        self.copier = copier or FileCopier(roots=paths.roots)
        self.source_prefix = source_prefix
        self.clock = clock
        self._cache = _ChecksumCache()
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
        dirs: list[str] = []
        for db in self.catalog.list_databases():
            snap = self.catalog.get_database(db)
            if snap is None or snap.parameters.get(REPL_SOURCE_PARAM) != self.source_id:
                continue
            for name in self.catalog.list_tables(db):
                table = self.catalog.get_table(db, name)
                if table is None or table.table_type not in EXTERNAL_TYPES:
                    continue
                if table.parameters.get(REPL_SOURCE_PARAM) != self.source_id:
                    continue
                if table.partition_keys:
                    dirs += [p.sd.location for p in self.catalog.list_partitions(db, name) if p.sd.location]
                elif table.sd.location:
                    dirs.append(table.sd.location)
        return list(dict.fromkeys(dirs))

    def sync_once(self) -> SyncReport:
        report = SyncReport()
        for target_dir in self.directories():
            report.dirs += 1
            try:
                self._sync_dir(target_dir, report)
            except (StreamerError, OSError) as exc:
                report.failures[target_dir] = f"{type(exc).__name__}: {exc}"
                log.warning("external sync of %s failed (retried next cycle): %s", target_dir, exc)
        log.info(
            "external sync: %d dirs, %d files copied (%d bytes), %d deleted, %d failed",
            report.dirs,
            report.copied,
            report.bytes_copied,
            report.deleted,
            len(report.failures),
        )
        return report

    def _sync_dir(self, target_dir: str, report: SyncReport) -> None:
        src = source_dir(self.paths, target_dir, self.source_prefix)
        source = self._cache.listing(src)
        if source is None:
            report.missing_sources.append(src)
            log.warning("external sync: source directory %s is missing; %s left as it is", src, target_dir)
            return
        target = self._cache.listing(target_dir) or {}
        todo = plan_dir(source, target)
        refs = [
            FileRef(uri=src.rstrip("/") + "/" + name, checksum=source[name], checksum_algorithm=ALGORITHM)
            for name in todo.copy
        ]
        if refs:
            copied = self.copier.copy_all(refs, lambda _: target_dir, obj_dir=target_dir)
            report.copied += copied.files
            report.bytes_copied += copied.bytes_copied
        self._delete(target_dir, todo.delete)
        report.deleted += len(todo.delete)

    def _delete(self, target_dir: str, names: Iterable[str]) -> None:
        fs, path = url_to_fs(target_dir)
        for name in names:
            url = target_dir.rstrip("/") + "/" + name
            check_write(url, target_dir, self.paths.roots)
            fs.rm_file(posixpath.join(path, name))


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
    if settings.external_sync_seconds <= 0:
        return None
    if not settings.external_base_dir:
        raise StreamerError("--external-sync-seconds needs --external-base-dir")
    from streamer.metastore.thrift_catalog import HmsCatalog

    paths = TargetPaths(settings.warehouse_root, settings.external_base_dir, settings.external_layout)
    check_external_layout(paths)
    # its own connection: the batch thread has the other
    catalog = HmsCatalog(settings.hms_uri, auth=settings.hms_auth)
    copier = FileCopier(max_workers=settings.copy_workers, roots=paths.roots)
    sync = ExternalSync(
        catalog, paths, settings.source_id, copier=copier, source_prefix=settings.external_source_prefix
    )
    return SyncThread(sync, settings.external_sync_seconds, lock, catalog.close).start()
