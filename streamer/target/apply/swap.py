"""Publishing an INSERT's files into a directory readers already list, as one atomic switch.

Renaming staged files into place one by one lets a reader that lists the directory in between see
some of the new files but not all, and an INSERT OVERWRITE show old and new files together: states
the source never had (DESIGN invariant 2). On a local filesystem the directory's next state is built
beside it instead, in a hidden sibling (``.<name>.streamer-swap-<event id>``; the directory is an
object's, strictly inside a target root, so its siblings are inside that root too): hard links of the
files that stay, plus the staged files moved in; one ``renameat2(RENAME_EXCHANGE)`` then swaps the
two directories, so a reader lists either the old directory or the new one. The old tree, now
under the hidden name, is renamed aside (``.<name>.streamer-old-...``) and removed only after
``GRACE_SECONDS``: a reader that opened the old directory just before the switch is still listing
it, and deleting its entries under it would show that reader part of the old state. Files are
linked, never copied, and open readers keep their inodes.

Staging files (``.streamer-tmp-*``) found in a set-aside tree are removed at once: the step that
staged into the directory has just published, so any other is a killed process's copy that no one
will finish, and readers skip hidden names. A process stopped within a grace period leaves its trees
behind; the next one adopts them (``adopt_leftovers``, run once per root in the background on its
first publish, and beside every publish): removed when their own grace is over, never earlier, so
nothing is left forever and nothing a reader may still list is deleted.

A dropped object's directory is set aside the same way (``remove_aside``): one rename hides it
whole, and the reaper deletes it after the grace period instead of the step deleting it file by file.

An append that moves one file straight into the directory needs no swap: that file's rename is the
one switch, so nothing is re-linked (the cost no longer grows with the directory) and nothing set
aside; the killed copies' staging files in the directory are removed after it as a swap would.

Where that is impossible (a filesystem or kernel without RENAME_EXCHANGE, object stores, a
directory too large to re-link on every insert) ``publish_swapped`` returns None and the applier
publishes file by file. A crash leaves at most a hidden sibling, which the replay of the same event
sets aside like a replaced tree (it may be the old tree a reader lists) before building it again.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import heapq
import logging
import os
import shutil
import stat
import threading
import time
from collections.abc import Sequence

from fsspec.implementations.local import LocalFileSystem

from streamer.errors import ApplyError, PathEscapeError
from streamer.filesystems import url_to_fs
from streamer.hive.files import is_hidden
from streamer.target.apply.dir_fsync import fsync_dir
from streamer.target.apply.files import OLD_INFIX, SWAP_INFIX, TMP_PREFIX, CopyReport, Staged
from streamer.target.apply.guard import check_write, inside_a_root
from streamer.target.apply.paths import Root

log = logging.getLogger(__name__)

GRACE_SECONDS = 60.0  # how long a replaced tree stays (hidden) for readers still listing it
MAX_RELINKED = 10_000  # entries of the old directory re-linked per insert before falling back
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV})
_support: dict[int, bool] = {}  # st_dev -> RENAME_EXCHANGE works there


def exchange(a: str, b: str) -> None:
    """Atomically swap two paths (Linux ``renameat2`` with ``RENAME_EXCHANGE``); OSError otherwise."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available", a)
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), a)


def supports_exchange(directory: str) -> bool:
    """Whether directories inside ``directory`` can be exchanged (probed once per filesystem)."""
    device = os.stat(directory).st_dev
    known = _support.get(device)
    if known is not None:
        return known
    # per thread: two lanes may probe one filesystem at once
    probe = os.path.join(directory, f"{SWAP_INFIX}probe-{os.getpid()}-{threading.get_ident()}")
    first, second = probe + "-a", probe + "-b"
    try:
        os.makedirs(first, exist_ok=True)
        os.makedirs(second, exist_ok=True)
        exchange(first, second)
        works = True
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise
        works = False
    finally:
        for path in (first, second):
            shutil.rmtree(path, ignore_errors=True)
    _support[device] = works
    if not works:
        log.warning("this filesystem cannot exchange directories atomically (%s): INSERTs publish file "
                    "by file there, and readers may see part of one while it is applied", directory)
    return works


def publish_swapped(
    staged: Staged, directory_url: str, *, replace: bool, roots: Sequence[Root], event_id: int | None
) -> CopyReport | None:
    """Make ``staged`` (all inside ``directory_url``) visible in one switch; with ``replace`` the
    directory then holds only them (and its hidden entries). None: not possible here, nothing done."""
    fs, directory = url_to_fs(directory_url)
    directory = directory.rstrip("/")
    if not isinstance(fs, LocalFileSystem):
        return None
    if not all(isinstance(f.fs, LocalFileSystem) for f in staged.files):
        return None
    if any(os.path.commonpath([directory, f.path]) != directory for f in staged.files):
        return None  # files outside the directory (external layouts): file by file
    parent, name = os.path.split(directory)
    # before anything is written near it: the directory is an object's, strictly inside a root, so
    # its parent (where the hidden trees are built) is inside a root too, never a root's parent
    check_write(directory_url, directory_url, roots, event_id=event_id)
    if roots and not inside_a_root(directory_url.rstrip("/").rsplit("/", 1)[0], roots):
        cause = "a swap beside it would be outside the roots"
        raise PathEscapeError(cause, event_id=event_id, obj=directory_url)
    exists = os.path.isdir(directory)
    if not replace and exists and _one_rename_at_most(staged, directory):
        _adopt_in_background(roots)
        try:
            own = {f.temp for f in staged.files if f.temp is not None}
            strays = _staging_leftovers(directory, own, event_id=event_id, obj=directory_url)
        except PathEscapeError:
            staged.discard()
            raise
        report = staged.publish()  # one rename is one switch: nothing to build beside the directory
        for path in strays:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return report
    if not os.path.isdir(parent) or not supports_exchange(parent):
        return None
    if exists and _too_large(directory):
        return None
    shadow = os.path.join(parent, f".{name}{SWAP_INFIX}{event_id or 0}")
    _adopt_in_background(roots)
    try:
        _adopt(parent)
        if os.path.lexists(shadow):  # a crash's leftover, rebuilt from scratch
            _set_aside(shadow, parent, name)
        os.mkdir(shadow)
        if exists:
            _link_tree(directory, shadow, replace=replace, event_id=event_id, obj=directory_url)
        for f in staged.files:
            target = os.path.join(shadow, os.path.relpath(f.path, directory))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if f.temp is not None:
                os.replace(f.temp, target)
                f.temp = None
            elif not os.path.exists(target):  # verified in place already (a replay): keep it
                os.link(f.path, target, follow_symlinks=False)
        _fsync_tree(shadow)
        if exists:
            exchange(shadow, directory)
        else:
            os.rename(shadow, directory)
        _fsync(parent)
        if exists:  # the old tree, now hidden: removed once readers listing it are done
            _set_aside(shadow, parent, name)
    except PathEscapeError:
        staged.discard()
        raise
    except OSError as exc:
        staged.discard()
        raise ApplyError(f"cannot publish into {directory_url}: {exc}", event_id=event_id,
                         obj=directory_url) from exc
    return staged.published()


def remove_aside(url: str, roots: Sequence[Root], *, event_id: int | None) -> str | None:
    """Remove a dropped object's directory ``url`` with one rename: gone at once for a reader listing
    its parent (deleted in place, its files would go one by one), set aside like a replaced tree and
    deleted by the reaper after the grace period, off the step. Returns the parent whose entry changed
    (for the caller to sync; ``url`` absent, a replay: the parent too). None: not possible here (not a
    local filesystem, a parent outside the roots, a refused rename), nothing done."""
    fs, path = url_to_fs(url)
    if not isinstance(fs, LocalFileSystem):
        return None
    check_write(url, url, roots, event_id=event_id)
    if roots and not inside_a_root(url.rstrip("/").rsplit("/", 1)[0], roots):
        return None
    path = path.rstrip("/")
    parent, name = os.path.split(path)
    if not os.path.lexists(path):
        return parent
    _adopt_in_background(roots)
    try:
        _set_aside(path, parent, name)
    except OSError as exc:  # a mount point, a full directory: deleted in place instead
        log.debug("event %s: %s not set aside (%s): deleting it in place", event_id, url, exc)
        return None if os.path.lexists(path) else parent
    return parent


def _one_rename_at_most(staged: Staged, directory: str) -> bool:
    """Whether an append into the existing ``directory`` shows whole by renaming its files one by
    one: it moves at most one file, straight into it (a new subdirectory, an ACID delta's, would
    show before its file; a directory that is not there yet appears whole by the swap)."""
    moving = [f for f in staged.files if f.temp is not None]
    return len(moving) <= 1 and all(os.path.dirname(f.path) == directory for f in moving)


def _staging_leftovers(directory: str, own: set[str], *, event_id: int | None, obj: str) -> list[str]:
    """The staging files in ``directory``'s tree other than ``own``: a killed process's copies (the
    steps of one directory run one at a time), to remove once this one is published, as a swap's
    set-aside drops them. A symlink in the tree is refused, as a swap refuses to re-link one. One
    ``scandir`` per directory, no ``stat`` per file."""
    found: list[str] = []
    pending = [directory]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except FileNotFoundError:
            continue
        for entry in entries:
            if entry.is_symlink():
                raise PathEscapeError(f"{entry.path} is a symlink inside the target root", event_id=event_id,
                                      obj=obj)
            if entry.is_dir(follow_symlinks=False):
                if SWAP_INFIX not in entry.name and OLD_INFIX not in entry.name:
                    pending.append(entry.path)
            elif entry.name.startswith(TMP_PREFIX) and entry.path not in own:
                found.append(entry.path)
    return found


class _Reaper:
    """One daemon thread removing set-aside trees once their grace period is over (a timer thread
    per insert would pile up under a high insert rate)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, str]] = []
        self._scheduled: set[str] = set()  # each tree once, however often a sweep finds it
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def scheduled(self, path: str) -> bool:
        with self._cond:
            return path in self._scheduled

    def add(self, path: str, delay: float) -> None:
        with self._cond:
            if path in self._scheduled:
                return
            self._scheduled.add(path)
            heapq.heappush(self._due, (time.monotonic() + delay, path))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="streamer-swap-reaper", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._cond.wait(None if not self._due else self._due[0][0] - time.monotonic())
                _, path = heapq.heappop(self._due)
                self._scheduled.discard(path)
            shutil.rmtree(path, ignore_errors=True)


_reaper = _Reaper()
_adopted_roots: set[str] = set()
_adopted_lock = threading.Lock()


def _set_aside(tree: str, parent: str, name: str) -> None:
    """Rename ``tree`` (a replaced directory, hidden) aside, drop its staging files and remove it
    after the grace period: a reader may be listing it, but none reads a staging file."""
    aside = os.path.join(parent, f".{name}{OLD_INFIX}{time.time_ns()}")
    os.rename(tree, aside)
    _drop_staging(aside)
    _reaper.add(aside, GRACE_SECONDS)


def _drop_staging(tree: str) -> None:
    """Remove the staging files in a set-aside tree now: they belong to copies of a process that was
    killed (a live copy's staging file is in its directory, never in a replaced one), no reader
    reads hidden names, and kept for the grace period they would outlive the restart's convergence."""
    for current, _dirs, files in os.walk(tree):
        for entry in files:
            if entry.startswith(TMP_PREFIX):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(current, entry))


def _old_stamp(entry: str) -> int | None:
    """When a set-aside tree named ``entry`` was set aside (ns since the epoch); None: not one."""
    _, sep, stamp = entry.rpartition(OLD_INFIX)
    return int(stamp) if sep and entry.startswith(".") and stamp.isdigit() else None


def _adopt_one(path: str, stamp: int) -> None:
    """A set-aside tree this process may not know (its maker stopped before removing it): removed
    now when its grace is over, else stripped of staging files and removed when it is."""
    left = (stamp - time.time_ns()) / 1e9 + GRACE_SECONDS
    if left <= 0:
        shutil.rmtree(path, ignore_errors=True)
    elif not _reaper.scheduled(path):
        _drop_staging(path)
        _reaper.add(path, left)


def _adopt(parent: str) -> None:
    """Adopt the set-aside trees in ``parent`` (the directory a publish is about to change)."""
    for entry in os.listdir(parent):
        stamp = _old_stamp(entry)
        if stamp is not None:
            _adopt_one(os.path.join(parent, entry), stamp)


def adopt_leftovers(root: str) -> None:
    """Adopt every set-aside tree under the local directory ``root``: those a stopped process left
    beside directories nothing publishes into again would otherwise stay forever."""
    for current, dirs, _files in os.walk(root):
        keep = []
        for d in dirs:
            stamp = _old_stamp(d)
            if stamp is not None:
                _adopt_one(os.path.join(current, d), stamp)
            elif SWAP_INFIX not in d:
                keep.append(d)
        dirs[:] = keep


def _adopt_in_background(roots: Sequence[Root]) -> None:
    """Run ``adopt_leftovers`` once per local root in this process, off the apply path (a walk of
    the whole root); it only touches set-aside trees, so it may run beside publishes."""
    with _adopted_lock:
        todo = [r.path for r in roots if r.scheme in ("", "file") and r.path not in _adopted_roots]
        _adopted_roots.update(todo)
    if todo:
        threading.Thread(target=_adopt_all, args=(todo,), name="streamer-swap-adopt", daemon=True).start()


def _adopt_all(paths: list[str]) -> None:
    """The background half of ``_adopt_in_background``: a failure only logs (the next start retries)."""
    for path in paths:
        try:
            adopt_leftovers(path)
        except OSError as exc:  # a background tidy-up: the next start tries again
            log.warning("could not look for set-aside trees under %s: %s", path, exc)


def _too_large(directory: str) -> bool:
    count = 0
    for _current, dirs, files in os.walk(directory):
        count += len(dirs) + len(files)
        if count > MAX_RELINKED:
            log.info("%s holds over %d entries: publishing file by file", directory, MAX_RELINKED)
            return True
    return False


def _link_tree(src: str, dst: str, *, replace: bool, event_id: int | None, obj: str) -> None:
    """Hard-link what stays of ``src`` into ``dst``: everything but staging leftovers, or with
    ``replace`` only the hidden top-level entries (an overwrite replaces every visible one)."""
    for current, dirs, files in os.walk(src):
        rel = os.path.relpath(current, src)
        top = rel == "."
        for d in dirs:
            if os.path.islink(os.path.join(current, d)):
                cause = f"{os.path.join(current, d)} is a symlink inside the target root"
                raise PathEscapeError(cause, event_id=event_id, obj=obj)
        dirs[:] = [
            d for d in dirs
            if SWAP_INFIX not in d and OLD_INFIX not in d and not (top and replace and not is_hidden(d))
        ]
        target_dir = dst if top else os.path.join(dst, rel)
        os.makedirs(target_dir, exist_ok=True)
        for entry in files:
            if entry.startswith(TMP_PREFIX) or (top and replace and not is_hidden(entry)):
                continue
            path = os.path.join(current, entry)
            if stat.S_ISLNK(os.lstat(path).st_mode):
                cause = f"{path} is a symlink inside the target root"
                raise PathEscapeError(cause, event_id=event_id, obj=obj)
            os.link(path, os.path.join(target_dir, entry), follow_symlinks=False)


def _fsync_tree(root: str) -> None:
    for current, _dirs, _files in os.walk(root):
        _fsync(current)


def _fsync(directory: str) -> None:
    fsync_dir(directory, missing_ok=False)
