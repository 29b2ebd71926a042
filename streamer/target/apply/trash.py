"""Dropped trees deleted off the apply path (issue 41).

``files.remove_tree`` renames a dropped object's directory into its source's trash
(``door.trash_dir``) and queues it here; one daemon thread deletes the queued trees in order. A
process stopped before a deletion leaves the tree in the trash: ``sweep`` (a job's start) and the
first removal of each process queue whatever a trash holds, so a crash mid-removal converges.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time

from fsspec.implementations.local import LocalFileSystem

from streamer.filesystems import url_to_fs

log = logging.getLogger(__name__)


def sweep(trash: str) -> None:
    """Queue for deletion whatever a stopped process left in the local directory ``trash`` (a
    dropped tree renamed there, its deletion unfinished): a crash mid-removal converges at the next
    start."""
    fs, path = url_to_fs(trash)
    if isinstance(fs, LocalFileSystem):
        _remover.sweep_once(path, force=True)


def add(path: str) -> None:
    """Queue the local tree ``path`` (already renamed into a trash) for deletion."""
    _remover.add(path)


def sweep_once(trash: str) -> None:
    """Queue what the local ``trash`` holds, the first time this process asks."""
    _remover.sweep_once(trash)


def wait(timeout: float = 30.0) -> bool:
    """Whether every tree queued so far was deleted within ``timeout`` seconds (tests, a clean stop)."""
    return _remover.wait(timeout)


class _Remover:
    """One daemon thread deleting trees renamed into a trash directory, in the order they came."""

    def __init__(self) -> None:
        self._queue: list[str] = []
        self._queued: set[str] = set()
        self._swept: set[str] = set()
        self._busy = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, path: str) -> None:
        with self._cond:
            if path in self._queued:
                return
            self._queued.add(path)
            self._queue.append(path)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="streamer-trash", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def sweep_once(self, trash: str, *, force: bool = False) -> None:
        """Queue every entry of ``trash`` (first call per directory in this process, or ``force``)."""
        with self._cond:
            if trash in self._swept and not force:
                return
            self._swept.add(trash)
        try:
            entries = os.listdir(trash)
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("cannot list the trash %s: %s (the next start tries again)", trash, exc)
            return
        for entry in entries:
            self.add(os.path.join(trash, entry))

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                path = self._queue.pop(0)
                self._busy += 1
            try:
                _delete(path)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._queued.discard(path)
                    self._cond.notify_all()


def _delete(path: str) -> None:
    """Delete one trash entry (a tree, or a file a sweep found); a failure is logged and left for
    the next start's sweep."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot delete %s from the trash: %s (the next start tries again)", path, exc)


_remover = _Remover()
