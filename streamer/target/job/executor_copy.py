"""Large file copies as Spark tasks: the copy plan of one event runs on the executors.

Below a threshold (``ExecutorCopy``) the driver's ``FileCopier`` copies; at or above it, executor
tasks stage the files exactly as the driver would and the driver publishes only after every task
reported success. Failures, retries and what executors need: docs/design/consistency.md.

The driver's copier also prestages (``PooledFileCopier.prestage``): while a batch's steps run, its later
INSERTs' files are copied and verified into a hidden staging directory, so a step waiting for the
metastore is not followed by one waiting for a copy. A step takes its files from there (one rename
into its directory, as hidden as its own staging file would be) or copies them itself; nothing is
published any earlier or otherwise than without it (docs/design/apply.md, "Prestaged copies").
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
import secrets
import shutil
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fsspec.implementations.local import LocalFileSystem

from streamer import metrics
from streamer.errors import ApplyError, ChecksumMismatchError, PathEscapeError, StreamerError
from streamer.events.model import AddPartitionPayload, EventType, FileRef, InsertPayload, TableSnapshot
from streamer.filesystems import FsSettings, configure, current_settings, url_to_fs
from streamer.target.apply.files import TMP_PREFIX, FileCopier, Staged, StagedFile
from streamer.target.apply.guard import ensure_no_symlinks, inside_a_root
from streamer.target.apply.paths import Root
from streamer.target.apply.plan import Plan, StepKind
from streamer.target.apply.sources import SourceRules

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)

DEFAULT_MIN_BYTES = 256 << 20
DEFAULT_MIN_FILES = 256
_ERRORS: dict[str, type[ApplyError]] = {
    "ApplyError": ApplyError,
    "ChecksumMismatchError": ChecksumMismatchError,
    "PathEscapeError": PathEscapeError,
}


@dataclass(frozen=True)
class ExecutorCopy:
    """When one copy (all files of one event's object) runs on executors: at ``min_bytes`` bytes
    (sizes the event records) or ``min_files`` files, whichever comes first; 0 turns a bound off."""

    min_bytes: int = DEFAULT_MIN_BYTES
    min_files: int = DEFAULT_MIN_FILES

    def wants(self, refs: Sequence[FileRef]) -> bool:
        if self.min_files > 0 and len(refs) >= self.min_files:
            return True
        return self.min_bytes > 0 and sum(r.size or 0 for r in refs) >= self.min_bytes


@dataclass(frozen=True)
class StagedOnExecutor:
    """What a task reports for one file (picklable; errors travel as type name and cause)."""

    index: int
    temp: str | None = None
    size: int = 0
    cm_fallback: bool = False
    unverified: bool = False
    skipped: bool = False
    error_type: str | None = None
    cause: str | None = None
    obj: str | None = None
    worker_pid: int = 0
    executor_pid: int | None = None  # the JVM the Python worker serves
    module: str = ""  # where the worker imported streamer from (--py-files, image, environment)


@dataclass(frozen=True)
class _CopyConfig:
    """What every task of one executor copy needs besides its files (pickled into the tasks; its
    repr masks secret-looking fs options, as ``FsSettings`` does)."""

    chunk_size: int
    roots: tuple[Root, ...]
    tag: str
    event_id: int | None
    threads: int = 4  # files a task stages at once
    # the driver's filesystem settings, applied on the executor before it opens a file
    fs: FsSettings = field(default_factory=FsSettings)


PRESTAGE_MAX_FILE_BYTES = 64 << 20  # a larger file is copied by its own step (or on executors)
PRESTAGE_MAX_BYTES = 512 << 20  # staged ahead per batch at most: the staging directory's disk use
PRESTAGE_WORKERS = 2


@dataclass(frozen=True)
class PrestageGroup:
    """The files one later step will stage, and every source location its read rules may be checked
    against (a prestage reads a file only where each of them allows it)."""

    refs: tuple[FileRef, ...]
    locations: tuple[str, ...]


def prestage_groups(the_plan: Plan) -> list[PrestageGroup]:
    """What a batch may prestage, in the order its steps run: the files of each INSERT applied as an
    event of its own and of each ADD_PARTITION step (one event or a merged run: all their files are
    copied), after the first step (which starts at once), each file verifiable (a checksum).
    Coalesced and collapsed steps copy only their last event's files: left out."""
    groups: list[PrestageGroup] = []
    for step in the_plan.steps[1:]:
        if step.kind not in (StepKind.EVENT, StepKind.ADD_PARTITIONS):
            continue
        for event in step.events:
            payload = event.payload
            if event.event_type is EventType.INSERT and isinstance(payload, InsertPayload):
                partition = payload.partition if payload.partition_values else None
                groups += _group(payload.files, partition.sd.location if partition else None, payload.table)
            elif event.event_type is EventType.ADD_PARTITION and isinstance(payload, AddPartitionPayload):
                for p in payload.partitions:  # each partition's files: those below its location
                    if p.sd.location:
                        below = p.sd.location.rstrip("/") + "/"
                        mine = [r for r in payload.files if r.uri.startswith(below)]
                        groups += _group(mine, p.sd.location, payload.table)
    return groups


def _group(files: Sequence[FileRef], part: str | None, table: TableSnapshot | None) -> list[PrestageGroup]:
    """The verifiable ``files`` of one object, read only where its own location and its table's allow
    (the read rules at both); none without a location to read against."""
    refs = tuple(r for r in files if r.checksum and r.checksum_algorithm)
    locations = tuple(loc for loc in (part, table.sd.location if table is not None else None) if loc)
    return [PrestageGroup(refs, locations)] if refs and locations else []


class PooledFileCopier(FileCopier):
    """A ``FileCopier`` whose copies share one long-lived thread pool of ``max_workers`` threads, and
    copy a single file in the calling thread: no thread is started and joined per copy (a catch-up
    stages hundreds of copies, most of one file; bench/profile-catchup.md). Staging is unchanged: every
    file is staged by ``_stage_one`` and the first failure is raised once all have finished."""

    def __init__(
        self,
        max_workers: int = 4,
        chunk_size: int = 1 << 20,
        roots: Sequence[Root] = (),
        sources: SourceRules | None = None,
    ) -> None:
        super().__init__(max_workers=max_workers, chunk_size=chunk_size, roots=roots, sources=sources)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._ahead: ThreadPoolExecutor | None = None  # prestaging: its own threads, so a step's
        self._prestaged: dict[FileRef, Future[StagedFile | None]] = {}  # copies never queue behind it
        self._cleared: set[str] = set()  # staging directories emptied of a stopped process's files
        self.prestage_max_bytes = PRESTAGE_MAX_BYTES
        self.prestaged_taken = 0  # files steps took from the staging directory (benches read it)
        self.prestage_counts: Counter[str] = Counter()  # why others were not (benches read it)
        self._budget = 0  # bytes the batch may still stage ahead

    def _shared_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="copy")
                weakref.finalize(self, self._pool.shutdown, wait=False)
            return self._pool

    def _stage_files(self, files: list[StagedFile], event_id: int | None) -> None:
        errors: list[BaseException | None]
        if len(files) == 1:
            try:
                self._stage_one(files[0], event_id)
                errors = [None]
            except Exception as exc:  # as the pool reports it: wrapped below unless an ApplyError
                errors = [exc]
        else:
            pool = self._shared_pool()
            futures = [pool.submit(self._stage_one, f, event_id) for f in files]
            errors = [fut.exception() for fut in futures]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            if isinstance(first, ApplyError):
                raise first
            raise ApplyError(f"copy failed: {first}", event_id=event_id) from first

    def close(self) -> None:
        """Stop the pools' threads (idle ones also end with the process); prestaged files removed."""
        self.drop_prestaged()
        with self._pool_lock:
            for pool in (self._pool, self._ahead):
                if pool is not None:
                    pool.shutdown(wait=True)
            self._pool = self._ahead = None

    # --- prestaging ------------------------------------------------------------------------
    def prestage(self, groups: Iterable[PrestageGroup], staging_dir: str) -> int:
        """Start copying ``groups``' files into ``staging_dir`` (hidden, strictly inside a target root,
        on the filesystem of the directories they will be published in) in the background; returns
        how many were queued. Each is read only where the read rules allow it, and verified as a
        step's own copy is; ``drop_prestaged`` removes what no step took."""
        fs, path = url_to_fs(staging_dir)
        if not isinstance(fs, LocalFileSystem) or self.prestage_max_bytes <= 0:
            return 0  # a rename there is a copy: nothing gained (or prestaging is off)
        if self.roots and not inside_a_root(staging_dir, self.roots):
            return 0  # never written outside the target's roots (nor at a root itself)
        self._clear_once(path)
        with self._pool_lock:
            self._budget = self.prestage_max_bytes
        queued = 0
        for group in groups:
            if not self._wants_ahead(group.refs):
                continue
            for ref in group.refs:
                if (ref.size or 0) > PRESTAGE_MAX_FILE_BYTES:
                    continue
                with self._pool_lock:
                    if ref in self._prestaged:
                        continue
                    if self._ahead is None:
                        self._ahead = ThreadPoolExecutor(PRESTAGE_WORKERS, thread_name_prefix="prestage")
                        weakref.finalize(self, self._ahead.shutdown, wait=False)
                    future = self._ahead.submit(self._stage_ahead, ref, group.locations, staging_dir)
                    self._prestaged[ref] = future
                queued += 1
        return queued

    def drop_prestaged(self) -> int:
        """Remove every prestaged file no step took (a halted database's, a failed batch's): called at
        the end of each batch; returns how many."""
        with self._pool_lock:
            pending = list(self._prestaged.values())
            self._prestaged.clear()
        dropped = 0
        for future in pending:
            if future.cancel():
                continue
            staged = future.result()
            if staged is not None:
                Staged([staged]).discard()
                dropped += 1
        return dropped

    def _wants_ahead(self, refs: Sequence[FileRef]) -> bool:
        """Whether a step's files are staged by this process (not on executors: ``SparkFileCopier``)."""
        return bool(refs)

    def _clear_once(self, path: str) -> None:
        """Empty a staging directory the first time this process uses it: what is there is a stopped
        process's (a staged file is never published from the staging directory, only taken by a step)."""
        with self._pool_lock:
            if path in self._cleared:
                return
            self._cleared.add(path)
        shutil.rmtree(path, ignore_errors=True)

    def _stage_ahead(self, ref: FileRef, locations: tuple[str, ...], staging_dir: str) -> StagedFile | None:
        """Copy and verify one file into the staging directory, as ``_stage_one`` would into its own;
        None: not allowed, or failed (its step copies it, and meets the same refusal or failure)."""
        try:
            if self.sources is not None:
                for location in locations:
                    self.sources.check(ref, location, target_roots=self.roots)
            if not self._spend(ref):
                self.prestage_counts["over budget"] += 1
                return None
            final = f"{staging_dir.rstrip('/')}/{secrets.token_hex(8)}"
            fs, path = url_to_fs(final)
            staged = StagedFile(ref=ref, final=final, fs=fs, path=path)
            super()._stage_one(staged, None)
        except (StreamerError, OSError) as exc:
            log.debug("not prestaged: %s: %s", ref.uri, exc)
            self.prestage_counts[type(exc).__name__] += 1
            return None
        return staged if staged.temp is not None and not staged.unverified else None

    def _spend(self, ref: FileRef) -> bool:
        """Take ``ref``'s size (the event's, else the source file's) from the batch's budget; False:
        too large, or over the budget."""
        size = ref.size
        for url in (ref.uri, ref.cm_uri) if size is None else ():
            if not url:
                continue
            try:  # the copy reads the file or, when it is gone or changed, its cmroot copy
                fs, path = url_to_fs(url)
                size = int(fs.size(path) or 0)
                break
            except FileNotFoundError:
                continue
        if size is None:
            return False  # neither is there: the step meets the same and says so
        if size > PRESTAGE_MAX_FILE_BYTES:
            return False
        with self._pool_lock:
            if size > self._budget:
                return False
            self._budget -= size
        return True

    def _take(self, ref: FileRef) -> StagedFile | None:
        """The prestaged copy of ``ref``, once it is done; None when there is none (a prestage not
        started yet is cancelled: the step copies at once rather than wait behind the queue)."""
        with self._pool_lock:
            future = self._prestaged.pop(ref, None)
        if future is None:
            self.prestage_counts["not queued"] += 1
            return None
        if future.cancel():
            self.prestage_counts["not started"] += 1
            return None
        return future.result()

    def _stage_one(self, f: StagedFile, event_id: int | None) -> None:
        """A prestaged copy of ``f``'s file, renamed into ``f``'s directory under a staging name of
        its own; else copied as ``FileCopier._stage_one`` does."""
        ahead = self._take(f.ref)
        if ahead is not None and self._adopt(ahead, f, event_id):
            self.prestaged_taken += 1
            return
        super()._stage_one(f, event_id)

    def _adopt(self, ahead: StagedFile, f: StagedFile, event_id: int | None) -> bool:
        """Move the verified ``ahead`` into ``f``'s directory as ``f``'s staging file; False (``ahead``
        removed): the step copies instead (another filesystem, the file already in place, a staged
        copy no longer of the size it was verified at)."""
        temp = ahead.temp
        try:
            if self.roots:
                ensure_no_symlinks(f.final, self.roots, event_id=event_id)
            if (temp is None or not isinstance(f.fs, LocalFileSystem) or os.path.lexists(f.path)
                    or os.path.getsize(temp) != ahead.size):
                self.prestage_counts["not taken"] += 1
                return False
            directory = posixpath.dirname(f.path)
            os.makedirs(directory, exist_ok=True)
            mine = posixpath.join(directory, f"{TMP_PREFIX}{posixpath.basename(f.path)}-{self.temp_tag}"
                                             f"{secrets.token_hex(6)}")
            os.rename(temp, mine)
        except OSError:
            return False
        finally:
            if ahead.temp is not None and os.path.lexists(ahead.temp):
                Staged([ahead]).discard()
        ahead.temp = None
        f.temp, f.size, f.cm_fallback, f.unverified = mine, ahead.size, ahead.cm_fallback, False
        return True


class SparkFileCopier(PooledFileCopier):
    """A ``FileCopier`` that hands copies above ``threshold`` to Spark executors."""

    def __init__(
        self,
        spark_context: SparkContext,
        threshold: ExecutorCopy | None = None,
        *,
        max_workers: int = 4,
        chunk_size: int = 1 << 20,
        roots: Sequence[Root] = (),
        max_tasks: int | None = None,
        fs_settings: FsSettings | None = None,
    ) -> None:
        super().__init__(max_workers=max_workers, chunk_size=chunk_size, roots=roots)
        self.sc = spark_context
        # the settings this (driver) process resolves URLs with, unless told otherwise
        self.fs_settings = fs_settings if fs_settings is not None else current_settings()
        self.threshold = threshold or ExecutorCopy()
        self.max_tasks = max_tasks
        self.last_run: list[StagedOnExecutor] = []  # the reports of the last executor copy

    def _stage_files(self, files: list[StagedFile], event_id: int | None) -> None:
        if not self.threshold.wants([f.ref for f in files]):
            super()._stage_files(files, event_id)
            return
        started = time.monotonic()
        config = _CopyConfig(self.chunk_size, tuple(self.roots), secrets.token_hex(4) + "-", event_id,
                             threads=max(1, min(4, self.max_workers)), fs=self.fs_settings)
        groups = _groups(files, self._tasks(len(files)))
        items = [[(i, f.ref, f.final) for i, f in group] for group in groups]
        try:
            rdd = self.sc.parallelize(items, len(items))
            results: list[StagedOnExecutor] = rdd.mapPartitions(
                lambda part: stage_partition(config, part)
            ).collect()
        except Exception as exc:  # the job failed after Spark's retries: nothing of it may stay
            _remove_tagged(files, config.tag)
            cause = f"copy on Spark executors failed: {_first_line(exc)}"
            raise ApplyError(cause, event_id=event_id) from exc
        by_index = {r.index: r for r in results}
        for i, f in enumerate(files):
            r = by_index.get(i)
            if r is None:
                _remove_tagged(files, config.tag)
                raise ApplyError(f"no executor task reported {f.final}", event_id=event_id, obj=f.final)
            f.temp, f.size, f.cm_fallback = r.temp, r.size, r.cm_fallback
            f.unverified, f.skipped = r.unverified, r.skipped
        reports = sorted(results, key=lambda r: r.index)
        self.last_run = reports  # (lanes copy at once: this copy reads its own reports below)
        failed = next((r for r in reports if r.error_type is not None), None)
        if failed is not None:  # staged files are discarded by stage_all
            kind = _ERRORS.get(failed.error_type or "", ApplyError)
            raise kind(failed.cause or "copy failed", event_id=event_id, obj=failed.obj)
        metrics.TARGET_EXECUTOR_FILES_COPIED.inc(len(files))
        log.info(
            "event %s: %d files (%d bytes) staged by %d Spark tasks in %.2f s; python workers %s, "
            "executor JVMs %s; streamer from %s",
            event_id, len(files), sum(r.size for r in results), len(items), time.monotonic() - started,
            sorted({r.worker_pid for r in results}), sorted({r.executor_pid or 0 for r in results}),
            sorted({r.module for r in results}),
        )

    def _wants_ahead(self, refs: Sequence[FileRef]) -> bool:
        return bool(refs) and not self.threshold.wants(refs)

    def _tasks(self, n_files: int) -> int:
        limit = self.max_tasks or max(1, self.sc.defaultParallelism) * 4
        return max(1, min(n_files, limit))


def stage_partition(
    config: _CopyConfig, part: Iterable[list[tuple[int, FileRef, str]]]
) -> Iterator[StagedOnExecutor]:
    """The executor side: stage each file of the partition as the driver's copier would, a few at a
    time. A failure other than a verification one fails the task (Spark retries it) after removing
    what this attempt staged."""
    use_fs_settings(config.fs)
    copier = FileCopier(max_workers=1, chunk_size=config.chunk_size, roots=config.roots)
    copier.temp_tag = config.tag
    worker, executor, module = os.getpid(), _executor_jvm(), os.path.dirname(os.path.dirname(__file__))
    items = [item for group in part for item in group]
    staged: list[StagedFile] = []

    def one(item: tuple[int, FileRef, str]) -> StagedOnExecutor:
        index, ref, final = item
        fs, path = url_to_fs(final)
        f = StagedFile(ref=ref, final=final, fs=fs, path=path)
        staged.append(f)
        try:
            copier._stage_one(f, config.event_id)
        except ApplyError as exc:  # deterministic: report it, do not let Spark retry
            return StagedOnExecutor(index, error_type=type(exc).__name__, cause=exc.cause, obj=exc.obj,
                                    worker_pid=worker, executor_pid=executor, module=module)
        return StagedOnExecutor(index, f.temp, f.size, f.cm_fallback, f.unverified, f.skipped,
                                worker_pid=worker, executor_pid=executor, module=module)

    try:
        with ThreadPoolExecutor(max_workers=max(1, min(config.threads, len(items)))) as pool:
            results = list(pool.map(one, items))
    except BaseException:
        Staged(staged).discard()
        raise
    yield from results


def use_fs_settings(settings: FsSettings) -> None:
    """Resolve URLs in this (executor) process as the driver does. A reused Python worker keeps the
    settings of its previous task: configure (and log, masked) only when they differ."""
    if current_settings() != settings:
        configure(settings)


def _groups(files: list[StagedFile], n: int) -> list[list[tuple[int, StagedFile]]]:
    """``n`` groups of about equal bytes: largest first, each to the lightest group so far."""
    groups: list[list[tuple[int, StagedFile]]] = [[] for _ in range(n)]
    load = [0] * n
    for i, f in sorted(enumerate(files), key=lambda p: -(p[1].ref.size or 0)):
        g = load.index(min(load))
        groups[g].append((i, f))
        load[g] += max(1, f.ref.size or 0)
    return [g for g in groups if g]


def _remove_tagged(files: list[StagedFile], tag: str) -> None:
    """Remove the staging files of one executor copy (tasks that succeeded before the job failed)."""
    for f in files:
        directory = posixpath.dirname(f.path)
        pattern = posixpath.join(directory, f"{TMP_PREFIX}{posixpath.basename(f.path)}-{tag}*")
        try:
            for leftover in f.fs.glob(pattern):
                f.fs.rm_file(leftover)
        except OSError:
            log.warning("could not remove staging files %s", pattern)
        f.temp = None


def _executor_jvm() -> int | None:
    """The pid of the JVM whose Python worker this is (the nearest ``java`` ancestor), on Linux."""
    pid = os.getppid()
    for _ in range(6):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if cmdline.split(b"\0", 1)[0].endswith(b"java"):
            return pid
        pid = parent
        if pid <= 1:
            return None
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


def executor_copier(spark: Any, min_bytes: int, min_files: int, max_workers: int) -> FileCopier:
    """The job's copier: executors for large copies when a bound is set, else the driver pool."""
    if min_bytes <= 0 and min_files <= 0:
        return PooledFileCopier(max_workers=max_workers)
    return SparkFileCopier(spark.sparkContext, ExecutorCopy(min_bytes, min_files), max_workers=max_workers)


_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")


def executor_conf(master: str) -> dict[str, str]:
    """Spark settings a master needs from us. ``local-cluster[N,C,M]`` (N worker processes of C cores
    and M MiB, each with an executor JVM: a real multi-process cluster on one machine) starts no
    executor unless ``spark.executor.memory`` fits in M; executors inherit the driver's environment
    (``PYSPARK_PYTHON``, ``PYTHONPATH``), so their Python workers import the same streamer."""
    match = _LOCAL_CLUSTER.fullmatch(master.strip())
    if match is None:
        return {}
    memory = int(match.group(3))
    return {"spark.executor.memory": f"{max(256, memory * 3 // 4)}m"}
