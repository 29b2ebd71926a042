"""The one check every filesystem change on a target goes through (DESIGN invariant 7).

A handler changes one object: a database, a table, a partition, a function's resources. Its target
directory (``obj_dir``) is derived by ``TargetPaths`` from the object's names (managed) or from its
source location (external), never from a file's own URI. Every function that creates, renames,
links, replaces or deletes anything on a target (``files``: staging, publishing, clearing, moving,
linking, removing; ``swap``: the directory exchange) first calls ``check_write(url, obj_dir, roots)``,
which refuses unless

- ``obj_dir`` lies strictly inside a target root (the warehouse root or the external base dir):
  never a root itself, whose change would reach every object below it, and never outside;
- ``url`` is ``obj_dir`` or lies below it, on the same filesystem, without ``.``/``..`` segments;
- no path component between the root and ``url`` is a symlink (it could point anywhere).

So an event about one object can change only that object's directory, and whatever it names, a
target root and what lies beside it stay untouched. Errors are ``PathEscapeError`` naming the path;
the applier adds the event and halts its database.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from fsspec.implementations.local import LocalFileSystem

from streamer.errors import PathEscapeError
from streamer.filesystems import url_to_fs
from streamer.target.apply.paths import Root


def check_write(url: str, obj_dir: str, roots: Sequence[Root], *, event_id: int | None = None) -> None:
    """Allow a change of ``url`` on behalf of the object whose target directory is ``obj_dir``.

    Without ``roots`` (a copier used outside the applier, e.g. by a benchmark) only the second rule
    applies: there is no root to hold the directory to.
    """
    if roots:
        object_root(obj_dir, roots, event_id=event_id)
    try:
        base = Root.parse(obj_dir)
    except PathEscapeError as exc:
        raise PathEscapeError(exc.cause, event_id=event_id, obj=obj_dir) from exc
    if not base.contains(url):
        cause = f"{url} is not inside {obj_dir}, the directory of the object being changed"
        raise PathEscapeError(cause, event_id=event_id, obj=url)
    if roots:
        ensure_no_symlinks(url, roots, event_id=event_id)


def object_root(obj_dir: str, roots: Sequence[Root], *, event_id: int | None = None) -> Root:
    """The root ``obj_dir`` lies strictly inside; ``PathEscapeError`` for a root itself or outside."""
    for root in roots:
        if root.strictly_contains(obj_dir):
            return root
    if any(root.contains(obj_dir) for root in roots):
        raise PathEscapeError("refusing to change a target root itself", event_id=event_id, obj=obj_dir)
    raise PathEscapeError(f"path {obj_dir!r} is outside the target roots", event_id=event_id, obj=obj_dir)


def inside_a_root(url: str, roots: Sequence[Root]) -> bool:
    """Whether ``url`` is a root or lies below one (where a swap may build its hidden directories)."""
    return any(root.contains(url) for root in roots)


def ensure_no_symlinks(url: str, roots: Sequence[Root], *, event_id: int | None = None) -> None:
    """Refuse to write through a symlink below a root: it could point anywhere (DESIGN invariant 7)."""
    fs, path = url_to_fs(url)
    if not isinstance(fs, LocalFileSystem):
        return  # object stores and HDFS as used here have no symlinks
    for root in roots:
        if root.contains(url):
            base = root.path.rstrip("/")
            rel = path[len(base) :].strip("/") if path.startswith(base) else ""
            current = base
            for seg in [s for s in rel.split("/") if s]:
                current = f"{current}/{seg}"
                try:
                    mode = os.lstat(current).st_mode  # one call per component: every write passes here
                except (OSError, ValueError):  # absent below here (as os.path.lexists reads it)
                    return
                if stat.S_ISLNK(mode):
                    cause = f"{current} is a symlink inside the target root"
                    raise PathEscapeError(cause, event_id=event_id, obj=url)
            return
    if roots:
        raise PathEscapeError(f"path {url!r} is outside the target roots", event_id=event_id, obj=url)
