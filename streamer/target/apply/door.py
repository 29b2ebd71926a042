"""The door: every change a record makes to the target's catalog is a typed effect, done here.

Handlers decide which effects an event needs; ``execute`` checks each one by the same rules before it
calls the catalog, whatever path (incremental step, bootstrap record, marker, lane, verification)
asked for it:

- **ownership**: every target database the effect changes is this source's (``check_owned``: made by
  replication from this source, not failed over; ``--allow-existing-db`` adopts);
- **names**: every database, table and partition-key name is one path segment, every name within
  Hive's column sizes (``paths.check_name``, ``codec.name_problem``);
- **places**: every location it writes into the catalog is the target's own for that object: a
  database inside the target's roots, a managed table inside its database's, a managed partition
  inside its table's, an external object below the external base dir; every source-URI parameter and
  function resource inside the target's roots; a view has no location;
- **bounds**: a drop names each partition by one value per partition key; no call carries more than
  ``MAX_PARTITIONS_PER_CALL`` partitions or ``MAX_CONSTRAINTS_PER_CALL`` constraints.

File changes pass here too (``stage``, ``copy_all``, ``publish_swapped``, ``clear_dir``, ``move_dir``,
``link_dir``, ``remove_tree``, ``remove_file``, ``sync_dir``): each first checks its directory's **place**
(``check_place``): inside the directory of a database this source owns (``<warehouse>/<db>.db``, or
the database's function resources), or below the external base dir and held by no other source's
claim (``external_owners``); then ``guard.check_write`` and the read rules (``sources``) as before.

A refused effect raises the ``EventError`` its check names (``ApplyError``, ``PathEscapeError``); the
applier adds the event and halts the database. ``tests/unit/test_architecture.py`` proves that no
module of ``streamer.target.apply`` but this one calls a catalog write method. Design:
docs/design/apply.md ("The door").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol
from urllib.parse import urlsplit

from streamer.errors import ApplyError, PathEscapeError, UntrustedSourceError
from streamer.events.codec import MAX_DB_NAME, MAX_TABLE_NAME, name_problem
from streamer.events.model import (
    DatabaseSnapshot,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.filesystems import url_to_fs
from streamer.metastore.catalog import Catalog
from streamer.target.apply import dir_sync, files, function_resources, swap
from streamer.target.apply.by_state import SOURCE_LOCATION_PARAM
from streamer.target.apply.dir_fsync import DirFsyncs, fsync_dir
from streamer.target.apply.dir_sync import ChecksumCache, DirSynced
from streamer.target.apply.effects import (
    AddConstraints,
    AddPartitions,
    AlterDatabase,
    AlterPartitions,
    AlterTable,
    CatalogEffect,
    CreateDatabase,
    CreateFunction,
    CreateTable,
    DeleteStatistics,
    DropConstraint,
    DropDatabase,
    DropFunction,
    DropPartitions,
    DropTable,
    UpdateStatistics,
)
from streamer.target.apply.external_owners import ExternalOwners, Owner
from streamer.target.apply.files import CopyReport, FileCopier, Staged
from streamer.target.apply.guard import check_write
from streamer.target.apply.locations import is_source_uri
from streamer.target.apply.paths import (
    EXTERNAL_TYPES,
    FUNCTIONS_DIR,
    VIEW_TYPES,
    Root,
    TargetPaths,
    check_name,
)

MAX_PARTITIONS_PER_CALL = 100_000
"""More than any one Hive DDL statement adds (``hive.exec.max.dynamic.partitions`` is 1,000 by default)."""
MAX_CONSTRAINTS_PER_CALL = 10_000


class Side(Protocol):
    """What the door needs of the apply context (``ApplyContext``; a lane's copy has its own catalog)."""

    @property
    def catalog(self) -> Catalog: ...
    @property
    def paths(self) -> TargetPaths: ...
    @property
    def copier(self) -> FileCopier: ...
    @property
    def owners(self) -> ExternalOwners: ...
    @property
    def dir_fsyncs(self) -> DirFsyncs | None: ...
    def settle_dir_fsyncs(self) -> None: ...
    def owner_exists(self, owner: Owner) -> bool: ...
    def check_owned(self, name: str) -> DatabaseSnapshot | None: ...
    def owned_checked(self, name: str) -> bool: ...
    def note_owned(self, name: str, changed: bool) -> None: ...


# --- the checks, pure but for ownership ----------------------------------------------------------
def changed_databases(effect: CatalogEffect) -> list[str]:
    """Every target database ``effect`` changes (a rename changes both; constraints their own tables')."""
    match effect:
        case CreateDatabase(db=db):
            return [db.name]
        case AlterDatabase(name=name, db=db):
            return list(dict.fromkeys([name, db.name]))
        case CreateTable(table=t):
            return [t.db]
        case AlterTable(db=db, table=t):
            return list(dict.fromkeys([db, t.db]))
        case AddPartitions(table=t) | AlterPartitions(table=t):
            return [t.db]
        case CreateFunction(function=f):
            return [f.db]
        case AddConstraints(constraints=cs):
            return list(dict.fromkeys(c.db for c in cs))
        case (DropDatabase(name=db) | DropTable(db=db) | DropPartitions(db=db) | DropFunction(db=db)
              | DropConstraint(db=db) | UpdateStatistics(db=db) | DeleteStatistics(db=db)):
            return [db]
    raise TypeError(f"not a catalog effect: {effect!r}")


def check_effect(effect: CatalogEffect, paths: TargetPaths) -> None:
    """Names, places and bounds of ``effect`` (everything but ownership, which needs the catalog)."""
    for kind, name in _names(effect):
        check_name(kind, name)
        problem = name_problem(name, MAX_DB_NAME if kind == "database" else MAX_TABLE_NAME)
        if problem is not None:
            raise PathEscapeError(f"{kind} name {name!r} {problem}", obj=name)
    match effect:
        case CreateDatabase(db=db) | AlterDatabase(db=db):
            _check_database(db, paths)
        case CreateTable(table=t) | AlterTable(table=t):
            _check_table(t, paths)
        case AddPartitions(table=t, partitions=ps) | AlterPartitions(table=t, partitions=ps):
            _bounded(len(ps), MAX_PARTITIONS_PER_CALL, "partitions", t.qualified_name)
            for p in ps:
                _check_partition(t, p, paths)
        case DropPartitions(db=db, table=table, values=values, keys=keys):
            _bounded(len(values), MAX_PARTITIONS_PER_CALL, "partitions", f"{db}.{table}")
            for spec in values:
                if not spec or (keys is not None and len(spec) != len(keys)):
                    raise ApplyError(f"a partition drop names {list(spec)!r}, not one value per partition "
                                     f"key {list(keys or [])!r}: refused", obj=f"{db}.{table}")
        case CreateFunction(function=f):
            for uri in f.resource_uris:
                _inside(uri.uri, paths, f"function {f.db}.{f.name} resource")
        case AddConstraints(constraints=cs):
            _bounded(len(cs), MAX_CONSTRAINTS_PER_CALL, "constraints", cs[0].db if cs else None)


def execute(side: Side, effect: CatalogEffect) -> None:
    """Check ``effect`` (``check_effect``, then ownership of every database it changes) and do it."""
    check_effect(effect, side.paths)
    databases = changed_databases(effect)
    for name in databases:
        if not side.owned_checked(name):
            side.check_owned(name)
    _do(side.catalog, effect)
    changes_database = isinstance(effect, CreateDatabase | AlterDatabase | DropDatabase)
    for name in databases:
        side.note_owned(name, changed=changes_database)


def _do(catalog: Catalog, effect: CatalogEffect) -> None:
    match effect:
        case CreateDatabase(db=db):
            catalog.create_database(db)
        case AlterDatabase(name=name, db=db, exists=exists):
            catalog.alter_database(name, db, exists=exists)
        case DropDatabase(name=name):
            catalog.drop_database(name)
        case CreateTable(table=t):
            catalog.create_table(t)
        case AlterTable(db=db, name=name, table=t):
            catalog.alter_table(db, name, t)
        case DropTable(db=db, name=name):
            catalog.drop_table(db, name)
        case AddPartitions(table=t, partitions=ps):
            catalog.add_partitions(t.db, t.name, list(ps))
        case AlterPartitions(table=t, partitions=ps):
            catalog.alter_partitions(t.db, t.name, list(ps))
        case DropPartitions(db=db, table=table, values=values, keys=keys):
            known = list(keys) if keys is not None else None
            catalog.drop_partitions(db, table, [list(v) for v in values], known)
        case CreateFunction(function=f):
            catalog.create_function(f)
        case DropFunction(db=db, name=name):
            catalog.drop_function(db, name)
        case AddConstraints(constraints=cs):
            catalog.add_constraints(list(cs))
        case DropConstraint(db=db, table=table, name=name):
            catalog.drop_constraint(db, table, name)
        case UpdateStatistics(db=db, table=table, partition_values=values, statistics=stats):
            catalog.update_column_statistics(db, table, list(values) if values else None, list(stats))
        case DeleteStatistics(db=db, table=table, partition_values=values, column=column):
            catalog.delete_column_statistics(db, table, list(values) if values else None, column)


def _names(effect: CatalogEffect) -> Iterator[tuple[str, str]]:
    """(kind, name) of every database and table name ``effect`` writes or addresses."""
    for db in changed_databases(effect):
        yield "database", db
    match effect:
        case CreateTable(table=t) | AlterTable(table=t) | AddPartitions(table=t) | AlterPartitions(table=t):
            yield "table", t.name
            for key in t.partition_keys:
                yield "partition key", key.name
        case DropTable(name=name) | DropPartitions(table=name) | DropConstraint(table=name):
            yield "table", name
        case UpdateStatistics(table=name) | DeleteStatistics(table=name):
            yield "table", name
        case CreateFunction(function=f):
            yield "function", f.name
        case DropFunction(name=name):
            yield "function", name
        case AddConstraints(constraints=cs):
            for c in cs:
                yield "table", c.table


def _check_database(db: DatabaseSnapshot, paths: TargetPaths) -> None:
    """Inside the target's roots (a database created from a record sits at its derived directory; one
    adopted with ``--allow-existing-db`` keeps its own, which the target gave it)."""
    for where in (db.location, db.managed_location):
        if where:
            _inside(where, paths, f"database {db.name!r} location")


def _check_table(t: TableSnapshot, paths: TargetPaths) -> None:
    what = t.qualified_name
    if t.table_type in VIEW_TYPES:
        if t.sd.location:
            raise PathEscapeError(f"view {what} would have location {t.sd.location!r}", obj=what)
    elif t.sd.location:
        if t.table_type in EXTERNAL_TYPES:
            _below(paths.external, t.sd.location, what, "the external base dir")
        else:
            _below(Root.parse(paths.database_location(t.db)), t.sd.location, what, "its database's directory")
    _uri_parameters(t.parameters, t.sd, paths, what)


def _check_partition(t: TableSnapshot, p: PartitionSnapshot, paths: TargetPaths) -> None:
    what = f"{t.qualified_name} partition {p.values!r}"
    if p.db is not None and (p.db, p.table) != (t.db, t.name):
        raise ApplyError(f"partition of {p.db}.{p.table} given as one of {t.qualified_name}", obj=what)
    if t.partition_keys and len(p.values) != len(t.partition_keys):
        raise ApplyError(f"partition {p.values!r} has not one value per partition key", obj=what)
    if p.sd.location:
        if t.table_type in EXTERNAL_TYPES:
            _below(paths.external, p.sd.location, what, "the external base dir")
        else:
            table_dir = t.sd.location or paths.table_location(t.db, t.name)
            _below(Root.parse(table_dir), p.sd.location, what, "its table's directory")
    _uri_parameters(p.parameters, p.sd, paths, what)


def _uri_parameters(params: dict[str, str], sd: StorageDescriptor, paths: TargetPaths, what: str) -> None:
    """Every source-URI value among the object's, its storage's and its serde's parameters lies inside
    a target root (``locations`` moved them there: one left pointing elsewhere is a crafted one)."""
    for where, values in (("table", params), ("storage", sd.parameters), ("serde", sd.serde.parameters)):
        for key, value in values.items():
            if key != SOURCE_LOCATION_PARAM and is_source_uri(value):  # (that one records the source's)
                _inside(value, paths, f"{what} {where} parameter {key!r}")


def _inside(uri: str, paths: TargetPaths, what: str) -> None:
    if not any(root.contains(uri.strip()) for root in paths.roots):
        raise PathEscapeError(f"{what} names {uri!r}, outside the target's roots", obj=what)


def _below(root: Root | None, uri: str, what: str, place: str) -> None:
    if root is None or not root.strictly_contains(uri):
        raise PathEscapeError(f"{what} would be placed at {uri!r}, not below {place}", obj=what)


def _bounded(count: int, limit: int, what: str, obj: str | None) -> None:
    if count > limit:
        raise ApplyError(f"one change of {count} {what}, over the bound of {limit}", obj=obj)


def _path(uri: str) -> str:
    return urlsplit(uri).path.rstrip("/")


# --- file changes ---------------------------------------------------------------------------------
def check_place(side: Side, url: str, *, event_id: int | None = None) -> None:
    """A file change of ``url`` is on behalf of this source: inside the directory of a database it owns
    (its ``<name>.db``, or its functions' resources), or below the external base dir and inside no other
    source's claimed directory. Checked before ``guard.check_write``'s rules (roots, no symlinks)."""
    paths = side.paths
    if paths.external is not None and paths.external.strictly_contains(url):
        try:
            side.owners.check_free(url, side.owner_exists)
        except PathEscapeError as exc:
            raise PathEscapeError(exc.cause, event_id=event_id, obj=exc.obj) from exc
        return
    if not paths.warehouse.strictly_contains(url):
        raise PathEscapeError(f"{url} is outside the target's roots", event_id=event_id, obj=url)
    segments = _path(url)[len(paths.warehouse.path.rstrip("/")) :].strip("/").split("/")
    db = None
    if segments[0].endswith(".db") and len(segments[0]) > len(".db"):
        db = segments[0][: -len(".db")]
    elif segments[0] == FUNCTIONS_DIR and len(segments) > 1:
        db = segments[1]
    if db is None:
        raise PathEscapeError(f"{url} is inside no database's directory of the warehouse", event_id=event_id,
                              obj=url)
    if not side.owned_checked(db):
        side.check_owned(db)
        side.note_owned(db, changed=False)


def stage(
    side: Side, refs: list[FileRef], dest: Callable[[FileRef], str], obj_dir: str, *, event_id: int | None,
    source_location: str | None,
) -> Staged:
    """Stage ``refs`` into ``obj_dir`` (``FileCopier.stage_all``) once that directory is this source's."""
    check_place(side, obj_dir, event_id=event_id)
    copier = side.copier
    staged = copier.stage_all(refs, dest, event_id=event_id, obj_dir=obj_dir, source_location=source_location)
    staged.dir_fsyncs = side.dir_fsyncs
    return staged


def copy_all(
    side: Side, refs: list[FileRef], obj_dir: str, *, event_id: int | None, source_location: str | None,
    resources: bool = False,
) -> CopyReport:
    """Copy ``refs`` into ``obj_dir`` and publish them (``FileCopier.copy_all``), once it is this source's."""
    check_place(side, obj_dir, event_id=event_id)
    return side.copier.copy_all(refs, lambda _: obj_dir, event_id=event_id, obj_dir=obj_dir,
                                source_location=source_location, resources=resources)


def publish_swapped(side: Side, staged: Staged, directory: str, *, replace: bool,
                    event_id: int | None) -> CopyReport | None:
    check_place(side, directory, event_id=event_id)
    return swap.publish_swapped(staged, directory, replace=replace, roots=side.paths.roots, event_id=event_id)


def clear_dir(side: Side, url: str, *, keep: Iterable[str] = (), recursive_files: bool = False,
              event_id: int | None = None) -> list[str]:
    check_place(side, url, event_id=event_id)
    roots = side.paths.roots
    return files.clear_dir(url, roots, keep=keep, recursive_files=recursive_files, event_id=event_id)


def move_dir(side: Side, src: str, dst: str, *, event_id: int | None = None) -> bool:
    for url in (src, dst):
        check_place(side, url, event_id=event_id)
    side.settle_dir_fsyncs()  # a queued fsync of a directory under ``src`` would sync its old path
    return files.move_dir(src, dst, side.paths.roots, event_id=event_id)


def link_dir(side: Side, src: str, dst: str, *, event_id: int | None = None) -> bool:
    for url in (src, dst):
        check_place(side, url, event_id=event_id)
    side.settle_dir_fsyncs()  # the links copy what is under ``src``: its renames on disk first
    return files.link_dir(src, dst, side.paths.roots, event_id=event_id)


def remove_tree(side: Side, url: str, *, event_id: int | None = None) -> None:
    """Remove an object's directory: set aside in one rename and deleted after the grace period where
    the filesystem allows (``swap.remove_aside``), else in place."""
    check_place(side, url, event_id=event_id)
    parent = swap.remove_aside(url, side.paths.roots, event_id=event_id)
    if parent is None:
        files.remove_tree(url, side.paths.roots, event_id=event_id)
    elif side.dir_fsyncs is not None:  # the rename on disk, as a rename into it (Staged.publish)
        side.dir_fsyncs.add(parent)
    else:
        fsync_dir(parent)


def remove_file(side: Side, url: str, directory: str, *, event_id: int | None = None) -> None:
    """Delete the one file ``url`` of the object whose directory is ``directory`` (a verification
    repair: a file only the replica has); absent is fine."""
    check_place(side, directory, event_id=event_id)
    check_write(url, directory, side.paths.roots, event_id=event_id)
    fs, path = url_to_fs(url)
    try:
        if fs.exists(path):
            fs.rm_file(path)
    except OSError as exc:
        raise ApplyError(f"cannot remove {url}: {exc}", event_id=event_id, obj=url) from exc


def sync_dir(side: Side, source_dir: str, target_dir: str, cache: ChecksumCache, *, event_id: int | None,
             database: str) -> DirSynced | None:
    """A directory of a table replicated by state made equal to its source's (``dir_sync.sync_dir``)."""
    check_place(side, target_dir, event_id=event_id)
    return dir_sync.sync_dir(side.copier, source_dir, target_dir, cache, event_id=event_id, database=database)


def copy_resources(
    side: Side, fn: FunctionSnapshot, event_id: int | None = None, db_location: str | None = None,
) -> FunctionSnapshot:
    """Copy ``fn``'s resources into its target directory; returns ``fn`` naming the copies
    (``target_resources``).

    ``db_location``: the source location recorded for ``fn``'s database
    (``database_source_location``), from which the read rules derive where resources may be read
    when no ``--source-prefix`` is declared."""
    target = function_resources.target_resources(side.paths, fn)
    if not fn.resource_uris:
        return target
    dest = function_resources.resource_dir(side.paths, fn.db, fn.name)
    refs = [FileRef(uri=r.uri) for r in fn.resource_uris]
    try:
        copy_all(side, refs, dest, event_id=event_id, source_location=db_location, resources=True)
    except UntrustedSourceError as exc:
        raise UntrustedSourceError(
            f"function {fn.db}.{fn.name}: {exc.cause}", event_id=exc.event_id, obj=exc.obj
        ) from exc
    return target
