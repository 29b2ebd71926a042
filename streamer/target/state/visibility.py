"""Visibility of ACID replicas on a target: which write ids of which table are committed.

Hive 2.3 has no write ids, so the target keeps every ACID table's committed write ids (and the
source-to-target transaction id map) itself, in ONE file per source id under the warehouse root
(``VISIBILITY_DIR``), replaced atomically so a COMMIT_TXN (always of one source) becomes visible
across all its tables at once. Each file has one writer, the target job of its source, so jobs of
several sources sharing a warehouse never overwrite each other's commits, on any filesystem and
without a lock. A table's file is found through its ``streamer.source.id``; a source without a file
of its own yet is read from the single file of earlier releases (``LEGACY_VISIBILITY_PATH``).
ACID parameters are kept under streamer-owned keys. Why: docs/design/consistency.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import posixpath
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from streamer import metrics
from streamer.errors import StreamerError
from streamer.filesystems import atomic_write, url_to_fs
from streamer.metastore.catalog import REPL_SOURCE_PARAM

VISIBILITY_DIR = "_streamer/acid/sources"
"""One visibility file per source id in this directory (``source_file_name``)."""
LEGACY_VISIBILITY_PATH = "_streamer/acid/visible.json"
"""The single file every source shared before per-source files; read, never written."""
ACID_PARAM = "streamer.acid.transactional"
ACID_PROPERTIES_PARAM = "streamer.acid.transactional_properties"
_HIVE_TO_TARGET = {"transactional": ACID_PARAM, "transactional_properties": ACID_PROPERTIES_PARAM}
FORMAT_VERSION = 1
MAX_FINISHED_TXNS = 1000
"""Finished transactions remembered per source (replays older than that are filtered by progress)."""
MAX_OPEN_TXNS = 10_000
"""Open transactions remembered per source; past it the oldest (lowest source id) are forgotten.
Forgetting one loses nothing: its COMMIT_TXN carries its writes and commits them unknown, its
ABORT_TXN of an unknown transaction has nothing to drop; only its ACID_WRITE byte count (the
aborted-bytes metric) goes. Without it, a record opening transactions that never finish would grow
the file every later transaction event reads without end (Hive itself refuses past
``hive.max.open.txns``, 100,000, and aborts idle ones after ``hive.txn.timeout``)."""


class AcidStateError(StreamerError):
    """A visibility file is unreadable or malformed, or a replica names no source; the message says which."""


# --- table parameters ----------------------------------------------------------------------------


def target_parameters(params: Mapping[str, str]) -> dict[str, str]:
    """Source table parameters as stored on the target: Hive's ACID keys moved to streamer's keys."""
    out: dict[str, str] = {}
    moved: dict[str, str] = {}
    for key, value in params.items():
        target_key = _HIVE_TO_TARGET.get(key.lower())
        if target_key is None:
            out[key] = value
        else:
            moved[target_key] = value
    out.update(moved)  # the source's values win over stale streamer keys
    return out


def source_parameters(params: Mapping[str, str]) -> dict[str, str]:
    """The inverse of ``target_parameters``: what the source had (for comparing replica and source)."""
    back = {v: k for k, v in _HIVE_TO_TARGET.items()}
    out = {k: v for k, v in params.items() if k not in back}
    out.update({back[k]: v for k, v in params.items() if k in back})
    return out


def is_acid_replica(params: Mapping[str, str]) -> bool:
    """True for a target table that replicates a transactional source table."""
    return params.get(ACID_PARAM, "").lower() == "true"


def table_key(db: str, table: str) -> str:
    return f"{db.lower()}.{table.lower()}"


# --- write-id sets ---------------------------------------------------------------------------------


def to_ranges(ids: Iterable[int]) -> list[list[int]]:
    """Sorted ids as inclusive ``[lo, hi]`` runs: committed write ids are dense with few holes."""
    out: list[list[int]] = []
    for i in sorted(set(ids)):
        if out and out[-1][1] + 1 == i:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def from_ranges(ranges: Iterable[Iterable[int]]) -> frozenset[int]:
    ids: set[int] = set()
    for pair in ranges:
        lo, hi = (int(x) for x in pair)
        if lo > hi:
            raise ValueError(f"range [{lo}, {hi}] is reversed")
        ids.update(range(lo, hi + 1))
    return frozenset(ids)


# --- the visibility state (pure) -------------------------------------------------------------------


class TxnState(StrEnum):
    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(frozen=True)
class Txn:
    """A source transaction as the target knows it; ``pending_bytes`` sums ACID_WRITE sizes seen."""

    target_id: int
    state: TxnState = TxnState.OPEN
    pending_bytes: int = 0


@dataclass(frozen=True)
class Visibility:
    """Committed write ids per table (``db.table``, target names) and the transaction map.

    Every transition returns a new value; applying one twice gives the value of applying it once.
    """

    tables: Mapping[str, frozenset[int]] = field(default_factory=dict)
    txns: Mapping[str, Mapping[int, Txn]] = field(default_factory=dict)  # source id -> source txn id
    next_txn: int = 1

    # --- reading ---
    def write_ids(self, key: str) -> list[int]:
        return sorted(self.tables.get(key.lower(), frozenset()))

    def txn(self, source: str, txn_id: int) -> Txn | None:
        return self.txns.get(source, {}).get(txn_id)

    def open_count(self) -> int:
        return sum(t.state is TxnState.OPEN for txns in self.txns.values() for t in txns.values())

    def for_source(self, source: str) -> Visibility:
        """This state as ``source``'s own file starts from it (migration from the single file of
        earlier releases): its transactions only; every table, since that file does not say which
        source a table is of (a table of another source is never looked up in this source's file,
        and a table this source creates later starts empty: ``reset_table``)."""
        own = {source: self.txns[source]} if source in self.txns else {}
        return replace(self, txns=own)

    # --- transactions ---
    def opened(self, source: str, txn_ids: Iterable[int]) -> Visibility:
        """Map each source txn to the next target id; an already-mapped txn keeps its mapping."""
        known = dict(self.txns.get(source, {}))
        next_txn = self.next_txn
        now = set()
        for txn_id in txn_ids:
            now.add(txn_id)
            if txn_id not in known:
                known[txn_id] = Txn(next_txn)
                next_txn += 1
        older = sorted(s for s, t in known.items() if t.state is TxnState.OPEN and s not in now)
        for txn_id in older[: max(0, len(older) + len(now) - MAX_OPEN_TXNS)]:  # MAX_OPEN_TXNS
            del known[txn_id]
        return self._with_txns(source, known, next_txn)

    def committed(self, source: str, txn_id: int, writes: Mapping[str, Iterable[int]]) -> Visibility:
        """The txn's write ids become visible (set union), all tables in this one value."""
        state = self.opened(source, [txn_id])
        tables = dict(state.tables)
        for key, ids in writes.items():
            tables[key.lower()] = tables.get(key.lower(), frozenset()) | frozenset(ids)
        known = dict(state.txns[source])
        known[txn_id] = replace(known[txn_id], state=TxnState.COMMITTED, pending_bytes=0)
        return replace(state, tables=tables)._with_txns(source, known, state.next_txn)

    def aborted(self, source: str, txn_id: int) -> Visibility:
        known = dict(self.txns.get(source, {}))
        txn = known.get(txn_id)
        if txn is None or txn.state is not TxnState.OPEN:
            return self
        known[txn_id] = replace(txn, state=TxnState.ABORTED, pending_bytes=0)
        return self._with_txns(source, known, self.next_txn)

    def noted_bytes(self, source: str, txn_id: int, size: int) -> Visibility:
        """Remember bytes an open txn wrote (ACID_WRITE), so an abort can count them as skipped."""
        state = self.opened(source, [txn_id])
        known = dict(state.txns[source])
        txn = known[txn_id]
        if txn.state is not TxnState.OPEN or size <= 0:
            return state
        known[txn_id] = replace(txn, pending_bytes=txn.pending_bytes + size)
        return state._with_txns(source, known, state.next_txn)

    def _with_txns(self, source: str, known: dict[int, Txn], next_txn: int) -> Visibility:
        finished = sorted(
            (t.target_id, s) for s, t in known.items() if t.state is not TxnState.OPEN
        )
        for _, txn_id in finished[: max(0, len(finished) - MAX_FINISHED_TXNS)]:
            del known[txn_id]
        return replace(self, txns={**self.txns, source: known}, next_txn=next_txn)

    # --- tables ---
    def reset_table(self, key: str) -> Visibility:
        """Forget a table: a (re)created table starts with no committed write ids, as Hive's do."""
        if key.lower() not in self.tables:
            return self
        tables = dict(self.tables)
        del tables[key.lower()]
        return replace(self, tables=tables)

    def copy_table(self, old: str, new: str) -> Visibility:
        """A renamed table keeps its write ids under its new name (replacing what was there)."""
        ids = self.tables.get(old.lower())
        if ids is None or self.tables.get(new.lower()) == ids:
            return self
        return replace(self, tables={**self.tables, new.lower(): ids})

    # --- wire form ---
    def to_json(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "next_txn": self.next_txn,
            "tables": {k: to_ranges(v) for k, v in sorted(self.tables.items())},
            "txns": {
                source: {
                    str(txn_id): {
                        "target": t.target_id,
                        "state": t.state.value,
                        "pending_bytes": t.pending_bytes,
                    }
                    for txn_id, t in sorted(txns.items())
                }
                for source, txns in sorted(self.txns.items())
            },
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Visibility:
        version = raw.get("version")
        if version != FORMAT_VERSION:
            raise ValueError(f"format version {version!r}, expected {FORMAT_VERSION}")
        tables = {str(k): from_ranges(v) for k, v in raw.get("tables", {}).items()}
        txns = {
            str(source): {
                int(txn_id): Txn(int(t["target"]), TxnState(t["state"]), int(t.get("pending_bytes", 0)))
                for txn_id, t in entries.items()
            }
            for source, entries in raw.get("txns", {}).items()
        }
        return cls(tables=tables, txns=txns, next_txn=int(raw["next_txn"]))


# --- the files ----------------------------------------------------------------------------------


def source_file_name(source_id: str) -> str:
    """The file name of ``source_id``'s visibility: readable (the id's letters, digits, ``.``, ``-``
    and ``_``, at most 64 of them) and unique (a digest of the exact id, so ids differing in case or
    in a replaced character, or long ones, never share a file on any filesystem)."""
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", source_id)[:64]
    digest = hashlib.sha256(source_id.encode("utf-8")).hexdigest()[:16]
    return f"{readable}-{digest}.json"


def visibility_url(warehouse_root: str, source_id: str) -> str:
    return f"{warehouse_root.rstrip('/')}/{VISIBILITY_DIR}/{source_file_name(source_id)}"


def legacy_visibility_url(warehouse_root: str) -> str:
    return warehouse_root.rstrip("/") + "/" + LEGACY_VISIBILITY_PATH


def _read(url: str) -> Visibility | None:
    """The visibility in file ``url``, None when there is no such file."""
    fs, path = url_to_fs(url)
    try:
        with fs.open(path, "rb") as fh:
            raw = json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise AcidStateError(f"cannot read ACID visibility file {url}: {exc}") from exc
    try:
        return Visibility.from_json(raw)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise AcidStateError(f"ACID visibility file {url} is malformed: {exc}") from exc


def load_visibility(warehouse_root: str, source_id: str) -> Visibility:
    """What ``source_id`` has made visible on a target (empty when nothing); never partial.

    Its own file; before it wrote one (a replica of an earlier release), its part of the single file
    (``Visibility.for_source``), which is what its first write after the upgrade starts from."""
    own = _read(visibility_url(warehouse_root, source_id))
    if own is not None:
        return own
    legacy = _read(legacy_visibility_url(warehouse_root))
    return Visibility() if legacy is None else legacy.for_source(source_id)


def replica_source(db: str, table: str, params: Mapping[str, str]) -> str:
    """The source whose visibility file holds an ACID replica's commits: its ``streamer.source.id``."""
    source = params.get(REPL_SOURCE_PARAM, "")
    if not source:
        raise AcidStateError(
            f"ACID replica {db}.{table} has no {REPL_SOURCE_PARAM} parameter, so no visibility file is "
            "known for it (every table the target creates has one: was it created or altered by hand?)"
        )
    return source


def visible_write_ids(warehouse_root: str, db: str, table: str, params: Mapping[str, str]) -> list[int]:
    """Committed write ids of the ACID replica ``db.table`` (target names and parameters), ascending."""
    return load_visibility(warehouse_root, replica_source(db, table, params)).write_ids(table_key(db, table))


class VisibilitySnapshot:
    """What readers of several ACID replicas use to see one instant: each source's file is read once,
    when a table of that source is first asked about. A transaction is of one source, so tables of
    one source always agree; sources are independent streams, read at whichever instant comes first."""

    def __init__(self, warehouse_root: str) -> None:
        self.warehouse_root = warehouse_root
        self._sources: dict[str, Visibility] = {}

    def of(self, source_id: str) -> Visibility:
        if source_id not in self._sources:
            self._sources[source_id] = load_visibility(self.warehouse_root, source_id)
        return self._sources[source_id]

    def write_ids(self, db: str, table: str, params: Mapping[str, str]) -> list[int]:
        """Committed write ids of the ACID replica ``db.table`` with target parameters ``params``."""
        return self.of(replica_source(db, table, params)).write_ids(table_key(db, table))


class VisibilityStore:
    """The durable visibility file of one source on a target; ``update`` replaces it atomically.

    The file has one writer, this source's target job (lanes share one store), so the state is read
    once and cached; other sources' jobs write other files. The first write of a source that has no
    file yet starts from its part of the single file of earlier releases."""

    def __init__(self, warehouse_root: str, source_id: str) -> None:
        self.url = visibility_url(warehouse_root, source_id)
        self.warehouse_root = warehouse_root
        self.source_id = source_id
        self._lock = threading.Lock()
        self._current: Visibility | None = None

    def current(self) -> Visibility:
        with self._lock:
            return self._load()

    def update(self, change: Callable[[Visibility], Visibility]) -> Visibility:
        """Apply a pure transition and persist it; an unchanged state writes nothing."""
        with self._lock:
            before = self._load()
            after = change(before)
            foreign = sorted(set(after.txns) - {self.source_id})
            if foreign:
                raise AcidStateError(
                    f"visibility file {self.url} is source {self.source_id!r}'s; "
                    f"a change would record transactions of {foreign}"
                )
            if after != before:
                self._save(after)
                self._current = after
        metrics.TARGET_OPEN_TXNS.set(after.open_count())
        return after

    def _load(self) -> Visibility:
        if self._current is None:
            self._current = load_visibility(self.warehouse_root, self.source_id)
            metrics.TARGET_OPEN_TXNS.set(self._current.open_count())
        return self._current

    def _save(self, state: Visibility) -> None:
        data = (json.dumps(state.to_json(), indent=1, sort_keys=True) + "\n").encode("utf-8")
        fs, path = url_to_fs(self.url)
        directory = posixpath.dirname(path)
        tmp = posixpath.join(directory, f".{posixpath.basename(path)}.{secrets.token_hex(6)}.tmp")
        try:
            fs.makedirs(directory, exist_ok=True)
            if isinstance(fs, LocalFileSystem):
                atomic_write(path, data)
            else:  # object stores: the move is as atomic as the store makes it
                fs.pipe_file(tmp, data)
                fs.mv(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                fs.rm_file(tmp)
            raise AcidStateError(f"cannot write ACID visibility file {self.url}: {exc}") from exc
