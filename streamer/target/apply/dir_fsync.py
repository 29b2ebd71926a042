"""Directory fsyncs a fenced batch owes: run behind the steps that renamed files in, awaited at the
batch's end.

A rename into a directory reaches the disk with that directory's fsync. A step whose database is
fenced in a batch that writes its markers at its end (``markers.record``: no journal line) is
recorded as applied only by those markers; after a host crash before them the whole batch is applied
again. So the fsync of its directory need not hold the step up: it runs on a thread of its own while
the lanes go on to their metastore calls, and ``markers.flush`` waits for every one before it writes a
marker. A directory renamed into again before its queued fsync starts is synced once. The fsyncs go
by path, so a step that moves or links a directory, and any marker written outside the batch's end
(a bootstrap's, a step's own), waits for them first (``ApplyContext.settle_dir_fsyncs``,
``markers.write_marker``). A step that also records itself on its own (a transaction's commit in the
visibility store) syncs inline. Only renames are deferred: a swap's new tree is still synced before
its exchange (``streamer.target.apply.swap``), since its old files would otherwise hang on what the
crash kept. Design: docs/design/apply.md ("Progress per batch").
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor


class DirFsyncs:
    """Queued directory fsyncs (``add``) and the wait for all of them (``wait``); lanes add at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._queued: dict[str, Future[None]] = {}  # the newest fsync of each directory
        self._owed: list[Future[None]] = []  # all of them: a failure is kept even if a later one passes
        # a failed fsync may have lost renames whose steps are done: every later wait raises it, so no
        # marker is written in this process after it (a restart applies the batch again)
        self._failed: BaseException | None = None

    def add(self, directory: str) -> None:
        """Sync ``directory`` after the rename just made in it (one queued, not yet started, covers it)."""
        with self._lock:
            queued = self._queued.get(directory)
            if queued is not None and not queued.running() and not queued.done():
                return  # it starts after this rename, so it makes this rename durable too
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dir-fsync")
            future = self._queued[directory] = self._pool.submit(fsync_dir, directory)
            self._owed.append(future)

    def wait(self) -> None:
        """Every queued fsync done; a failure is raised, now and by every later wait (its directory's
        renames may be lost)."""
        with self._lock:
            owed, self._owed, self._queued = self._owed, [], {}
        failures = [failure for future in owed if (failure := future.exception()) is not None]
        with self._lock:
            if failures and self._failed is None:
                self._failed = failures[0]
            failed = self._failed
        if failed is not None:
            raise OSError(f"a directory fsync failed, so renames of applied steps may be lost: {failed}; "
                          "restart the job to apply the batch again") from failed

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def fsync_dir(directory: str, *, missing_ok: bool = True) -> None:
    """fsync ``directory`` (its entries: renames into it); one that is gone has nothing to sync, unless
    it must be there (``missing_ok=False``: a swap's tree it has just built)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
