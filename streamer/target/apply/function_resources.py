"""Resource files of replicated functions (jars, files, archives), copied into the target's own tree.

A function created on the source names its jars by source URIs, which a target cluster may not be
able to read (or which may change later). As Hive's REPL LOAD does with
``hive.repl.replica.functions.root.dir``, the target keeps its own copies under
``<warehouse root>/_functions/<db>/<function>/`` and registers the function with those URIs. A
managed database directory is always ``<name>.db``, so ``_functions`` never collides with one.
Resource URIs carry no checksum in Hive's events: the copies are counted as unverified, and read only
as the source rules allow resources (``streamer.target.apply.sources``: below a declared prefix, else
below the stores derived from the source location the target recorded for the function's database,
``database_source_location``). A refusal names the event, the function and the resource. The
copying is the door's (``door.copy_resources``); this module only names things.
"""

from __future__ import annotations

import dataclasses
import posixpath
from urllib.parse import urlsplit

from streamer.errors import PathEscapeError
from streamer.events.model import DatabaseSnapshot, FunctionSnapshot, ResourceUri
from streamer.target.apply.by_state import SOURCE_LOCATION_PARAM
from streamer.target.apply.paths import FUNCTIONS_DIR, TargetPaths, check_name


def resource_dir(paths: TargetPaths, db: str, name: str) -> str:
    """Where the target keeps the resources of function ``db.name``."""
    return paths.warehouse.join(FUNCTIONS_DIR, check_name("database", db), check_name("function", name))


def _file_name(uri: str) -> str:
    name = posixpath.basename(urlsplit(uri).path.rstrip("/"))
    check_name("resource file", name)
    return name


def database_source_location(db: DatabaseSnapshot | None) -> str | None:
    """Where the source keeps target database ``db``, as the target recorded it from the database's
    own events (``databases``: ``SOURCE_LOCATION_PARAM``); None when it recorded none."""
    return db.parameters.get(SOURCE_LOCATION_PARAM) if db is not None else None


def target_resources(paths: TargetPaths, fn: FunctionSnapshot) -> FunctionSnapshot:
    """``fn`` (target names) naming the target's copies of its resources; refuses two resources named
    alike (one copy would replace the other)."""
    if not fn.resource_uris:
        return fn
    dest = resource_dir(paths, fn.db, fn.name)
    names = [_file_name(r.uri) for r in fn.resource_uris]
    if len(set(names)) != len(names):
        raise PathEscapeError(
            f"function {fn.db}.{fn.name} has two resources named alike: {names}", obj=fn.name
        )
    uris = [ResourceUri(r.resource_type, f"{dest}/{n}") for r, n in zip(fn.resource_uris, names, strict=True)]
    return dataclasses.replace(fn, resource_uris=uris)
