"""What a target reads: only the source's declared stores, and only files it can verify.

An event names the files to copy by URI, and nothing but these rules stops a crafted or buggy record
from naming ``file:///etc/ssl/private/key.pem``, ``http://...`` or another table's files. The copier
(``FileCopier.stage_all``) checks every reference of a copy with ``SourceRules.check`` before it
opens any of them; a refusal is an ``UntrustedSourceError`` naming the file, and the event's
database halts. The rules (docs/security.md):

- a source URL names a filesystem: a scheme of ``STORE_SCHEMES`` (or one a declared prefix names),
  an absolute path without ``.``/``..`` segments (also percent-encoded), no query, fragment or
  fsspec chaining (``::``), and a ``file:`` URL names no host; it is not inside a target root (a
  source never keeps its data in the replica: that would copy another object's replica);
- a data file lies strictly below a declared ``--source-prefix``; where none is declared, strictly
  below the location of its own object (table or partition) as the event's snapshot names it,
  which may not be a filesystem's root;
- its change-manager copy (``cm_uri``) lies below a declared ``--source-cmroot`` (or prefix); where
  no cmroot is declared, it is named as Hive's change manager names a copy of this very file
  (``<cmroot>/<name>_<checksum>``, Hive 2.3's ``<cmroot>/<checksum>``) on the file's own filesystem;
- a data file carries a checksum, unless ``--allow-unverified-files``;
- a function resource (Hive records no checksum for them, so none is asked for) lies below a
  declared prefix; where none is declared, strictly below a store derived from the source record
  (``derived_resource_roots``): the source location of the function's database as this target
  recorded it when it created the database (never the function's own event), that location's
  warehouse root when it has Hive's ``<root>/<db>.db`` layout, and the declared cmroots. None of
  them is a filesystem's root; a ``file:`` resource is read only when such a store is a ``file:`` one;
- a directory sync (``check_sync_dir``: external tables, tables replicated by state) lists a
  directory and hashes its files itself, so no record vouches for what it copies: it reads only
  strictly below a declared ``--source-prefix`` (none declared: refused, the error names the flag;
  ``file:`` only under a ``file:`` prefix), and never inside another database's directory
  (``<name>.db`` below the prefix, for a name other than the synced object's source database).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from streamer.errors import ConfigError, PathEscapeError, UntrustedSourceError, UnverifiableFileError
from streamer.events.model import FileRef
from streamer.target.apply.paths import Root, check_segments, same_filesystem

STORE_SCHEMES = frozenset(
    {"", "file", "hdfs", "webhdfs", "viewfs", "s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb",
     "wasbs", "adl", "oss"}
)
"""Filesystems a source's tables can live on; anything else (``http``, ``ftp``, ``memory``, ``zip``,
every other protocol fsspec has) is read only below a prefix that names it."""

_Refuse = Callable[[str], UntrustedSourceError]
NO_CHECKSUM = "has no checksum to verify its copy by"  # an UnverifiableFileError's cause says so


def url_problem(url: str, schemes: Iterable[str] = ()) -> str | None:
    """Why ``url`` names no file on a source filesystem (None when it does): a scheme outside
    ``STORE_SCHEMES`` and ``schemes``, a relative path, a query, fragment or ``::`` chaining, a host
    in a ``file:`` URL, ``.``/``..`` segments (also percent-encoded)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if "::" in url:
        return f"{url!r} chains filesystems ('::')"
    if scheme not in STORE_SCHEMES and scheme not in set(schemes):
        return f"{url!r}: {scheme}:// is not a source filesystem (declare a --source-prefix on it)"
    if parts.query or parts.fragment or not parts.path.startswith("/"):
        return f"{url!r} is not an absolute path without query or fragment"
    if scheme in ("", "file") and parts.netloc not in ("", "localhost"):
        return f"{url!r} names a host for a local file"
    try:
        check_segments(parts.path, url, strict=True)
    except PathEscapeError as exc:
        return exc.cause
    return None


def derived_resource_roots(db_location: str | None, cmroots: Sequence[Root] = ()) -> tuple[Root, ...]:
    """The stores a function's resources may be read from when no ``--source-prefix`` is declared.

    ``db_location`` is the source location of the function's database as the target recorded it
    when it created (or last altered) the database, never one the function's event names: a
    record can then reach only what an earlier database record already opened. Derived: that
    location; its parent when it has Hive's default layout (``<warehouse root>/<name>.db``), where
    Hive's tools and the bundled warehouse keep jars (``<root>/lib``); ``cmroots`` (declared by the
    operator). A location that is not a source filesystem path, or is a filesystem's root, derives
    nothing, nor does a warehouse root that is one.
    """
    roots = list(cmroots)
    if not db_location or url_problem(db_location) is not None:
        return tuple(roots)
    location = Root.parse(db_location)
    if location.path == "/":
        return tuple(roots)
    roots.append(location)
    parent, name = posixpath.split(location.path)
    if name.lower().endswith(".db") and len(name) > len(".db") and parent != "/":
        roots.append(Root(location.scheme, location.netloc, parent))
    return tuple(roots)


def _declared(url: str, flag: str) -> Root:
    try:
        return Root.parse(url)
    except PathEscapeError as exc:
        raise ConfigError(f"{flag} {url!r}: {exc.cause}") from exc


@dataclass(frozen=True)
class SourceRules:
    """The operator's declared source stores and whether unverified data files are accepted."""

    prefixes: tuple[str, ...] = ()  # --source-prefix
    cmroots: tuple[str, ...] = ()  # --source-cmroot
    allow_unverified: bool = False  # --allow-unverified-files
    _prefixes: tuple[Root, ...] = field(init=False, repr=False, compare=False)
    _cmroots: tuple[Root, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_prefixes", tuple(_declared(p, "--source-prefix") for p in self.prefixes))
        object.__setattr__(self, "_cmroots", tuple(_declared(c, "--source-cmroot") for c in self.cmroots))

    def check(
        self,
        ref: FileRef,
        location: str | None,
        *,
        resource: bool = False,
        event_id: int | None = None,
        target_roots: Sequence[Root] = (),
    ) -> None:
        """Refuse ``ref`` unless every rule allows reading it; ``location`` is its object's source
        location (None when the event names none); ``resource`` marks a function's resource file,
        and then ``location`` is the source location the target recorded for the function's
        database (``derived_resource_roots``), not one taken from the function's event."""

        def refuse(cause: str) -> UntrustedSourceError:
            return UntrustedSourceError(cause, event_id=event_id, obj=ref.uri)

        for url in (ref.uri, ref.cm_uri, location):
            if url and any(root.contains(url) for root in target_roots):
                raise refuse(f"{url} is inside a target root, not on the source")
        self._hygiene(ref.uri, refuse)
        if resource:
            self._check_resource(ref.uri, location, refuse)
            return
        if not self._in(self._prefixes, ref.uri):
            if self._prefixes:
                raise refuse(f"{ref.uri} is below no --source-prefix ({self._named()})")
            self._below_location(ref.uri, location, refuse)
        if ref.cm_uri:
            self._check_cm(ref, refuse)
        if not ref.checksum and not self.allow_unverified:  # last: every location rule came first
            raise UnverifiableFileError(
                f"{ref.uri} {NO_CHECKSUM}; refused (--allow-unverified-files accepts such files)",
                event_id=event_id, obj=ref.uri,
            )

    @property
    def prefix_roots(self) -> tuple[Root, ...]:
        """The declared ``--source-prefix``es, parsed."""
        return self._prefixes

    def check_sync_dir(
        self, source_dir: str, database: str | None, *, event_id: int | None = None, obj: str | None = None
    ) -> None:
        """Refuse a directory sync of ``source_dir`` for an object of source database ``database``
        unless the operator declared where such reads may go: a sync vouches for the files it copies
        by hashing them itself, so the record that names the directory is no evidence at all."""

        def refuse(cause: str) -> UntrustedSourceError:
            return UntrustedSourceError(cause, event_id=event_id, obj=obj or source_dir)

        self._hygiene(source_dir, refuse)
        if not self._prefixes:
            raise refuse(
                f"syncing {source_dir} would read files no record checksums, and directory syncs read "
                "only below a declared --source-prefix: declare the source's warehouse root and the "
                "directories of its external tables with --source-prefix (docs/security.md)"
            )
        prefix = next((r for r in self._prefixes if r.strictly_contains(source_dir)), None)
        if prefix is None:
            raise refuse(f"directory sync of {source_dir}: it is below no --source-prefix ({self._named()})")
        foreign = foreign_database_dir(prefix, source_dir, database)
        if foreign is not None:
            raise refuse(
                f"directory sync of {source_dir}: it lies in {foreign}, the directory of another database "
                f"than this object's {database!r}"
            )

    # --- the rules ----------------------------------------------------------------------------
    def _hygiene(self, url: str, refuse: _Refuse) -> None:
        problem = url_problem(url, (r.scheme for r in (*self._prefixes, *self._cmroots)))
        if problem is not None:
            raise refuse(problem)

    def _check_resource(self, url: str, db_location: str | None, refuse: _Refuse) -> None:
        if self._prefixes:
            if not self._in(self._prefixes, url):
                raise refuse(f"function resource {url} is below no --source-prefix ({self._named()})")
            return
        derived = derived_resource_roots(db_location, self._cmroots)
        if not self._in(derived, url):
            stores = ", ".join(r.url(r.path) for r in derived)
            stores = stores or "none: its database records no usable source location"
            raise refuse(
                f"function resource {url} is below none of the source's stores this target derived "
                f"({stores}); declare --source-prefix for where the source keeps function resources"
            )

    def _below_location(self, url: str, location: str | None, refuse: _Refuse) -> None:
        if not location:
            raise refuse(
                f"the event names no location for the object of {url}, so where it may be read from is "
                "unknown (declare --source-prefix)"
            )
        self._hygiene(location, refuse)
        if urlsplit(location).path.rstrip("/") == "":
            raise refuse(f"the object's location {location} is the root of its filesystem")
        if not Root.parse(location).strictly_contains(url):
            raise refuse(f"{url} is not below the location of its object, {location}")

    def _check_cm(self, ref: FileRef, refuse: _Refuse) -> None:
        cm = ref.cm_uri or ""
        self._hygiene(cm, refuse)
        if self._in((*self._cmroots, *self._prefixes), cm):
            return
        if self._cmroots:
            raise refuse(f"cmroot copy {cm} is below no --source-cmroot ({', '.join(self.cmroots)})")
        name = posixpath.basename(urlsplit(ref.uri).path.rstrip("/"))
        named = posixpath.basename(urlsplit(cm).path) in cm_names(name, ref.checksum or "")
        if not (ref.checksum and named and same_filesystem(cm, ref.uri)):
            raise refuse(
                f"cmroot copy {cm} is not named <cmroot>/{name}_<checksum> (Hive 3+) or "
                "<cmroot>/<checksum> (Hive 2.3) on the file's filesystem (declare --source-cmroot)"
            )

    @staticmethod
    def _in(roots: tuple[Root, ...], url: str) -> bool:
        return any(root.strictly_contains(url) for root in roots)

    def _named(self) -> str:
        return ", ".join(self.prefixes)


def foreign_database_dir(prefix: Root, url: str, database: str | None) -> str | None:
    """The first directory between ``prefix`` and ``url`` laid out as another database's
    (``<name>.db`` with ``name`` not ``database``, Hive's default layout), or None. A policy that
    excludes a database does not exclude its directory from a prefix that holds it."""
    own = (database or "").lower()
    base = prefix.path.rstrip("/")
    rel = urlsplit(url).path[len(base):].strip("/")
    walked = base
    for segment in (s for s in rel.split("/") if s):
        walked = f"{walked}/{segment}"
        name = segment.lower()
        if name.endswith(".db") and len(name) > len(".db") and name[: -len(".db")] != own:
            return prefix.url(walked)
    return None


MAX_COMPONENT_LENGTH = 255  # HDFS's dfs.namenode.fs-limits.max-component-length default


def cm_names(name: str, checksum: str) -> tuple[str, ...]:
    """The names a source's change manager gives its copy of file ``name``: Hive 3+ (and the bundled
    warehouse) ``<name>_<checksum>``; Hive 2.3 the checksum alone, cut to fit one path component
    (``ReplChangeManager.getCMPath``)."""
    if not checksum:
        return ()
    alone = checksum if len(checksum) <= MAX_COMPONENT_LENGTH else checksum[: MAX_COMPONENT_LENGTH - 1]
    return (f"{name}_{checksum}", alone)
