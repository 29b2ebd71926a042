"""Who owns each external directory on a target, so that one source's record never takes another's.

An external table's target directory is derived from its source location alone
(``TargetPaths.external_location``), so two sources (or two spellings of one authority:
``hdfs://NN-B:8020``, ``hdfs://user@nn-b:8020``) naming the same source path share one target
directory, and a record of one could swap the other's replica away with an empty INSERT OVERWRITE
while reading no file at all. Every external directory a handler places a table or partition in is
therefore *claimed* first: the claim records its owner (source id and target table) in streamer's
own tree of the warehouse root, beside the ACID visibility files that target jobs sharing a target
share too, ``<warehouse root>/_streamer/external-owners/<the directory's path relative to the
external base dir>/owner.json`` (nothing is added below the external base dir), and is
refused when another source already owns that directory, one that contains it, or one inside it.

A claim whose owner no longer exists on the target (its table dropped, or no longer that source's)
is stale and is taken over. Within one source, two tables may share a directory, as they do on the
source. With declared ``--source-prefix``es an external location must also be on a filesystem one
of them names (scheme and authority): the operator's declaration is the list of authorities external
data may come from. A location carrying userinfo (``hdfs://user@nn/x``) is refused: a location never needs it,
and it would only be a second spelling of another directory. Errors are ``PathEscapeError`` naming
the table and both owners; the applier adds the event and halts the database.

Two target jobs claiming one directory at the same instant can both succeed (the check and the
write are two calls on filesystems without an atomic create); claims are rare (one per directory
per replica's life), and the next event of either re-checks nothing it cached. Docs:
docs/security.md, "External directories have one owner".
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from streamer.errors import PathEscapeError
from streamer.filesystems import url_to_fs
from streamer.target.apply.paths import Root, TargetPaths, same_filesystem

REGISTRY_DIR = "_streamer/external-owners"  # below the warehouse root
OWNER_FILE = "owner.json"


@dataclass(frozen=True)
class Owner:
    """Who replicates into an external directory: a source id and a target table ``db.table``."""

    source_id: str
    table: str

    def describe(self) -> str:
        return f"table {self.table} of source {self.source_id!r}"


Exists = Callable[[Owner], bool]
"""Whether an owner's table still exists on the target as that source's (else its claim is stale)."""


def check_location(source_location: str, prefixes: tuple[Root, ...], obj: str) -> None:
    """Refuse an external source location with userinfo, or (when any ``--source-prefix`` is
    declared) on a filesystem none of them names: the declared prefixes are the authorities
    external data may come from."""
    parts = urlsplit(source_location)
    if "@" in parts.netloc:
        raise PathEscapeError(
            f"external location {source_location} carries userinfo; a location names a filesystem and "
            "a path, and this spelling would only alias another directory", obj=obj,
        )
    if prefixes and not any(_same_authority(p, source_location) for p in prefixes):
        named = ", ".join(p.url(p.path) for p in prefixes)
        raise PathEscapeError(
            f"external location {source_location} is on a filesystem no --source-prefix names ({named}): "
            "declare a prefix on it, or remove every --source-prefix", obj=obj,
        )


def _same_authority(prefix: Root, url: str) -> bool:
    """Same filesystem, the authority compared as DNS does (``hdfs://NN`` is ``hdfs://nn``)."""
    parts = urlsplit(url)
    return same_filesystem(prefix.url("/").lower(), parts._replace(path="/").geturl().lower())


class ExternalOwners:
    """The claims of one target's external base dir, checked and recorded by one source's applier."""

    def __init__(self, paths: TargetPaths, source_id: str) -> None:
        self.paths = paths
        self.source_id = source_id
        self._claimed: dict[str, str] = {}  # target dir path -> table: checked whole by this process
        self._free: set[str] = set()  # dir paths found held by no other source (``check_free``)

    def claim(self, target_dir: str, table: str, exists: Exists) -> None:
        """Record ``table`` of this source as the owner of ``target_dir`` (an external directory);
        ``PathEscapeError`` when another source owns it, a directory containing it, or one inside it.
        ``exists`` asks the caller's catalog (a lane's own) whether a claim is still live."""
        base = self.paths.external
        if base is None or not base.strictly_contains(target_dir):
            return  # not an external directory (a managed one is derived from owned names)
        key = urlsplit(target_dir).path.rstrip("/")
        me = Owner(self.source_id, table)
        fs, registry = url_to_fs(self.paths.warehouse.join(*REGISTRY_DIR.split("/")))
        rel = key[len(base.path.rstrip("/")) :].strip("/")
        mine = posixpath.join(registry, rel, OWNER_FILE)
        if key in self._claimed:  # checked before: one read says it is still this source's
            current = self._owner(fs, mine)
            if current is not None and current.source_id == me.source_id:
                return
            del self._claimed[key]
        segments = rel.split("/")
        for depth in range(1, len(segments) + 1):  # the directories holding it, then itself
            here = "/".join(segments[:depth])
            other = self._owner(fs, posixpath.join(registry, here, OWNER_FILE))
            if other is not None and self._conflicts(me, other, exists):
                how = "is" if depth == len(segments) else f"lies inside {base.join(here)}, the directory of"
                raise PathEscapeError(
                    f"{target_dir} {how} {other.describe()}; refusing to place {me.describe()} there",
                    obj=table,
                )
        below = posixpath.join(registry, rel)
        if fs.isdir(below):
            for found in fs.find(below):
                if posixpath.basename(found) != OWNER_FILE or found == posixpath.join(below, OWNER_FILE):
                    continue
                other = self._owner(fs, found)
                if other is not None and self._conflicts(me, other, exists):
                    inner = base.join(posixpath.dirname(found)[len(registry.rstrip("/")) + 1 :])
                    raise PathEscapeError(
                        f"{target_dir} contains {inner}, the directory of {other.describe()}; refusing "
                        f"to place {me.describe()} there", obj=table,
                    )
        current = self._owner(fs, mine)
        if current is None or current.source_id != me.source_id or not exists(current):
            fs.makedirs(posixpath.dirname(mine), exist_ok=True)
            fs.pipe_file(mine, json.dumps({"source_id": me.source_id, "table": me.table}).encode())
        self._claimed[key] = table

    def check_free(self, url: str, exists: Exists) -> None:
        """Refuse a change of external directory ``url`` (``PathEscapeError``) when another source's
        live claim holds it (on it or a directory containing it). A claim checked whole by this process
        at or above it, or a walk found free before, answers without a read; else one read per level."""
        base = self.paths.external
        if base is None or not base.strictly_contains(url):
            return
        key = urlsplit(url).path.rstrip("/")
        if key in self._free or any(key == c or key.startswith(c + "/") for c in self._claimed):
            return
        fs, registry = url_to_fs(self.paths.warehouse.join(*REGISTRY_DIR.split("/")))
        segments = key[len(base.path.rstrip("/")) :].strip("/").split("/")
        for depth in range(1, len(segments) + 1):
            here = "/".join(segments[:depth])
            other = self._owner(fs, posixpath.join(registry, here, OWNER_FILE))
            if other is not None and other.source_id != self.source_id and exists(other):
                raise PathEscapeError(
                    f"{url} lies in {base.join(here)}, the directory of {other.describe()}; refusing to "
                    f"change it for source {self.source_id!r}", obj=url,
                )
        self._free.add(key)

    @staticmethod
    def _conflicts(me: Owner, other: Owner, exists: Exists) -> bool:
        """Another source's live claim conflicts; this source's own never does, nor a stale one."""
        return other.source_id != me.source_id and exists(other)

    @staticmethod
    def _owner(fs: object, path: str) -> Owner | None:
        try:
            raw = fs.cat_file(path)  # type: ignore[attr-defined]
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
            return Owner(str(data["source_id"]), str(data["table"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise PathEscapeError(f"unreadable owner record {path}: {exc}", obj=path) from exc
