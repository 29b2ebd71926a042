"""The target side of ``streamer verify``: a replica read as a client reads it, and files hashed.

Databases, tables and partitions come from the target's catalog; data files are listed under the
locations it reports (hidden names skipped; an ACID replica's only in the directories its committed
write ids make visible) and hashed with the algorithm of the source checksum they are compared with.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from streamer.errors import ConfigError
from streamer.events.model import DatabaseSnapshot, PartitionSnapshot, TableSnapshot
from streamer.filesystems import url_to_fs
from streamer.hive.files import is_hidden, partition_name
from streamer.metastore.catalog import Catalog
from streamer.replay.state import UNPARTITIONED, stable_params, table_meta
from streamer.target.apply.files import hasher
from streamer.target.dr.drift import (
    ExpectedDatabase,
    ObservedDatabase,
    ObservedFile,
    ObservedTable,
    checksum_algorithm,
)
from streamer.target.state.visibility import is_acid_replica, source_parameters, visible_write_ids

log = logging.getLogger(__name__)


def observe(
    catalog: Catalog, db: str, name: str, snap: DatabaseSnapshot | None, position: int,
    warehouse_root: str | None,
) -> ObservedDatabase | None:
    """Source database ``db`` as its replica ``name`` shows it (``snap``, at ``position``); unhashed."""
    if snap is None:
        return None
    tables: dict[str, ObservedTable] = {}
    for table_name in catalog.list_tables(name):
        table = catalog.get_table(name, table_name)
        if table is not None:
            tables[table_name.lower()] = observe_table(catalog, table, warehouse_root)
    return ObservedDatabase(db, position, stable_params(snap.parameters), tables)


def observe_table(catalog: Catalog, table: TableSnapshot, warehouse_root: str | None) -> ObservedTable:
    write_ids: list[int] | None = None
    if is_acid_replica(table.parameters):
        if not warehouse_root:
            raise ConfigError(
                f"{table.db}.{table.name} is an ACID replica: verifying it needs --warehouse-root"
            )
        write_ids = visible_write_ids(warehouse_root, table.db, table.name, table.parameters)
        table = dataclasses.replace(table, parameters=source_parameters(table.parameters))
    meta = table_meta(table)
    ids = tuple(sorted(write_ids or ())) if meta.transactional else ()
    if meta.is_view:
        return ObservedTable(meta, write_ids=ids)
    parts = catalog.list_partitions(table.db, table.name) if table.partition_keys else []
    return observe_listed(table, parts, write_ids, ids)


def observe_listed(
    table: TableSnapshot, parts: Sequence[PartitionSnapshot], write_ids: list[int] | None = None,
    ids: tuple[int, ...] = (),
) -> ObservedTable:
    """``table`` with its partitions ``parts`` (read from any catalog, the source's too) and files."""
    meta = table_meta(table)
    if meta.is_view:
        return ObservedTable(meta, write_ids=ids)
    partitions: dict[str, dict[str, ObservedFile]] = {}
    locations: dict[str, str] = {}
    if table.partition_keys:
        keys = [k.name.lower() for k in table.partition_keys]
        for part in parts:
            if len(part.values) != len(keys):
                continue  # replaced while being read; the confirming pass reads it again
            name = partition_name(keys, list(part.values))
            partitions[name] = listing(part.sd.location, write_ids)
            if part.sd.location:
                locations[name] = part.sd.location
    else:
        partitions[UNPARTITIONED] = listing(table.sd.location, write_ids)
        if table.sd.location:
            locations[UNPARTITIONED] = table.sd.location
    return ObservedTable(meta, partitions, locations, ids)


def hash_files(
    observed: ObservedDatabase | None, expected: ExpectedDatabase, chunk: int
) -> ObservedDatabase | None:
    """Digests of the files that have a source checksum to compare with (by its algorithm)."""
    if observed is None:
        return None
    tables = {}
    for name, table in observed.tables.items():
        parts = {}
        for part, files in table.partitions.items():
            out = {}
            for path, f in files.items():
                algo = checksum_algorithm(expected, name, part, path)
                if algo is not None and (f.algorithm != algo or f.digest is None):
                    f = dataclasses.replace(f, digest=digest(f.url, algo, chunk), algorithm=algo)
                out[path] = f
            parts[part] = out
        tables[name] = dataclasses.replace(table, partitions=parts)
    return dataclasses.replace(observed, tables=tables)


def source_digests(expected: ExpectedDatabase, chunk: int) -> dict[tuple[str, str, str], str]:
    """sha256 of the source's current copy of every file the events recorded no checksum of, in
    tables the source has not changed since the cut-off (a vanished file stays unverified)."""
    out = {}
    for table, part, path, ref in expected.unchecked_files():
        try:
            found = digest(ref.uri, "sha256", chunk)
        except OSError as exc:
            log.info("cannot hash source file %s: %s", ref.uri, exc)
            continue
        if found is not None:
            out[(table, part, path)] = found
    return out


def listing(location: str | None, write_ids: list[int] | None) -> dict[str, ObservedFile]:
    """Visible files below ``location`` by relative path (hidden names skipped at every level; an
    ACID replica's only in the base/delta directories its committed write ids make visible)."""
    if not location:
        return {}
    fs, root = url_to_fs(location)
    root = root.rstrip("/")
    allowed: set[str] | None = None
    try:
        found = fs.find(root, detail=True)
        if write_ids is not None:
            from streamer.target.table_reader import visible_dirs

            names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)]
            allowed = set(visible_dirs(names, set(write_ids), location))
    except FileNotFoundError:
        return {}  # a partition without files may have no directory
    out: dict[str, ObservedFile] = {}
    for path, info in found.items():
        rel = path[len(root) + 1 :] if path.startswith(root + "/") else None
        if not rel or any(is_hidden(seg) for seg in rel.split("/")):
            continue
        if allowed is not None and ("/" not in rel or rel.split("/", 1)[0] not in allowed):
            continue
        url = f"{location.rstrip('/')}/{rel}"
        out[rel] = ObservedFile(url, int(info.get("size") or 0))
    return out


def digest(url: str, algorithm: str | None, chunk: int) -> str | None:
    if algorithm is None:
        return None
    fs, path = url_to_fs(url)
    found = hasher(algorithm, obj=url)
    try:
        with fs.open(path, "rb") as fh:
            while block := fh.read(chunk):
                found.update(block)
    except FileNotFoundError:
        return None  # vanished meanwhile: the confirming pass decides
    return str(found.hexdigest())
