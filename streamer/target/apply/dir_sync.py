"""Syncing one target directory with its source directory: the way data reaches a replica whose
writers log no events (external tables; Spark datasource tables and Hive tables Spark writes with its
conversion on, ``streamer.target.apply.by_state``).

Before anything is listed, the source directory passes ``SourceRules.check_sync_dir``: a sync
vouches for what it copies by hashing it itself, so it reads only below a declared
``--source-prefix`` and never in another database's directory (docs/security.md). The source
directory is listed with a sha256 of each visible top-level file; new or changed files are
copied (verified, all-or-nothing, through the copier's read rules and write guard), files gone from
the source are deleted (each through ``check_write``), hidden files stay. A missing source directory
is never mirrored as empty: the sync reports it and changes nothing. No point-in-time guarantee: the
source is read as it is now. Details: docs/design/consistency.md.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streamer.errors import ChecksumMismatchError
from streamer.events.model import FileRef
from streamer.filesystems import url_to_fs
from streamer.hive.files import is_hidden
from streamer.target.apply.files import FileCopier
from streamer.target.apply.guard import check_write
from streamer.target.apply.sources import SourceRules

ALGORITHM = "sha256"
ATTEMPTS = 3  # listings of a source directory its writer keeps changing, before the sync fails


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


@dataclass(frozen=True)
class DirSynced:
    """What one directory's sync did."""

    copied: int = 0
    bytes_copied: int = 0
    deleted: int = 0


class ChecksumCache:
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


def sync_dir(
    copier: FileCopier,
    source_dir: str,
    target_dir: str,
    cache: ChecksumCache,
    *,
    database: str | None,
    event_id: int | None = None,
) -> DirSynced | None:
    """Make ``target_dir``'s visible files those of ``source_dir``; ``None`` (nothing changed) when
    the source directory is missing. ``source_dir`` must pass ``check_sync_dir`` for ``database``,
    the synced object's source database, before it is listed (the copier's rules, or the default
    ones when it has none); reads pass ``copier.sources`` too, and every write stays inside
    ``target_dir``. A source file that changes or
    vanishes during the sync (its writer moved on) makes it list the source again, up to
    ``ATTEMPTS`` times: the newer state is the one to reach."""
    rules = copier.sources if copier.sources is not None else SourceRules()
    rules.check_sync_dir(source_dir, database, event_id=event_id, obj=target_dir)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return _sync_once(copier, source_dir, target_dir, cache, event_id)
        except (ChecksumMismatchError, FileNotFoundError):
            if attempt == ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _sync_once(
    copier: FileCopier, source_dir: str, target_dir: str, cache: ChecksumCache, event_id: int | None
) -> DirSynced | None:
    source = cache.listing(source_dir)
    if source is None:
        return None
    target = cache.listing(target_dir) or {}
    todo = plan_dir(source, target)
    refs = [
        FileRef(uri=source_dir.rstrip("/") + "/" + name, checksum=source[name], checksum_algorithm=ALGORITHM)
        for name in todo.copy
    ]
    copied = bytes_copied = 0
    if refs:
        report = copier.copy_all(
            refs, lambda _: target_dir, event_id=event_id, obj_dir=target_dir, source_location=source_dir
        )
        copied, bytes_copied = report.files, report.bytes_copied
    _delete(copier, target_dir, todo.delete, event_id)
    return DirSynced(copied, bytes_copied, len(todo.delete))


def _delete(copier: FileCopier, target_dir: str, names: Iterable[str], event_id: int | None) -> None:
    fs, path = url_to_fs(target_dir)
    for name in names:
        check_write(target_dir.rstrip("/") + "/" + name, target_dir, copier.roots, event_id=event_id)
        fs.rm_file(posixpath.join(path, name))
