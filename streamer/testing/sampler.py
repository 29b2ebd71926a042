"""The I/O side of the consistency checker: readers that sample a live target into :class:`Sample` s.

A reader sees the target as any client would (metastore over Thrift, data files hashed, ACID
replicas through their visibility file) and follows the checker's sampling protocol: ids, tables
read twice, ids again; a sample that raced an apply is discarded. Sample sizes and absent tables:
docs/design/consistency.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import unquote, urlsplit

from streamer.errors import StreamerError
from streamer.events.model import TableSnapshot
from streamer.hive.files import is_hidden
from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM, Catalog
from streamer.metastore.thrift import CatalogError
from streamer.replay.machine import table_key
from streamer.replay.state import UNPARTITIONED, FileKey, TableState, observe
from streamer.target.state.visibility import is_acid_replica, source_parameters, visible_write_ids
from streamer.testing.checker import Sample

log = logging.getLogger(__name__)


class Raced(StreamerError):
    """A read saw two states of one object (changed between two catalog calls): discard the sample."""


class FileHashes:
    """sha256 of local files, cached by (path, size, mtime): samplers re-read the same files often."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int, int], str] = {}
        self._lock = threading.Lock()

    def sha256(self, path: str) -> str | None:
        """The file's digest, or None when it vanished while being read (a concurrent apply)."""
        try:
            st = os.stat(path)
            key = (path, st.st_size, st.st_mtime_ns)
            with self._lock:
                cached = self._cache.get(key)
            if cached is not None:
                return cached
            digest = hashlib.sha256()
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
        except FileNotFoundError:
            return None
        value = digest.hexdigest()
        with self._lock:
            self._cache[key] = value
        return value


def local_path(location: str) -> str:
    """The local path of a ``file:`` URI or plain path (the filesystems of tests and benchmarks)."""
    parts = urlsplit(location)
    if parts.scheme not in ("", "file"):
        raise ValueError(f"sampler reads local files only, not {location!r}")
    return unquote(parts.path)


def visible_files(directory: str, hashes: FileHashes, top: Iterable[str] | None = None) -> list[FileKey]:
    """(path relative to ``directory``, sha256) of every visible file below it, hidden names skipped
    at every level; ``top`` limits the first level to those names (ACID: the visible deltas)."""
    out: list[FileKey] = []
    allowed = set(top) if top is not None else None
    for current, dirs, files in os.walk(directory):
        rel_dir = os.path.relpath(current, directory)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        dirs[:] = [d for d in dirs if not is_hidden(d) and (allowed is None or rel_dir or d in allowed)]
        if allowed is not None and not rel_dir:
            continue  # an ACID table's data lives in its base/delta directories only
        for name in files:
            if is_hidden(name):
                continue
            digest = hashes.sha256(os.path.join(current, name))
            if digest is not None:
                out.append((f"{rel_dir}/{name}" if rel_dir else name, digest))
    return out


def _acid_dirs(directory: str, committed: Sequence[int]) -> list[str]:
    from streamer.target.table_reader import visible_dirs

    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return visible_dirs(names, set(committed), directory)


@dataclass
class TargetReader:
    """One reader of a target: takes samples of the databases it is given (docs/design/consistency.md).

    ``warehouse_root`` is needed for ACID replicas only (their visibility file lives under it).
    """

    name: str
    catalog: Catalog
    databases: Callable[[], Sequence[str]]
    warehouse_root: str | None = None
    rng: random.Random = field(default_factory=random.Random)
    max_tables: int = 4
    hashes: FileHashes = field(default_factory=FileHashes)
    taken: int = 0
    discarded: int = 0
    _seen: set[str] = field(default_factory=set)

    def sample(self) -> Sample | None:
        """One sample, or None when it raced an apply (or there is nothing to read yet)."""
        scope = [d.lower() for d in self.databases()]
        if not scope:
            return None
        dbs = self.rng.sample(scope, min(len(scope), self.rng.choice([1, 1, 2])))
        keys = [k for db in dbs for k in self._choose(db)]
        wall = time.time()
        before, fenced = self._applied(dbs)
        if fenced:
            self._discard_fenced(fenced)
            return None
        try:
            first = self._collect(dbs, keys)
            second = self._collect(dbs, keys)
        except Raced as exc:
            log.debug("%s: sample raced an apply: %s", self.name, exc)
            self.discarded += 1
            return None
        after, fenced = self._applied(dbs)
        if fenced:
            self._discard_fenced(fenced)
            return None
        if before != after or first != second:
            self.discarded += 1
            return None
        self.taken += 1
        self._seen.update(k for k, state in first.items() if state is not None)
        return Sample(self.name, wall, before, first)

    def _applied(self, dbs: Iterable[str]) -> tuple[dict[str, int], dict[str, str]]:
        """Each database's ``repl.last.id``, and the apply fences (db -> value) among them."""
        out: dict[str, int] = {}
        fenced: dict[str, str] = {}
        for db in dbs:
            snap = self.catalog.get_database(db)
            if snap is not None and LAST_ID_PARAM in snap.parameters:
                out[db] = int(snap.parameters[LAST_ID_PARAM])
            if snap is not None and FENCE_PARAM in snap.parameters:
                fenced[db] = snap.parameters[FENCE_PARAM]
        return out, fenced

    def _discard_fenced(self, fenced: dict[str, str]) -> None:
        """A database applied out of event-id order shows states the source never had, whatever its
        ``repl.last.id``: nothing to judge, the sample is discarded like a raced one."""
        log.debug("%s: sample read databases applied out of order: %s", self.name, fenced)
        self.discarded += 1

    def _listed(self, db: str) -> list[str]:
        return [t.lower() for t in self.catalog.list_tables(db)] if self.catalog.get_database(db) else []

    def _choose(self, db: str) -> list[str]:
        known = {k for k in self._seen if k.startswith(db + ".")}
        candidates = sorted({table_key(db, t) for t in self._listed(db)} | known)
        return self.rng.sample(candidates, min(len(candidates), self.max_tables))

    def _collect(self, dbs: Iterable[str], keys: Sequence[str]) -> dict[str, TableState | None]:
        """The chosen tables' states; taken twice per sample: two equal collects bracket an instant at
        which the target held exactly them (states move forward, so a value seen at both ends of a
        table's two reads held all along), where one collect may mix states of several instants."""
        out: dict[str, TableState | None] = {}
        for db in dbs:
            listed = set(self._listed(db))
            for key in keys:
                if not key.startswith(db + "."):
                    continue
                name = key[len(db) + 1 :]
                snap = self.catalog.get_table(db, name) if name in listed else None
                out[key] = self._observe(snap) if snap is not None else None
        return out

    def _observe(self, table: TableSnapshot) -> TableState | None:
        params = table.parameters
        write_ids: list[int] | None = None
        if is_acid_replica(params):
            if self.warehouse_root is None:
                raise ValueError(f"{table.db}.{table.name}: reading an ACID replica needs warehouse_root")
            write_ids = visible_write_ids(self.warehouse_root, table.db, table.name, params)
            table = dataclasses.replace(table, parameters=source_parameters(params))
        if table.table_type.upper() in ("VIRTUAL_VIEW", "MATERIALIZED_VIEW"):
            return observe(table)
        files: dict[str, list[FileKey]] = {}
        if table.partition_keys:
            keys = [k.name.lower() for k in table.partition_keys]
            for part in self.catalog.list_partitions(table.db, table.name):
                if len(part.values) != len(keys):  # the table was replaced between the two calls
                    raise Raced(f"{table.db}.{table.name}: partition {part.values} does not fit keys {keys}")
                name = "/".join(f"{k}={v}" for k, v in zip(keys, part.values, strict=True))
                files[name] = self._files(part.sd.location, write_ids)
        else:
            files[UNPARTITIONED] = self._files(table.sd.location, write_ids)
        return observe(table, files, write_ids)

    def _files(self, location: str | None, write_ids: list[int] | None) -> list[FileKey]:
        if not location:
            return []
        directory = local_path(location)
        top = _acid_dirs(directory, write_ids) if write_ids is not None else None
        return visible_files(directory, self.hashes, top)


class Sampler:
    """Readers sampling a target from background threads until :meth:`stop` (each its own catalog).

    ``catalogs`` makes one catalog per reader (e.g. ``lambda: HmsCatalog(uri)``); ``databases``
    returns the databases in scope at each sample (a campaign adds its workloads' as they start).
    """

    def __init__(
        self,
        catalogs: Callable[[], Catalog],
        databases: Callable[[], Sequence[str]],
        *,
        readers: int = 2,
        interval: float = 0.1,
        seed: int = 0,
        warehouse_root: str | None = None,
        max_tables: int = 4,
    ) -> None:
        self._catalogs = catalogs
        self._interval = interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.samples: list[Sample] = []
        self.errors: list[str] = []  # the sampler's own failures: bugs to fix
        self.read_failures: list[str] = []  # reads the metastore failed (server-side errors)
        hashes = FileHashes()
        self.readers = [
            TargetReader(f"reader-{i}", cast(Catalog, _Lazy()), databases, warehouse_root,
                         random.Random(seed * 1000 + i), max_tables, hashes)
            for i in range(readers)
        ]

    @property
    def discarded(self) -> int:
        return sum(r.discarded for r in self.readers)

    def start(self) -> Sampler:
        for reader in self.readers:
            thread = threading.Thread(target=self._loop, args=(reader,), name=reader.name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _loop(self, reader: TargetReader) -> None:
        catalog = self._catalogs()
        reader.catalog = catalog
        try:
            while not self._stop.is_set():
                try:
                    sample = reader.sample()
                except CatalogError as exc:
                    # the metastore failed a read (Derby has failed queries on a table being changed
                    # under them): no state was observed, so nothing to judge; counted, not hidden
                    log.info("%s: the metastore failed a read: %s", reader.name, exc)
                    with self._lock:
                        self.read_failures.append(f"{reader.name}: {exc}")
                    sample = None
                except Exception as exc:  # a reader error is evidence to report, not a crash of the run
                    log.warning("%s: sampling failed: %s", reader.name, exc)
                    with self._lock:
                        self.errors.append(f"{reader.name}: {type(exc).__name__}: {exc}")
                    sample = None
                    self._stop.wait(1.0)
                if sample is not None:
                    with self._lock:
                        self.samples.append(sample)
                self._stop.wait(self._interval)
        finally:
            catalog.close()

    def stop(self) -> list[Sample]:
        """Stop every reader; the samples taken, in the order they were taken."""
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        self._threads.clear()
        with self._lock:
            return list(self.samples)

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Lazy:
    """Placeholder catalog until the reader's thread connects its own (clients are not thread-safe)."""

    def __getattr__(self, name: str) -> object:
        raise RuntimeError("reader used before its thread connected a catalog")
