"""Which external layout an external base dir holds, recorded in it so that it never changes silently.

``TargetPaths.external_location`` places external tables at ``<base>/<scheme>/<authority>/<path>``
(``authority``, the default) or, as replicas made before that did, at ``<base>/<path>`` (``path``).
Switching an existing replica would re-point every external table to an empty directory on its next
event, so the base dir says which one it holds: ``<base>/.streamer-external-layout`` (hidden from
Hive's readers). A base dir with visible entries and no marker was written before the marker
existed, so in the ``path`` layout. ``check_external_layout`` (the target job's start, the external
sync's) refuses a layout other than the one recorded, and records it in a new or empty base dir.
Moving a replica from one layout to the other is described in docs/features.md.
"""

from __future__ import annotations

import posixpath

from streamer.errors import ConfigError
from streamer.filesystems import url_to_fs
from streamer.hive.files import is_hidden
from streamer.target.apply.paths import TargetPaths

MARKER = ".streamer-external-layout"
LEGACY = "path"  # what a base dir with data and no marker holds


def recorded_layout(paths: TargetPaths) -> str | None:
    """The layout the external base dir holds (None: new or empty, any layout may start there)."""
    if paths.external is None:
        return None
    fs, base = url_to_fs(paths.external.join())
    marker = posixpath.join(base, MARKER)
    if fs.exists(marker):
        return str(fs.cat_file(marker).decode("utf-8").strip())
    if not fs.isdir(base):
        return None
    entries = [posixpath.basename(str(e).rstrip("/")) for e in fs.ls(base, detail=False)]
    return LEGACY if any(not is_hidden(e) for e in entries) else None


def check_external_layout(paths: TargetPaths) -> None:
    """Refuse ``paths.external_layout`` unless the base dir holds it (or nothing yet: then record it)."""
    if paths.external is None:
        return
    recorded = recorded_layout(paths)
    wanted = paths.external_layout
    base = paths.external.join()
    fs, path = url_to_fs(base)
    if recorded is None or recorded == wanted:
        marker = posixpath.join(path, MARKER)
        if not fs.exists(marker):  # new, empty, or an older replica's now named
            fs.makedirs(path, exist_ok=True)
            fs.pipe_file(marker, f"{wanted}\n".encode())
        return
    marked = fs.exists(posixpath.join(path, MARKER))
    how = "" if marked else " (no marker: it was written before streamer namespaced external tables)"
    raise ConfigError(
        f"--external-base-dir {base} holds external tables in the {recorded!r} layout{how}, not "
        f"{wanted!r}: run with --external-layout {recorded}, or move the replica to the new layout "
        "first (docs/features.md, 'External tables')"
    )
