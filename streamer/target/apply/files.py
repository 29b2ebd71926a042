"""Point-in-time file copies onto a target (DESIGN invariant 3).

Each file is streamed once from the source (or, when the source no longer matches the checksum the
event recorded, from its cmroot copy), hashed while it is written to a hidden temporary name in its
destination directory, verified, fsynced, and only then renamed into place. Hive readers skip names
starting with ``.``, so a staged file is invisible until it is published. ``stage_all`` +
``Staged.publish`` let the applier make all files of one event visible together, after every one of
them has been verified; ``copy_all`` does both at once.

Every change on the target goes through ``guard.check_write`` (a file strictly inside the directory
of the object being changed, itself strictly inside a target root), and every file is checked
against the source rules (``sources.SourceRules``: declared stores, checksums) before it is opened.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import secrets
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import BinaryIO

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from streamer import checksums, metrics
from streamer.errors import (
    ApplyError,
    ChecksumMismatchError,
    PathEscapeError,
    StreamerError,
    UnverifiableFileError,
)
from streamer.events.model import FileRef
from streamer.filesystems import url_to_fs
from streamer.hive.files import is_hidden
from streamer.target.apply.dir_fsync import DirFsyncs, fsync_dir
from streamer.target.apply.guard import check_write, ensure_no_symlinks
from streamer.target.apply.paths import Root
from streamer.target.apply.sources import SourceRules

log = logging.getLogger(__name__)

TMP_PREFIX = ".streamer-tmp-"
# a swap's hidden trees beside a directory (streamer.target.apply.swap): one being built, one set aside
SWAP_INFIX = ".streamer-swap-"
OLD_INFIX = ".streamer-old-"
CHECKSUM_ALGORITHMS: tuple[str, ...] = checksums.ALGORITHMS


def hasher(
    algorithm: str, expected: str | None = None, *, event_id: int | None = None, obj: str | None = None
) -> checksums.Hasher:
    """A fresh streaming hash for ``algorithm``, shaped by the ``expected`` value where it carries its
    own parameters (HDFS's bytes per CRC and block size); an unknown algorithm or a value that cannot
    be one of its checksums is an error, never 'unverified'."""
    try:
        if expected is not None:
            checksums.check_value(algorithm, expected)
            checksums.recorded_sizes_in_bounds(algorithm, expected)  # a record's sizes cost time and memory
        return checksums.new(algorithm, expected)
    except checksums.ChecksumError as exc:
        raise ApplyError(str(exc), event_id=event_id, obj=obj) from exc


@dataclass(frozen=True)
class CopyReport:
    bytes_copied: int = 0
    files: int = 0
    cm_fallbacks: int = 0
    unverified: int = 0
    skipped: int = 0

    def __add__(self, other: CopyReport) -> CopyReport:
        return CopyReport(
            self.bytes_copied + other.bytes_copied,
            self.files + other.files,
            self.cm_fallbacks + other.cm_fallbacks,
            self.unverified + other.unverified,
            self.skipped + other.skipped,
        )


@dataclass
class StagedFile:
    """One file of a copy: ``final`` is its target URL; ``temp`` the verified hidden copy (fs path)."""

    ref: FileRef
    final: str
    fs: AbstractFileSystem
    path: str  # ``final`` as a path of ``fs``
    temp: str | None = None
    size: int = 0
    cm_fallback: bool = False
    unverified: bool = False
    skipped: bool = False


@dataclass
class Staged:
    """Verified, invisible copies; ``publish`` renames them all into place, ``discard`` removes them."""

    files: list[StagedFile] = field(default_factory=list)
    event_id: int | None = None
    roots: Sequence[Root] = ()
    obj_dir: str | None = None  # the directory of the object the files belong to (guard.check_write)
    # set for a step its batch's markers alone record as applied: its directories' fsyncs run behind
    # it and the batch's end waits for them (streamer.target.apply.dir_fsync); else each is synced here
    dir_fsyncs: DirFsyncs | None = None

    def publish(self) -> CopyReport:
        dirs: set[str] = set()
        for f in self.files:
            if f.temp is None:
                continue
            try:
                self.check(f)
                _rename(f.fs, f.temp, f.path)
            except PathEscapeError:
                self.discard()
                raise
            except OSError as exc:
                self.discard()
                raise ApplyError(
                    f"rename into {f.final} failed: {exc}", event_id=self.event_id, obj=f.final
                ) from exc
            f.temp = None
            if isinstance(f.fs, LocalFileSystem):
                dirs.add(posixpath.dirname(f.path))
        for directory in dirs:
            if self.dir_fsyncs is not None:
                self.dir_fsyncs.add(directory)
            else:
                fsync_dir(directory)
        return self.published()

    def check(self, f: StagedFile) -> None:
        """The guard, again just before ``f`` becomes visible (a symlink may have appeared since)."""
        check_write(f.final, self.obj_dir or posixpath.dirname(f.final), self.roots, event_id=self.event_id)

    def published(self) -> CopyReport:
        """Count a publish (however it was done) in the metrics; the report of what was copied."""
        report = self.report()
        metrics.TARGET_BYTES_COPIED.inc(report.bytes_copied)
        metrics.TARGET_CM_FALLBACKS.inc(report.cm_fallbacks)
        metrics.TARGET_FILES_UNVERIFIED.inc(report.unverified)
        return report

    def discard(self) -> None:
        for f in self.files:
            if f.temp is not None:
                _remove_quietly(f.fs, f.temp)
                f.temp = None

    def report(self) -> CopyReport:
        copied = [f for f in self.files if not f.skipped]
        skipped = [f for f in self.files if f.skipped]
        return CopyReport(
            bytes_copied=sum(f.size for f in copied),
            files=len(copied),
            cm_fallbacks=sum(f.cm_fallback for f in copied),
            unverified=sum(f.unverified for f in copied),
            skipped=len(skipped),
        )


class FileCopier:
    """Copies file references into target directories, in parallel, verified and all-or-nothing."""

    def __init__(
        self,
        max_workers: int = 4,
        chunk_size: int = 1 << 20,
        roots: Sequence[Root] = (),
        sources: SourceRules | None = None,
    ) -> None:
        self.max_workers = max(1, max_workers)
        self.chunk_size = chunk_size
        self.roots = list(roots)
        self.sources = sources  # None: unchecked reads (tools and benchmarks; the applier sets its rules)
        self.temp_tag = ""  # marks the staging names of one copy (executor copies clean up by it)

    def copy_all(
        self,
        refs: Iterable[FileRef],
        dest_for_ref: Callable[[FileRef], str],
        *,
        event_id: int | None = None,
        obj_dir: str | None = None,
        source_location: str | None = None,
        resources: bool = False,
    ) -> CopyReport:
        """Copy every file into ``dest_for_ref(ref)`` (a directory) and make them visible."""
        staged = self.stage_all(
            refs, dest_for_ref, event_id=event_id, obj_dir=obj_dir, source_location=source_location,
            resources=resources,
        )
        return staged.publish()

    def stage_all(
        self,
        refs: Iterable[FileRef],
        dest_for_ref: Callable[[FileRef], str],
        *,
        event_id: int | None = None,
        obj_dir: str | None = None,
        source_location: str | None = None,
        resources: bool = False,
    ) -> Staged:
        """Copy and verify every file under a hidden name; on any failure nothing is left behind.

        ``obj_dir`` is the target directory of the object the files belong to (default: each file's
        destination directory): every file must land strictly inside it. ``source_location`` is that
        object's location on the source and ``resources`` marks a function's resource files, for the
        read rules (``self.sources``), which every reference passes before any file is opened.
        """
        refs = list(refs)
        if self.sources is not None:
            unverifiable: UnverifiableFileError | None = None
            for ref in refs:  # every file's location first: a refused one is never hidden behind
                try:  # a missing checksum, which a later overwrite may void (a voiding run)
                    self.sources.check(
                        ref, source_location, resource=resources, event_id=event_id, target_roots=self.roots
                    )
                except UnverifiableFileError as exc:
                    unverifiable = unverifiable or exc
            if unverifiable is not None:
                raise unverifiable
        jobs = _jobs(refs, dest_for_ref, self.roots, obj_dir, event_id)
        staged = Staged(jobs, event_id, self.roots, obj_dir)
        if not staged.files:
            return staged
        try:
            self._stage_files(staged.files, event_id)
        except BaseException:
            staged.discard()
            raise
        return staged

    def _stage_files(self, files: list[StagedFile], event_id: int | None) -> None:
        """Stage every file (``_stage_one``) on this process's thread pool; raises the first failure
        once all have finished. ``streamer.target.job.executor_copy`` runs large copies on executors
        instead."""
        workers = min(self.max_workers, len(files))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="copy") as pool:
            futures = [pool.submit(self._stage_one, f, event_id) for f in files]
            errors = [fut.exception() for fut in futures]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            if isinstance(first, ApplyError):
                raise first
            raise ApplyError(f"copy failed: {first}", event_id=event_id) from first

    # --- one file -------------------------------------------------------------------------
    def _stage_one(self, f: StagedFile, event_id: int | None) -> None:
        ref = f.ref
        if self.roots:
            ensure_no_symlinks(f.final, self.roots, event_id=event_id)
        algo = ref.checksum_algorithm if ref.checksum else None
        if ref.checksum and not algo:
            raise ApplyError(
                f"file has checksum {ref.checksum} but no checksum algorithm; cannot verify",
                event_id=event_id,
                obj=ref.uri,
            )
        if algo:
            hasher(algo, ref.checksum, event_id=event_id, obj=ref.uri)  # fail early on a bad algorithm/value
        dst_fs, final = f.fs, f.path
        if algo and ref.checksum and _matches(dst_fs, final, algo, ref.checksum, self.chunk_size):
            f.skipped = True  # already there with the right content: idempotent re-copy
            return
        directory = posixpath.dirname(final)
        try:
            dst_fs.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise ApplyError(f"cannot create {directory}: {exc}", event_id=event_id, obj=f.final) from exc
        causes = []
        for candidate, is_cm in ((ref.uri, False), (ref.cm_uri, True)):
            if not candidate:
                continue
            tmp_name = f"{TMP_PREFIX}{posixpath.basename(final)}-{self.temp_tag}{secrets.token_hex(6)}"
            f.temp = posixpath.join(directory, tmp_name)
            try:
                digest, size = _stream(candidate, f, f.temp, algo, self.chunk_size, event_id)
            except FileNotFoundError:
                _remove_quietly(dst_fs, f.temp)
                f.temp = None
                causes.append(f"{candidate}: missing")
                continue
            except _Grew as grew:  # changed under the copy: not the event's file; its cmroot copy next
                _remove_quietly(dst_fs, f.temp)
                f.temp = None
                causes.append(f"{candidate}: {grew}")
                continue
            except BaseException:
                _remove_quietly(dst_fs, f.temp)
                f.temp = None
                raise
            problem = _mismatch(ref, digest, size)
            if problem is None:
                f.size, f.cm_fallback, f.unverified = size, is_cm, algo is None
                if is_cm:
                    log.info(
                        "event %s: %s changed or vanished; copied %s from cmroot",
                        event_id,
                        ref.uri,
                        candidate,
                    )
                return
            _remove_quietly(dst_fs, f.temp)
            f.temp = None
            causes.append(f"{candidate}: {problem}")
        raise ChecksumMismatchError(
            "no copy matches the event: " + "; ".join(causes or ["no source uri"]),
            event_id=event_id,
            obj=ref.uri,
        )



def _stream(
    src_url: str, f: StagedFile, tmp: str, algo: str | None, chunk_size: int, event_id: int | None
) -> tuple[str | None, int]:
    """Copy ``src_url`` into ``tmp`` (on ``f``'s filesystem), hashing it: (hex digest, size). Only a
    regular file is read, and no more than it held when looked at (``readable_size``)."""
    src_fs, src_path = url_to_fs(src_url)
    held = readable_size(src_fs, src_path, src_url, event_id)
    limit = held
    if not f.ref.checksum and f.ref.size is not None:  # its declared size decides: read enough to
        limit = min(held, f.ref.size + 1)  # see that it differs, no more
    digest = hasher(algo, f.ref.checksum) if algo else None
    size = 0
    with src_fs.open(src_path, "rb") as reader:
        try:
            with f.fs.open(tmp, "wb") as writer:
                while size < limit and (chunk := reader.read(min(chunk_size, limit - size))):
                    if digest is not None:
                        digest.update(chunk)
                    writer.write(chunk)
                    size += len(chunk)
                if size >= held and reader.read(1):
                    raise _Grew(f"grew past {held} bytes while it was copied")
                writer.flush()
                _fsync(writer)
        except OSError as exc:
            raise ApplyError(f"writing {f.final} failed: {exc}", event_id=event_id, obj=f.final) from exc
    return (digest.hexdigest() if digest is not None else None), size


class _Grew(StreamerError):
    """A source file was longer than when the copy looked at it: another file than the event's."""


def readable_size(fs: AbstractFileSystem, path: str, url: str, event_id: int | None) -> int:
    """How many bytes a copy of ``url`` may read: the regular file's size when looked at. A device,
    FIFO, socket or directory (``file:///dev/zero`` would stream until the disk is full) is refused;
    a missing file raises ``FileNotFoundError`` (its cmroot copy is tried next)."""
    info = fs.info(path)
    kind = info.get("type")
    if kind != "file":
        raise ApplyError(
            f"{url} is not a regular file ({kind}); an event's data file must be one",
            event_id=event_id, obj=url,
        )
    size = info.get("size")
    return int(size) if size is not None else sys.maxsize  # a store that tells no size: unbounded


def _jobs(
    refs: list[FileRef],
    dest_for_ref: Callable[[FileRef], str],
    roots: Sequence[Root],
    obj_dir: str | None,
    event_id: int | None,
) -> list[StagedFile]:
    """One file to stage per destination, each allowed by the guard; two different files for one
    destination are an error."""
    jobs: dict[str, StagedFile] = {}
    for ref in refs:
        directory = dest_for_ref(ref)
        final = _join(directory, _file_name(ref, event_id))
        check_write(final, obj_dir or directory, roots, event_id=event_id)
        seen = jobs.get(final)
        if seen is not None:
            old = seen.ref
            if old.checksum != ref.checksum or (ref.checksum is None and old.uri != ref.uri):
                raise ApplyError(f"two different files map to {final}", event_id=event_id, obj=ref.uri)
            continue
        fs, path = url_to_fs(final)
        jobs[final] = StagedFile(ref=ref, final=final, fs=fs, path=path)
    return list(jobs.values())


def _mismatch(ref: FileRef, digest: str | None, size: int) -> str | None:
    """The checksum is the authority; the size is only a hint (an agent that publishes late stats the
    file that replaced the event's one), so it decides only for files without a checksum."""
    if ref.checksum:
        if (digest or "").lower() != ref.checksum.lower():
            return f"{ref.checksum_algorithm} checksum {digest} != expected {ref.checksum}"
        return None
    if ref.size is not None and ref.size != size:
        return f"size {size} != expected {ref.size}"
    return None


def _matches(fs: AbstractFileSystem, path: str, algo: str, checksum: str, chunk: int) -> bool:
    try:
        if not fs.isfile(path):
            return False
        digest = hasher(algo, checksum)
        with fs.open(path, "rb") as fh:
            while data := fh.read(chunk):
                digest.update(data)
    except FileNotFoundError:
        return False
    return bool(digest.hexdigest().lower() == checksum.lower())


def _file_name(ref: FileRef, event_id: int | None) -> str:
    name = posixpath.basename(ref.uri.split("?", 1)[0].rstrip("/"))
    if not name or name in (".", "..") or "\x00" in name or name.startswith(TMP_PREFIX):
        raise PathEscapeError(f"file name {name!r} is not usable", event_id=event_id, obj=ref.uri)
    return name


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def _fsync(writer: BinaryIO) -> None:
    with contextlib.suppress(AttributeError, OSError, ValueError):  # remote filesystems commit on close
        os.fsync(writer.fileno())


def _rename(fs: AbstractFileSystem, src: str, dst: str) -> None:
    if isinstance(fs, LocalFileSystem):
        os.replace(src, dst)  # atomic, replaces an existing file
    else:
        fs.mv(src, dst)


def _remove_quietly(fs: AbstractFileSystem, path: str) -> None:
    with contextlib.suppress(OSError):
        fs.rm_file(path)


# --- removing and moving target data (after the metadata says so) ------------------------------
# Each takes the directory of the object it changes: ``guard.check_write`` refuses a target root,
# anything outside the roots and any symlink on the way.


def remove_tree(url: str, roots: Sequence[Root], *, event_id: int | None = None) -> None:
    """Delete an object's directory (never a root), in place; absent is fine (a replay after a crash)."""
    check_write(url, url, roots, event_id=event_id)
    fs, path = url_to_fs(url)
    try:
        if not fs.exists(path):
            return
        _rm_tree(fs, path)
    except OSError as exc:
        raise ApplyError(f"cannot remove {url}: {exc}", event_id=event_id, obj=url) from exc


def _rm_tree(fs: AbstractFileSystem, path: str, attempts: int = 3) -> None:
    """Delete ``path`` recursively. An entry that vanishes during the walk (a swap's reaper deleting
    a replaced directory it set aside inside the tree) is no failure: the walk starts again, until
    the tree is gone or the error is another."""
    for attempt in range(attempts):
        try:
            fs.rm(path, recursive=True)
            return
        except FileNotFoundError:
            if not fs.exists(path):
                return
            if attempt == attempts - 1:
                raise


def clear_dir(
    url: str,
    roots: Sequence[Root],
    *,
    keep: Iterable[str] = (),
    recursive_files: bool = False,
    event_id: int | None = None,
) -> list[str]:
    """Remove the visible entries of an object's directory except ``keep`` (top-level names); hidden
    ones stay.

    With ``recursive_files`` only files are removed, at every depth, and directories stay (a
    truncate keeps partition directories). Returns the removed paths.
    """
    return _clear(url, url, roots, set(keep), recursive_files, event_id)


def _clear(
    url: str, obj_dir: str, roots: Sequence[Root], keep: set[str], recursive_files: bool, event_id: int | None
) -> list[str]:
    check_write(url, obj_dir, roots, event_id=event_id)
    fs, path = url_to_fs(url)
    removed: list[str] = []
    try:
        if not fs.isdir(path):
            return removed
        for info in fs.ls(path, detail=True):
            name = posixpath.basename(str(info["name"]).rstrip("/"))
            if is_hidden(name) or name in keep:
                continue
            if info.get("islink"):
                cause = f"{info['name']} is a symlink inside the target root"
                raise PathEscapeError(cause, event_id=event_id, obj=url)
            if info["type"] == "directory":
                if recursive_files:
                    removed += _clear(_child(url, name), obj_dir, roots, set(), True, event_id)
                    continue
                fs.rm(info["name"], recursive=True)
            else:
                fs.rm_file(info["name"])
            removed.append(str(info["name"]))
    except OSError as exc:
        raise ApplyError(f"cannot clear {url}: {exc}", event_id=event_id, obj=url) from exc
    return removed


def move_dir(src: str, dst: str, roots: Sequence[Root], *, event_id: int | None = None) -> bool:
    """Rename an object's directory to its new one; returns False when there was nothing to move."""
    for url in (src, dst):
        check_write(url, url, roots, event_id=event_id)
    fs, src_path = url_to_fs(src)
    _, dst_path = url_to_fs(dst)
    try:
        if not fs.exists(src_path):
            return False
        if fs.exists(dst_path):
            cause = f"cannot move {src} to {dst}: the destination exists"
            raise ApplyError(cause, event_id=event_id, obj=dst)
        fs.makedirs(posixpath.dirname(dst_path), exist_ok=True)
        if isinstance(fs, LocalFileSystem):
            os.rename(src_path, dst_path)
        else:
            fs.mv(src_path, dst_path, recursive=True)
    except OSError as exc:
        raise ApplyError(f"cannot move {src} to {dst}: {exc}", event_id=event_id, obj=src) from exc
    return True


def link_dir(src: str, dst: str, roots: Sequence[Root], *, event_id: int | None = None) -> bool:
    """Hard-link the tree of object directory ``src`` into ``dst`` (created as needed), leaving
    ``src`` intact.

    Lets a rename switch metadata from one complete copy to another, so readers never see a table
    whose files are half-moved. Only local filesystems can link: returns False elsewhere (and when
    ``src`` is absent), and the caller moves instead. Idempotent: entries already linked are kept.
    """
    for url in (src, dst):
        check_write(url, url, roots, event_id=event_id)
    fs, src_path = url_to_fs(src)
    _, dst_path = url_to_fs(dst)
    if not isinstance(fs, LocalFileSystem) or not os.path.isdir(src_path):
        return False
    try:
        for directory, dirs, files in os.walk(src_path):
            # a swap's or a drop's hidden trees (the reaper deletes them) and killed copies' staging
            # files are not the object's: not carried to its new place
            dirs[:] = [d for d in dirs if not _swap_tree(d)]
            target = os.path.join(dst_path, os.path.relpath(directory, src_path))
            os.makedirs(target, exist_ok=True)
            for name in files:
                if name.startswith(TMP_PREFIX):
                    continue
                source_file, target_file = os.path.join(directory, name), os.path.join(target, name)
                if os.path.exists(target_file):
                    if os.path.samefile(source_file, target_file):
                        continue
                    raise ApplyError(
                        f"cannot link {source_file} to {target_file}: a different file is there",
                        event_id=event_id, obj=dst,
                    )
                os.link(source_file, target_file, follow_symlinks=False)
    except OSError as exc:
        raise ApplyError(f"cannot link {src} into {dst}: {exc}", event_id=event_id, obj=src) from exc
    return True


def _swap_tree(name: str) -> bool:
    return name.startswith(".") and (SWAP_INFIX in name or OLD_INFIX in name)


def _child(url: str, name: str) -> str:
    return url.rstrip("/") + "/" + name
