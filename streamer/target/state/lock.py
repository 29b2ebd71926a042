"""One lock for every change to a target's state dir, taken by the job and by operator commands alike.

The job and ``streamer target retry|skip``, ``failover``, ``failback`` run in different processes,
perhaps on different hosts of a shared mount: each change re-reads the file under this lock, applies
its delta and writes, so no writer replaces another's change with a stale copy. The lock is a POSIX
record lock (``fcntl.lockf``) on ``<state-dir>/state.lock``, which NFS, CephFS and EFS honour across
hosts. Such locks belong to a process (closing any descriptor of the file drops them), so threads of
one process queue on a per-directory ``RLock`` first and the file is opened once per outermost hold.
The wait is bounded: a holder that does not let go is named (pid, host, command) in the error.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streamer.errors import StreamerError

LOCK_FILE = "state.lock"
DEFAULT_WAIT_SECONDS = 30.0
WAIT_ENV = "STREAMER_STATE_LOCK_WAIT"


class StateLockTimeout(StreamerError):
    """Another process held the state dir's lock for longer than the wait; the message names it."""


@dataclass
class _Held:
    """This process's hold on one state dir: the thread queue, nesting depth and open lock file."""

    queue: threading.RLock = field(default_factory=threading.RLock)
    depth: int = 0
    fd: int | None = None


_HOLDS: dict[str, _Held] = {}
_HOLDS_GUARD = threading.Lock()


def default_wait() -> float:
    """Seconds to wait for the lock: ``$STREAMER_STATE_LOCK_WAIT`` or 30."""
    raw = os.environ.get(WAIT_ENV)
    try:
        return float(raw) if raw else DEFAULT_WAIT_SECONDS
    except ValueError:
        return DEFAULT_WAIT_SECONDS


@contextlib.contextmanager
def state_lock(state_dir: str | Path, wait: float | None = None) -> Iterator[None]:
    """Hold ``<state_dir>/state.lock`` (re-entrant within a thread), waiting up to ``wait`` seconds."""
    wait = default_wait() if wait is None else wait
    directory = Path(state_dir)
    directory.mkdir(parents=True, exist_ok=True)
    with _HOLDS_GUARD:
        held = _HOLDS.setdefault(os.path.realpath(directory), _Held())
    if not held.queue.acquire(timeout=max(wait, 0.0)):
        raise StateLockTimeout(f"another thread of this process held {directory / LOCK_FILE} for {wait:g} s")
    try:
        if held.depth == 0:
            held.fd = _lock_file(directory / LOCK_FILE, wait)
        held.depth += 1
        try:
            yield
        finally:
            held.depth -= 1
            if held.depth == 0 and held.fd is not None:
                fd, held.fd = held.fd, None
                _unlock_file(fd)
    finally:
        held.queue.release()


def holder(state_dir: str | Path) -> str:
    """Who holds (or last held) the lock, as it wrote itself into the file; '' when unknown."""
    try:
        return (Path(state_dir) / LOCK_FILE).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _lock_file(path: Path, wait: float) -> int:
    try:  # never through a symlink: one planted in the state dir would be truncated and written
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise StateLockTimeout(f"cannot open the state dir lock {path}: {exc}"
                               + (" (a symlink: remove it)" if path.is_symlink() else "")) from exc
    deadline = time.monotonic() + wait
    pause = 0.005
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise StateLockTimeout(f"cannot lock {path}: {exc}") from exc
        if time.monotonic() >= deadline:
            os.close(fd)
            who = holder(path.parent) or "unknown (it wrote nothing)"
            raise StateLockTimeout(
                f"the state dir lock {path} is held by {who}; waited {wait:g} s ({WAIT_ENV} sets the "
                "wait). Retry when that process is done; if it is gone, a lock on a network mount can "
                "outlive it until the server's lease expires."
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    try:
        words = [os.path.basename(a) for a in sys.argv[:3] if not a.startswith("-") and "=" not in a]
        me = f"pid {os.getpid()} on {socket.gethostname()} ({' '.join(words)})"
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.encode("utf-8", "replace"), 0)
    except OSError:
        pass  # naming the holder is a courtesy; the lock itself is held
    return fd


def _unlock_file(fd: int) -> None:
    try:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
