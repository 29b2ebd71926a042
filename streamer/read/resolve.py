"""Reading the marks and a table's exact visible files from the target's catalog and filesystem."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from fsspec import AbstractFileSystem

from streamer.errors import StreamerError
from streamer.filesystems import url_to_fs
from streamer.hive.files import is_hidden, partition_name
from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM, REPL_SOURCE_PARAM, Catalog
from streamer.read.errors import SnapshotError
from streamer.read.model import UNPARTITIONED, DbMark, Marks, PinnedFile, PinnedTable
from streamer.target.job.watermark import default_watermark_db, from_parameters
from streamer.target.state.visibility import is_acid_replica, visible_write_ids
from streamer.target.table_reader import visible_dirs


def read_marks(catalog: Catalog, dbs: Iterable[str], watermark_db: str | None = None) -> Marks:
    """The watermark record and the marks of ``dbs``; the record's database is ``watermark_db`` or
    the one named after the databases' source (``streamer_watermark_<source id>``)."""
    return marks_from(lambda db: _parameters(catalog, db), dbs, watermark_db)


def _parameters(catalog: Catalog, db: str) -> Mapping[str, str] | None:
    snap = catalog.get_database(db)
    return None if snap is None else snap.parameters


def marks_from(
    parameters: Callable[[str], Mapping[str, str] | None], dbs: Iterable[str], watermark_db: str | None = None
) -> Marks:
    """:func:`read_marks` over any way of reading a database's parameters (None: no such database):
    the Thrift catalog, or ``DESCRIBE DATABASE EXTENDED`` in the engine that runs the query."""
    marks: dict[str, DbMark] = {}
    for db in dbs:
        params = parameters(db)
        if params is None:
            marks[db] = DbMark(False)
            continue
        raw = params.get(LAST_ID_PARAM)
        last_id = int(raw) if raw is not None and raw.strip().isdigit() else None
        marks[db] = DbMark(True, last_id, params.get(REPL_SOURCE_PARAM), params.get(FENCE_PARAM))
    name = watermark_db
    if name is None:
        sources = sorted({m.source_id for m in marks.values() if m.source_id})
        if len(sources) > 1:
            raise SnapshotError(f"the databases are replicated from sources {sources}: no common watermark")
        name = default_watermark_db(sources[0]) if sources else None
    record = parameters(name) if name else None
    try:
        watermark = from_parameters(record) if record is not None else None
    except ValueError as exc:
        raise SnapshotError(f"watermark database {name}: {exc}") from exc
    return Marks(watermark, marks)


class Raced(StreamerError):
    """The metastore changed between two calls of one resolution: read again."""


def resolve(catalog: Catalog, name: str, warehouse_root: str | None = None) -> PinnedTable:
    """The table's metastore snapshot and its exact visible files, now (no consistency of its own)."""
    db, table = name.split(".", 1)
    snap = catalog.get_table(db, table)
    if snap is None:
        return PinnedTable(name, None)
    if snap.table_type.upper() in ("VIRTUAL_VIEW", "MATERIALIZED_VIEW"):
        raise SnapshotError(f"{name} is a view: snapshot reads tables (read the tables the view reads)")
    write_ids: tuple[int, ...] | None = None
    if is_acid_replica(snap.parameters):
        if not snap.sd.location:
            raise SnapshotError(f"{name}: the ACID replica has no location")
        root = warehouse_root or posixpath.dirname(posixpath.dirname(snap.sd.location.rstrip("/")))
        write_ids = tuple(visible_write_ids(root, db, table, snap.parameters))
    locations: dict[str, str] = {}
    if snap.partition_keys:
        keys = [k.name.lower() for k in snap.partition_keys]
        for part in catalog.list_partitions(db, table):
            if len(part.values) != len(keys):
                raise Raced(f"{name}: partition {part.values} does not fit keys {keys} (replaced meanwhile)")
            locations[_partition_name(keys, part.values)] = part.sd.location or ""
    else:
        locations[UNPARTITIONED] = snap.sd.location or ""
    partitions = {
        part: tuple(_list_files(location, write_ids, f"{name}/{part}".rstrip("/")))
        for part, location in sorted(locations.items())
    }
    return PinnedTable(name, snap, partitions, dict(sorted(locations.items())), write_ids)


def _partition_name(keys: Sequence[str], values: Sequence[str]) -> str:
    return partition_name(list(keys), list(values))


def _list_files(location: str, write_ids: Sequence[int] | None, obj: str) -> list[PinnedFile]:
    """Visible files below ``location`` (hidden ``.``/``_`` names skipped at every level); for an
    ACID replica only below the directories its committed write ids make visible."""
    if not location:
        return []
    fs, root = url_to_fs(location)
    root = root.rstrip("/")
    base = location.rstrip("/")
    entries = _ls(fs, root)
    if write_ids is not None:
        names = [_name(e) for e in entries if e["type"] == "directory"]
        chosen = set(visible_dirs(names, set(write_ids), obj))
        entries = [e for e in entries if e["type"] == "directory" and _name(e) in chosen]
    out: list[PinnedFile] = []
    stack = [(e, "") for e in entries]
    while stack:
        entry, rel_dir = stack.pop()
        name = _name(entry)
        if is_hidden(name):
            continue
        rel = f"{rel_dir}/{name}" if rel_dir else name
        if entry["type"] == "directory":
            stack.extend((child, rel) for child in _ls(fs, str(entry["name"])))
        else:
            out.append(PinnedFile(rel, f"{base}/{rel}", int(entry.get("size") or 0), _identity(entry)))
    return sorted(out, key=lambda f: f.relative)


def _ls(fs: AbstractFileSystem, path: str) -> list[dict[str, Any]]:
    try:
        return list(fs.ls(path, detail=True))
    except FileNotFoundError:
        return []  # gone: the table or partition was dropped or replaced (the second resolution tells)


def _name(entry: Mapping[str, Any]) -> str:
    return posixpath.basename(str(entry["name"]).rstrip("/"))


def _identity(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    mtime = entry.get("mtime", entry.get("LastModified", entry.get("last_modified")))
    return (entry.get("size"), str(mtime), entry.get("ino"))


def still_there(files: Iterable[PinnedFile]) -> bool:
    """Whether every file is still the one resolved (same size, modification time, inode)."""
    return first_changed(files) is None


def first_changed(files: Iterable[PinnedFile]) -> PinnedFile | None:
    """The first of ``files`` that is gone or no longer the one resolved; None when all are."""
    for f in files:
        fs, path = url_to_fs(f.url)
        try:
            info = fs.info(path)
        except FileNotFoundError:
            return f
        if _identity(info) != f.identity:
            return f
    return None
