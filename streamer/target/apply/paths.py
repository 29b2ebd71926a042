"""Where things live on a target: every path derived from the target's own roots (DESIGN invariant 7).

Managed databases, tables and partitions get Hive's default layout under the warehouse root
(``<root>/<db>.db/<table>/<k=v/...>``), derived from the object names and never from the source's
locations. External tables keep their source path below the external base dir (as Hive's
``hive.repl.replica.external.table.base.dir``), namespaced by the source filesystem's scheme and
authority (``<base>/<scheme>/<authority>/<path>``, the ``authority`` layout) so that several sources
and namenodes can share one target without collisions; the ``path`` layout (``<base>/<path>``) is
the one replicas made before it keep (docs/features.md). A location that is a filesystem's root is
refused: its directory would hold every other external table of that filesystem.

Everything here is pure string work; the symlink check needs the filesystem and lives in
``streamer.target.apply.files``. Errors are ``PathEscapeError`` naming the object; the applier adds the
event id.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from streamer.errors import PathEscapeError
from streamer.events.model import PartitionSnapshot, TableSnapshot
from streamer.filesystems import same_store
from streamer.hive.files import partition_name as hive_partition_name

# Hive's FileUtils.escapePathName escapes these (plus control characters) in partition values.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")
_AUTHORITY = re.compile(r"^[a-z0-9._+\-\[\]]+$")
EXTERNAL_TYPES = frozenset({"EXTERNAL_TABLE"})
EXTERNAL_LAYOUTS = ("authority", "path")
NO_AUTHORITY = "_"  # the authority segment of a location without one (``file:/x``, ``hdfs:///x``)
VIEW_TYPES = frozenset({"VIRTUAL_VIEW", "MATERIALIZED_VIEW"})
FUNCTIONS_DIR = "_functions"  # <warehouse root>/_functions/<db>/<function>: resources (function_resources)


def partition_name(keys: list[str], values: list[str]) -> str:
    """Hive's partition name ``k=v/k2=v2``; a key/value mismatch is a path error naming the keys, and
    so is a spec of no key: its name is empty, its directory its table's own."""
    if not keys:
        raise PathEscapeError(f"partition {values!r} names no partition key: a table without partition "
                              "keys has no partitions")
    try:
        return hive_partition_name(keys, values)
    except ValueError as exc:
        raise PathEscapeError(str(exc)) from exc


def check_name(kind: str, name: str) -> str:
    """A database, table or key name that is safe as one path segment (lower-cased, as Hive does)."""
    bad = (
        not name
        or name in (".", "..")
        or any(c in name for c in "/\\%")
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)
    )
    if bad:
        raise PathEscapeError(f"{kind} name {name!r} cannot be a path segment", obj=name)
    return name.lower()


@dataclass(frozen=True)
class Root:
    """A root split into scheme, authority and a normalised absolute path."""

    scheme: str
    netloc: str
    path: str

    @classmethod
    def parse(cls, url: str) -> Root:
        parts = urlsplit(url)
        path = parts.path.rstrip("/") or "/"
        if not path.startswith("/") or parts.query or parts.fragment:
            raise PathEscapeError(f"root {url!r} must be an absolute path or URL without query/fragment")
        check_segments(path, url)
        return cls(parts.scheme.lower(), parts.netloc, path)

    def join(self, *segments: str) -> str:
        path = posixpath.join(self.path, *segments) if segments else self.path
        return self.url(path)

    def url(self, path: str) -> str:
        if self.scheme:
            return f"{self.scheme}://{self.netloc}{path}"
        return path

    def contains(self, url: str) -> bool:
        """True when ``url`` is this root or strictly below it, on the same scheme and authority."""
        parts = urlsplit(url)
        if _filesystem(parts.scheme, parts.netloc) != _filesystem(self.scheme, self.netloc):
            return False
        if parts.query or parts.fragment:
            return False
        try:
            check_segments(parts.path, url)
        except PathEscapeError:
            return False
        base = self.path.rstrip("/")
        return parts.path == self.path or parts.path.startswith(base + "/")

    def strictly_contains(self, url: str) -> bool:
        """True when ``url`` lies below this root, never the root itself."""
        return self.contains(url) and urlsplit(url).path.rstrip("/") != self.path.rstrip("/")


def same_filesystem(a: str, b: str) -> bool:
    """Whether two URLs name the same filesystem (``/x``, ``file:/x`` and ``file:///x`` do)."""
    pa, pb = urlsplit(a), urlsplit(b)
    return _filesystem(pa.scheme, pa.netloc) == _filesystem(pb.scheme, pb.netloc)


def _namespace(scheme: str, netloc: str, what: str) -> tuple[str, str]:
    """The two segments naming a source filesystem below the external base dir: its store
    (``file``, ``hdfs``, ``s3``: ``s3a`` is the same store) and its host[:port] (``:`` spelled ``+``,
    which HDFS accepts in names; no user or secret ever lands in a path; ``_`` when there is none)."""
    store, authority = _filesystem(scheme, netloc)
    host = authority.rpartition("@")[2].lower().replace(":", "+") or NO_AUTHORITY
    if host in (".", "..") or not _AUTHORITY.match(host):
        raise PathEscapeError(f"the authority of {what!r} cannot be a path segment", obj=what)
    return store, host


def _filesystem(scheme: str, netloc: str) -> tuple[str, str]:
    """Which filesystem a URL names: ``/x``, ``file:/x`` and ``file:///x`` are all the local one.

    A metastore hands back ``file:/x`` for a location stored as ``file:///x``; both are the same place.
    ``s3a://b/x`` (Hadoop's, Hive's spelling) and ``s3://b/x`` are one object too; another bucket is not.
    """
    scheme = scheme.lower()
    if scheme in ("", "file") and netloc in ("", "localhost"):
        return ("file", "")
    return (same_store(scheme), netloc)


def check_segments(path: str, what: str, *, strict: bool = False) -> None:
    """Reject ``.``/``..`` segments (also percent-encoded), empty segments, NUL and backslashes.

    ``strict`` (for locations taken from events) also rejects a segment that decodes to a path with a
    dot segment (``a%2F..%2Fb``), which some filesystems would decode; derived paths need not, since
    Hive's escaping turns every ``/`` of a partition value into ``%2F`` within one segment.
    """
    if "\x00" in path or "\\" in path:
        raise PathEscapeError(f"path {what!r} contains NUL or a backslash", obj=what)
    segments = path.split("/")[1:]
    if segments and segments[-1] == "":
        segments.pop()  # one trailing slash is harmless
    for seg in segments:
        decoded = seg
        for _ in range(3 if "%" in seg else 0):  # %252e%252e as well as %2e%2e
            decoded = unquote(decoded)
        parts = decoded.replace("\\", "/").split("/") if strict else [decoded]
        if seg == "" or "\x00" in decoded or any(p in (".", "..") for p in parts):
            cause = f"path {what!r} has an empty, '.' or '..' segment (maybe percent-encoded)"
            raise PathEscapeError(cause, obj=what)


class TargetPaths:
    """Derives target locations; every result is checked to lie inside its root."""

    def __init__(
        self, warehouse_root: str, external_base_dir: str | None = None, external_layout: str = "authority"
    ) -> None:
        self.warehouse = Root.parse(warehouse_root)
        self.external = Root.parse(external_base_dir) if external_base_dir else None
        if external_layout not in EXTERNAL_LAYOUTS:
            raise PathEscapeError(f"external layout {external_layout!r} is not one of {EXTERNAL_LAYOUTS}")
        self.external_layout = external_layout

    @property
    def roots(self) -> list[Root]:
        return [self.warehouse] + ([self.external] if self.external else [])

    # --- managed layout -------------------------------------------------------------------
    def database_location(self, db: str) -> str:
        return self.warehouse.join(f"{check_name('database', db)}.db")

    def table_location(self, db: str, table: str) -> str:
        return self.warehouse.join(f"{check_name('database', db)}.db", check_name("table", table))

    def partition_location(self, db: str, table: str, keys: list[str], values: list[str]) -> str:
        for key in keys:
            check_name("partition key", key)
        return self.table_location(db, table) + "/" + partition_name(keys, values)

    # --- external layout ------------------------------------------------------------------
    def external_location(self, source_location: str, obj: str | None = None) -> str:
        """``<external base dir>/<scheme>/<authority>`` + the source location's path (``path`` layout:
        without the two namespace segments); a filesystem's root is refused."""
        what = obj or source_location
        if self.external is None:
            raise PathEscapeError("an external table needs --external-base-dir on the target", obj=what)
        parts = urlsplit(source_location)
        if parts.scheme and not _SCHEME.match(parts.scheme):
            raise PathEscapeError(f"bad scheme in {source_location!r}", obj=what)
        path = parts.path
        if not path.startswith("/") or parts.query or parts.fragment:
            raise PathEscapeError(f"source location {source_location!r} is not an absolute path", obj=what)
        check_segments(path, source_location, strict=True)
        path = path.rstrip("/")
        if not path:
            raise PathEscapeError(
                f"source location {source_location!r} is the root of its filesystem: its target directory "
                "would hold every other external table there",
                obj=what,
            )
        base = self.external.path.rstrip("/")
        if self.external_layout == "authority":
            scheme, authority = _namespace(parts.scheme, parts.netloc, source_location)
            base = f"{base}/{scheme}/{authority}"
        result = self.external.url(base + path)
        if not self.external.strictly_contains(result):
            raise PathEscapeError(f"path {result!r} is not below the external base dir", obj=what)
        return result

    def external_source(self, target_dir: str) -> str:
        """The source location an external target directory of the ``authority`` layout mirrors
        (``external_location``'s inverse; the round trip is the caller's check)."""
        if self.external is None or not self.external.strictly_contains(target_dir):
            raise PathEscapeError(f"{target_dir} is not under the external base dir", obj=target_dir)
        rel = urlsplit(target_dir).path[len(self.external.path.rstrip("/")) :].strip("/")
        scheme, _, rest = rel.partition("/")
        authority, _, path = rest.partition("/")
        if not (scheme and authority and path):
            raise PathEscapeError(f"{target_dir} is not <base>/<scheme>/<authority>/<path>", obj=target_dir)
        netloc = "" if authority == NO_AUTHORITY else authority.replace("+", ":")
        return f"{scheme}://{netloc}/{path}"

    # --- objects --------------------------------------------------------------------------
    def table_target(self, table: TableSnapshot) -> str | None:
        """The target location of a table (``None`` for views): managed derived, external mapped."""
        if table.table_type in VIEW_TYPES:
            return None
        if table.table_type in EXTERNAL_TYPES:
            if not table.sd.location:
                raise PathEscapeError("external table without a location", obj=table.qualified_name)
            return self.external_location(table.sd.location, table.qualified_name)
        return self.table_location(table.db, table.name)

    def partition_target(self, table: TableSnapshot, partition: PartitionSnapshot) -> str:
        """Managed partitions sit under the derived table dir; external ones keep their source path."""
        keys = [c.name for c in table.partition_keys]
        obj = f"{table.qualified_name}/{partition_name(keys, partition.values)}"
        if table.table_type in EXTERNAL_TYPES and partition.sd.location:
            return self.external_location(partition.sd.location, obj)
        if table.table_type in EXTERNAL_TYPES:
            base = self.table_target(table)
            assert base is not None
            return self.ensure_inside(base + "/" + partition_name(keys, partition.values), obj)
        return self.partition_location(table.db, table.name, keys, partition.values)

    def ensure_inside(self, url: str, obj: str | None = None) -> str:
        """Return ``url`` if it lies inside one of the roots, else raise ``PathEscapeError``."""
        if any(root.contains(url) for root in self.roots):
            return url
        raise PathEscapeError(f"path {url!r} is outside the target roots", obj=obj or url)

    def relative_file(self, name: str, obj: str | None = None) -> str:
        """Check a relative file path (``delta_5_5/bucket_0``) taken from an event before joining it."""
        if not name or name.startswith("/"):
            raise PathEscapeError(f"file name {name!r} is empty or absolute", obj=obj or name)
        try:
            check_segments("/" + name, name, strict=True)
        except PathEscapeError as exc:  # name the file the event carried, not just the bad part
            raise PathEscapeError(exc.cause, obj=obj or name) from exc
        if name.endswith("/"):
            raise PathEscapeError(f"file name {name!r} names a directory", obj=obj or name)
        return name
