"""Hostile events against a real filesystem sandbox: the target's trust boundary holds (docs/security.md).

Each example builds a sandbox (a source tree holding a database the policy excludes, the target's
roots, sibling directories holding sentinel files, a foreign database's data inside the warehouse
root, and another source's external replica inside the external base dir), applies a replicated
database and then random events drawn from hostile pools: locations (``/``, a root itself, ``..``,
other tables' and sibling directories, the excluded database's, spellings of the other source's
external directory, other schemes), names, file URIs (``file://`` outside, other schemes, ``..``, cm
copies elsewhere, no checksum), envelope/payload mismatches, Spark datasource tables and ALTERs of
their file statistics (directory syncs), bootstrap records of every kind, no-op events with names
no metastore holds, OPEN_TXN floods and partition drops of empty specs. Each event is its own plan,
run as the job runs it (a refusal halts its database; the halt is then retried, so the next event
is applied); some examples journal their markers per batch and restart after a crash. Invariants:

- no file or directory outside the target roots is created, changed or deleted, nor anything of
  the foreign database inside them, nor any file of the other source's replica (trees compared);
- **reads**: no file outside the target roots is opened unless (a) it is a file some event (or the
  setup) names *with a checksum*, or that file's cmroot copy, and it lies where the read rules
  allow (below ``--source-prefix``; without one, below a location an event declares for its
  object, or named as a cmroot copy), or (b) it is a function resource (no checksum exists for
  those) below a store derived from a database record (never from the function's own event), or
  (c) it is read by a directory sync, only with ``--source-prefix``, below it, and not inside
  another database's ``<name>.db`` directory than the synced table's. Without a prefix, no sync
  reads anything. Nothing of the foreign database or the other source's replica is read;
- **writes**: an event about one table changes files (outside hidden bookkeeping) of the warehouse
  root only in that table's own directory, and a DROP_PARTITION only inside its partitions'
  directories, never the table's own files;
- no database this source did not create changes in the catalog (a foreign one, another source's),
  and the catalog holds no name a metastore cannot (control characters, over Hive's lengths);
- what records make the target keep stays bounded: the ACID visibility files stay under 2 MB
  whatever OPEN_TXNs arrive, and ``target-state.json`` under 64 KiB whatever names arrive.

``test_hostile_events_keep_the_trust_boundary`` runs 300 examples; the ``slow`` variant 10,000
(selected only with ``-m slow``). docs/security.md ("Tested") lists the checks whose removal each
makes it fail.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import pytest
from fsspec.implementations.local import LocalFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.events.model import (
    AcidWrite,
    AddConstraintsPayload,
    AddPartitionPayload,
    AlterDatabasePayload,
    AlterPartitionPayload,
    AlterTablePayload,
    BootstrapKind,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    BootstrapScope,
    CommitCompactionPayload,
    CommitTxnPayload,
    Constraint,
    CreateFunctionPayload,
    CreateTablePayload,
    DatabasePayload,
    DatabaseSnapshot,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    InsertPayload,
    OpenTxnPayload,
    PartitionSnapshot,
    ResourceUri,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.hive.files import is_hidden
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply import dir_sync
from streamer.target.apply import files as files_module
from streamer.target.apply.applier import Applier
from streamer.target.apply.by_state import PROVIDER_PARAM
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import RunReport, run_plan, run_step
from streamer.target.apply.sources import SourceRules
from streamer.target.state.state_file import STATE_FILE, TargetState
from tests.unit.target import builders as b

pytestmark = pytest.mark.timeout(3600)

SECRET = b"sentinel: never copied, never changed"
LEGIT = b"legit source data"
THEIRS = b"the other source's replicated rows"
CM_NAME = re.compile(r"_[0-9a-f]{64}$")
OTHER_SOURCE, OTHER_DB = "other", "theirs"
OTHER_LOCATION = "hdfs://nn-o:8020/data/sales"  # the other source's external table
MAX_VISIBILITY_BYTES = 2 << 20
MAX_STATE_BYTES = 64 << 10


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclasses.dataclass
class Box:
    """The sandbox: ``src`` is the source, ``wh``/``ext`` the target roots, the rest must not change."""

    root: Path

    def __getattr__(self, name: str) -> Path:
        dirs = {"src": "src", "wh": "wh", "ext": "ext", "state": "state", "sibling": "sibling"}
        if name in dirs:
            return self.root / dirs[name]
        raise AttributeError(name)

    def build(self) -> None:
        for rel, data in {
            "src/a.db/t/f1": LEGIT, "src/a.db/e/f1": LEGIT, "src/a.db/u/f1": LEGIT, "src/lib/u.jar": LEGIT,
            f"src/cm/f1_{_sha(LEGIT)}": LEGIT, "sibling/secret": SECRET, f"sibling/f1_{_sha(LEGIT)}": LEGIT,
            "sibling/a.db/t/f1": SECRET, "wh/foreign.db/t/data": SECRET, "top-sentinel": SECRET,
            "src/excluded.db/t/f1": SECRET,  # a database the replication policy leaves out
        }.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def outside(self) -> dict[str, tuple[str, ...]]:
        """Everything that must not change: all but the target roots and the state, plus the foreign
        database's tree inside the warehouse root."""
        out: dict[str, tuple[str, ...]] = {}
        for current, dirs, names in os.walk(self.root):
            rel_dir = os.path.relpath(current, self.root)
            for name in dirs + names:
                rel = os.path.normpath(os.path.join(rel_dir, name))
                if rel in ("wh", "ext", "state") or rel.startswith(("ext/", "state/")) or (
                        rel.startswith("wh/") and not rel.startswith("wh/foreign.db")):
                    continue
                path = os.path.join(current, name)
                if os.path.islink(path):
                    out[rel] = ("link", os.readlink(path))
                elif os.path.isdir(path):
                    out[rel] = ("dir",)
                else:
                    out[rel] = ("file", _sha(Path(path).read_bytes()))
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(current, d))]
        return out

    def target_files(self) -> dict[str, str]:
        """The visible files of the target roots (hidden bookkeeping, ``_streamer`` and staging trees,
        left out), by path relative to the sandbox."""
        out: dict[str, str] = {}
        for top in (self.wh, self.ext):
            for current, dirs, names in os.walk(top):
                dirs[:] = [d for d in dirs
                           if not is_hidden(d) and not os.path.islink(os.path.join(current, d))]
                for name in names:
                    path = os.path.join(current, name)
                    if not is_hidden(name) and os.path.isfile(path):
                        out[os.path.relpath(path, self.root)] = _sha(Path(path).read_bytes())
        return out

    def tree(self, top: Path) -> dict[str, str | None]:
        """Every file (its sha256) and directory (None) at and below ``top``; {} when absent."""
        if not top.exists():
            return {}
        out: dict[str, str | None] = {".": None}
        for path in top.rglob("*"):
            out[str(path.relative_to(top))] = None if path.is_dir() else _sha(path.read_bytes())
        return out


# --- hostile pools --------------------------------------------------------------------------------

ALIASES = [  # spellings of the other source's external directory
    OTHER_LOCATION, "hdfs://NN-O:8020/data/sales", "hdfs://mallory@nn-o:8020/data/sales", "hdfs://nn-o:8020/data",
    "hdfs://nn-o:8020/data/sales/2026",
]
LOCATIONS = [
    "file://{src}/a.db/t", "file://{src}/a.db/e", "file://{src}/a.db/u", "file://{src}/a.db/t/p=1",
    "file:///", "/", "hdfs://nn/", "hdfs://nn", "file://{root}", "file://{sibling}", "file://{sibling}/a.db/t",
    "file://{src}/a.db/t/../../../sibling", "file://{src}/a.db/%2e%2e/%2e%2e/sibling", "file://{wh}",
    "file://{ext}", "file://{wh}/foreign.db/t", "file://{wh}/foreign.db", "memory://x/y", "file://evil{root}",
    "http://127.0.0.1:9/x", "file://{src}", "file://{ext}/file/_", "hdfs://nn/data/t",
    "file://{src}/excluded.db/t", "file://{src}/excluded.db", *ALIASES,
    # roots and what maps to them, more often: the attacks that reach furthest
    "file:///", "/", "hdfs://nn/", "file://{ext}", "file://{wh}", "file://{ext}/file/_",
]
SYNCED = [  # where a table replicated by state may claim to live: its directory syncs read there
    "file://{src}/a.db/t", "file://{src}/a.db/t", "file://{src}/excluded.db/t", "file://{src}/excluded.db/t",
    "file://{src}/excluded.db", "file://{src}/a.db", "file://{src}", "file://{sibling}", "file://{sibling}/a.db/t",
    "file://{src}/lib", "file://{src}/cm", "file://{wh}/foreign.db/t", "file://{root}", "file:///",
    "file://{src}/a.db/../excluded.db/t",
]
FILES = [  # (uri, content its checksum is of (None: no checksum), cm_uri)
    ("file://{src}/a.db/t/f1", LEGIT, None), ("file://{src}/a.db/t/f1", LEGIT, None),
    ("file://{src}/a.db/t/f1", LEGIT, None), ("file://{src}/a.db/t/f1", None, None),
    ("file://{src}/a.db/t/gone", LEGIT, "file://{src}/cm/f1_" + _sha(LEGIT)),
    ("file://{src}/a.db/t/f1", LEGIT, "file://{sibling}/secret"),
    ("file://{src}/a.db/t/gone", LEGIT, "file://{sibling}/f1_" + _sha(LEGIT)),
    ("file://{sibling}/secret", SECRET, None), ("file://{sibling}/secret", None, None),
    ("file://{sibling}/a.db/t/f1", SECRET, None), ("file://{src}/a.db/u/f1", LEGIT, None),
    ("file://{src}/a.db/e/f1", LEGIT, None), ("file://{src}/a.db/t/../../../sibling/secret", SECRET, None),
    ("file://{src}/a.db/t/%2e%2e/%2e%2e/%2e%2e/sibling/secret", SECRET, None),
    ("file://{wh}/foreign.db/t/data", SECRET, None), ("memory://x/f", LEGIT, None),
    ("http://127.0.0.1:9/f", LEGIT, None), ("zip://f::file://{sibling}/z.zip", LEGIT, None),
    ("file://evil{sibling}/secret", SECRET, None), ("file://{src}/a.db/t/.streamer-tmp-x", LEGIT, None),
    ("file://{src}/a.db/t/..", LEGIT, None), ("file://{top}", SECRET, None),
    ("file://{src}/excluded.db/t/f1", None, None), ("file://{src}/excluded.db/t/f1", None, None),
]
DBS = ["a", "a", "a", "A", "foreign", "other_src", OTHER_DB, "excluded", "../x", "a/b", "b"]
FOREIGN_DBS = ["foreign", "other_src", OTHER_DB]
TABLES = ["t", "t", "e", "u", "../x", "T", "x", "t" * 257]
TYPES = ["MANAGED_TABLE", "EXTERNAL_TABLE"]
VALUES = ["1", "2", "../x", "..", "a/b", ""]
# DROP_PARTITION specs, empty ones often (on tables with a key and without)
SPECS: list[list[list[str]]] = [[["1"]], [[]], [[]], [], [["1", "1"]], [["1"], []]]
HOSTILE_NAMES = [  # envelope names of no-op events: control characters, lengths no metastore holds
    "a\tb\nforeign\t999999", "foreign\n", "a\x00", "d" * 129, "x" * 200_000, "a\x85",
]
KINDS = [
    "create", "insert", "insert", "insert", "add_partition", "add_partition", "drop_table", "drop_partition",
    "drop_partition", "rename", "truncate", "drop_db", "alter_db", "txn", "constraint", "function",
    "function", "spark", "spark", "stats", "stats", "stats", "stats_partition", "bootstrap", "bootstrap",
    "bootstrap_end", "noop", "takeover", "flood",
]


def _fill(template: str, box: Box) -> str:
    return template.format(src=box.src, root=box.root, sibling=box.sibling, wh=box.wh, ext=box.ext,
                           top=box.root / "top-sentinel")


@st.composite
def hostile_events(draw: st.DrawFn, box: Box) -> list[Event]:
    """Up to 10 events from the pools (a takeover is two), each either consistent or with a
    mismatched envelope."""
    location = st.sampled_from(LOCATIONS).map(lambda t: _fill(t, box))
    synced = st.sampled_from(SYNCED).map(lambda t: _fill(t, box))

    known = [b.table("a", "t", location=f"file://{box.src}/a.db/t")]  # created by the setup

    def table(db: str | None = None, new: bool = False) -> TableSnapshot:
        """Mostly a table seen before, the newest most often (so that events build on each other), maybe
        moved; or a new one."""
        pick = 0 if new else draw(st.integers(0, 5))
        if pick > 0:
            snap = known[-1] if pick > 2 else draw(st.sampled_from(known))
            if draw(st.integers(0, 3)) == 0:
                snap = dataclasses.replace(snap, sd=StorageDescriptor(location=draw(location)))
            return snap
        snap = b.table(db or draw(st.sampled_from(DBS)), draw(st.sampled_from(TABLES)),
                       tuple(draw(st.sampled_from([(), ("p",)]))), location=draw(location),
                       table_type=draw(st.sampled_from(TYPES)))
        known.append(snap)
        return snap

    def spark_table(db: str | None = None) -> TableSnapshot:
        """A managed Spark datasource table (replicated by state: its directories are synced)."""
        name, keys = draw(st.sampled_from(TABLES)), tuple(draw(st.sampled_from([(), (), ("p",)])))
        snap = b.table(db or draw(st.sampled_from(["a", "a", "excluded", "b"])), name, keys,
                       location=draw(synced), **{PROVIDER_PARAM: "parquet", "numFiles": "1"})
        known.append(snap)
        return snap

    def refs() -> list[FileRef]:
        out = []
        legit = [FILES[0]] if draw(st.booleans()) else []  # a readable file: the write rules get tested
        for uri, content, cm in legit + draw(st.lists(st.sampled_from(FILES), max_size=3)):
            out.append(FileRef(_fill(uri, box), _sha(content) if content else None,
                               "sha256" if content else None, _fill(cm, box) if cm else None,
                               partition=draw(st.sampled_from([None, "p=1"]))))
        return out

    def stats(params: dict[str, str]) -> dict[str, str]:
        return {**params, "numFiles": str(int(params.get("numFiles", "0") or 0) + 1)}

    def bootstrap(event_id: int) -> Event:
        """One record of bootstrap ``event_id`` (its own id: each is applied), of any kind, about an
        owned, new or foreign database; the envelope names what the payload does."""
        kind = draw(st.sampled_from(list(BootstrapKind)))
        db = draw(st.sampled_from(["a", "b", *FOREIGN_DBS, *FOREIGN_DBS]))
        scope = draw(st.sampled_from(list(BootstrapScope)))
        fields: dict[str, Any] = {}
        if kind is BootstrapKind.DATABASE:
            fields["database"] = DatabaseSnapshot(db, location=draw(location))
        elif kind is BootstrapKind.FUNCTION:
            uri = _fill(draw(st.sampled_from(["file://{src}/lib/u.jar", *(f for f, _, _ in FILES)])), box)
            fields["function"] = FunctionSnapshot("f", db, "evil.Udf",
                                                  resource_uris=[ResourceUri("JAR", uri)])
        else:
            name = draw(st.sampled_from(TABLES))
            keys = ("p",) if kind is BootstrapKind.PARTITIONS else tuple(draw(st.sampled_from([(), ("p",)])))
            spark = {PROVIDER_PARAM: "parquet"} if draw(st.integers(0, 3)) == 0 else {}
            snap = b.table(db, name, keys, location=draw(location), table_type=draw(st.sampled_from(TYPES)),
                           **spark)
            known.append(snap)
            fields["table"] = snap
            if kind is not BootstrapKind.DROP_TABLE:
                fields["files"] = refs()
                if keys:
                    fields["partitions"] = [PartitionSnapshot([draw(st.sampled_from(VALUES))], db, name,
                                                              StorageDescriptor(location=draw(location)))]
        payload = BootstrapObjectPayload(event_id, 1, 1, kind, scope, **fields)
        return b.event(event_id, EventType.BOOTSTRAP, payload, db=db,
                       table=payload.table.name if payload.table else None)

    events: list[Event] = []
    count = draw(st.integers(1, 10))
    event_id = 10
    while len(events) < count:
        kind = "create" if not events else draw(st.sampled_from(KINDS))
        if kind == "spark":
            snap = spark_table("a" if draw(st.booleans()) else None)
        elif kind in ("stats", "stats_partition") and draw(st.booleans()):
            snap = next((s for s in reversed(known) if PROVIDER_PARAM in s.parameters), None) or spark_table()
        else:
            snap = table("a" if draw(st.booleans()) else None, new=kind == "create")
        batch: list[Event] = []
        if kind == "create":
            batch.append(b.create_table(event_id, snap, refs()))
        elif kind == "spark":  # created (mostly without files: it is synced), then its statistics change
            files = refs() if draw(st.integers(0, 2)) == 0 else []
            moved = draw(synced) if draw(st.integers(0, 3)) == 0 else snap.sd.location
            after = dataclasses.replace(snap, sd=StorageDescriptor(location=moved),
                                        parameters=stats(snap.parameters))
            batch += [b.create_table(event_id, snap, files), b.alter_table(event_id + 1, snap, after)]
        elif kind == "insert":
            values = [draw(st.sampled_from(VALUES))] if snap.partition_keys else None
            batch.append(b.insert(event_id, snap, refs(), values=values, replace=draw(st.booleans())))
        elif kind == "add_partition":
            where = draw(synced if PROVIDER_PARAM in snap.parameters else location)
            part = PartitionSnapshot([draw(st.sampled_from(VALUES))], snap.db, snap.name,
                                     StorageDescriptor(location=where))
            batch.append(b.add_partition(event_id, snap, [part], refs()))
        elif kind == "drop_table":
            batch.append(b.drop_table(event_id, snap))
        elif kind == "drop_partition":
            specs: list[list[str]] = draw(st.sampled_from([*SPECS, [[draw(st.sampled_from(VALUES))]]]))
            batch.append(b.drop_partition(event_id, snap, specs))
        elif kind in ("rename", "truncate"):
            after = table() if kind == "rename" else snap
            batch.append(b.alter_table(event_id, snap, after, truncate=kind == "truncate"))
        elif kind == "stats":  # an ALTER of the file statistics: a table replicated by state is synced
            moved = draw(synced) if draw(st.integers(0, 2)) == 0 else snap.sd.location
            after = dataclasses.replace(snap, sd=StorageDescriptor(location=moved),
                                        parameters=stats(snap.parameters))
            batch.append(b.alter_table(event_id, snap, after))
        elif kind == "stats_partition":
            value = draw(st.sampled_from(VALUES))
            part = PartitionSnapshot([value], snap.db, snap.name, StorageDescriptor(location=draw(synced)))
            later = dataclasses.replace(part, parameters=stats(part.parameters))
            alter = AlterPartitionPayload(snap, part, later)
            batch.append(b.event(event_id, EventType.ALTER_PARTITION, alter, snap.db, snap.name))
        elif kind == "drop_db":
            name = draw(st.sampled_from(DBS))
            drop = DatabasePayload(DatabaseSnapshot(name))
            batch.append(b.event(event_id, EventType.DROP_DATABASE, drop, name))
        elif kind == "alter_db":  # moves the database's recorded source location: what resources derive from
            name = draw(st.sampled_from(DBS))
            after_db = DatabaseSnapshot(name, location=draw(location))
            alter_db = AlterDatabasePayload(DatabaseSnapshot(name), after_db)
            batch.append(b.event(event_id, EventType.ALTER_DATABASE, alter_db, name))
        elif kind == "txn":
            write = AcidWrite(snap.db, snap.name, 1, refs(), table_snapshot=snap)
            batch.append(b.event(event_id, EventType.COMMIT_TXN, CommitTxnPayload(event_id, [write])))
        elif kind == "constraint":
            pk = AddConstraintsPayload([Constraint("PRIMARY_KEY", "pk", snap.db, snap.name, "id")])
            batch.append(b.event(event_id, EventType.ADD_PRIMARYKEY, pk, snap.db, snap.name))
        elif kind == "function":
            uri = _fill(draw(st.sampled_from(["file://{src}/lib/u.jar", *(f for f, _, _ in FILES)])), box)
            fn = FunctionSnapshot("f", snap.db, "C", resource_uris=[ResourceUri("JAR", uri)])
            batch.append(b.event(event_id, EventType.CREATE_FUNCTION, CreateFunctionPayload(fn), snap.db))
        elif kind == "bootstrap":
            batch.append(bootstrap(event_id))
        elif kind == "bootstrap_end":  # the closing marker of a FULL bootstrap moves repl.last.id
            dbs = draw(st.lists(st.sampled_from(["a", "b", *FOREIGN_DBS]), min_size=1, max_size=3))
            marker = BootstrapMarkerPayload(event_id, 1, BootstrapScope.FULL, dbs)
            batch.append(b.event(event_id, EventType.BOOTSTRAP_END, marker))
        elif kind == "noop":  # names no metastore holds: a forged journal line, a state file growing
            db = draw(st.sampled_from([*HOSTILE_NAMES, "a", "foreign"]))
            envelope_table = draw(st.sampled_from([None, "t", *HOSTILE_NAMES]))
            noop = CommitCompactionPayload(event_id)
            batch.append(b.event(event_id, EventType.COMMIT_COMPACTION, noop, db, envelope_table))
        elif kind == "takeover":  # another source's external directory, then an overwrite of no file
            taken = b.table(draw(st.sampled_from(["a", "b"])), draw(st.sampled_from(["t", "x"])),
                            location=draw(st.sampled_from(ALIASES)), table_type="EXTERNAL_TABLE")
            known.append(taken)
            batch += [b.create_table(event_id, taken), b.insert(event_id + 1, taken, [], replace=True)]
        else:  # an OPEN_TXN flood: one event over the bound, or batches below it that add up past it
            sizes = draw(st.sampled_from([[20_000], [30_000], [9_000] * 3]))
            for i, size in enumerate(sizes):
                first = (event_id + i) * 100_000
                txns = OpenTxnPayload(list(range(first, first + size)))
                batch.append(b.event(event_id + i, EventType.OPEN_TXN, txns))
        if kind != "noop" and draw(st.integers(0, 3)) == 0:  # a mismatched envelope: acting elsewhere
            batch[0] = dataclasses.replace(batch[0], db=draw(st.sampled_from([None, *DBS])),
                                           table=draw(st.sampled_from([None, *TABLES])))
        events += batch
        event_id += len(batch)
    return events


# --- recording what is opened ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Read:
    """One source access: a URL resolved or a local path opened or listed, and the directory sync
    (its source and target directories) it happened in, if any."""

    url: str
    sync: tuple[str, str] | None = None


@contextlib.contextmanager
def recorded_reads() -> Iterator[list[Read]]:
    """Every URL the copier resolves to read a source, every local path opened for reading or
    listed, each tagged with the directory sync it is part of."""
    reads: list[Read] = []
    syncing: list[tuple[str, str]] = []
    real_url_to_fs, real_open, real_ls = files_module.url_to_fs, LocalFileSystem._open, LocalFileSystem.ls
    real_sync = dir_sync.sync_dir

    def tag() -> tuple[str, str] | None:
        return syncing[-1] if syncing else None

    def url_to_fs(url: str) -> Any:
        reads.append(Read(url, tag()))
        return real_url_to_fs(url)

    def local_open(fs: LocalFileSystem, path: str, mode: str = "rb", *args: Any, **kw: Any) -> Any:
        if "r" in mode:
            reads.append(Read(str(path), tag()))
        return real_open(fs, path, mode, *args, **kw)

    def local_ls(fs: LocalFileSystem, path: str, *args: Any, **kw: Any) -> Any:
        reads.append(Read(str(path), tag()))
        return real_ls(fs, path, *args, **kw)

    def sync_dir(copier: Any, source_dir: str, target_dir: str, *args: Any, **kw: Any) -> Any:
        syncing.append((source_dir, target_dir))
        try:
            return real_sync(copier, source_dir, target_dir, *args, **kw)
        finally:
            syncing.pop()

    with mock.patch.object(files_module, "url_to_fs", url_to_fs), \
            mock.patch.object(LocalFileSystem, "_open", local_open), \
            mock.patch.object(LocalFileSystem, "ls", local_ls), \
            mock.patch.object(dir_sync, "sync_dir", sync_dir):
        yield reads


def _declared(events: list[Event], kind: type = StorageDescriptor) -> list[str]:
    """Paths (``/``-terminated) of every location the events declare for objects of ``kind``
    (``StorageDescriptor``: tables and partitions, the default mode's stores for data files;
    ``DatabaseSnapshot``: databases, and the parent of a ``<name>.db`` one, for resources)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        location = getattr(value, "location", None) if isinstance(value, kind) else None
        if location:
            path = urlsplit(location).path.rstrip("/")
            found.append(path + "/")
            parent, _, name = path.rpartition("/")
            if kind is DatabaseSnapshot and name.endswith(".db") and name != ".db" and parent:
                found.append(parent + "/")
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name))

    walk(events)
    return [p for p in found if p not in ("/", "")]


def _path(url: str) -> str:
    return urlsplit(url).path if "://" in url or url.startswith("file:") else url


def _vouched(refs: list[FileRef]) -> set[str]:
    """Paths a record vouches for: files named with a checksum, and their cmroot copies."""
    out: set[str] = set()
    for ref in refs:
        if ref.checksum:
            out.add(_path(ref.uri))
            if ref.cm_uri:
                out.add(_path(ref.cm_uri))
    return out


def _synced_database(box: Box, target_dir: str) -> str | None:
    """The database a sync writes for, from its target directory (``<wh>/<db>.db/...``)."""
    rel = _path(target_dir)[len(str(box.wh)) + 1:] if _path(target_dir).startswith(str(box.wh) + "/") else ""
    first = rel.split("/", 1)[0]
    return first[: -len(".db")].lower() if first.endswith(".db") else None


def _other_db_dir(box: Box, path: str, database: str | None) -> str | None:
    """The first ``<name>.db`` directory below the source prefix holding ``path`` for a name other
    than ``database``, or None."""
    walked = str(box.src)
    for segment in path[len(walked):].strip("/").split("/"):
        walked += "/" + segment
        if segment.lower().endswith(".db") and len(segment) > 3 and segment.lower()[:-3] != (database or ""):
            return walked
    return None


def _check_reads(
    box: Box, reads: list[Read], events: list[Event], prefix_mode: bool, setup: Sequence[FileRef] = (),
    theirs: str | None = None,
) -> None:
    targets = (str(box.wh) + "/", str(box.ext) + "/")
    src = str(box.src) + "/"
    protected = [str(box.wh / "foreign.db") + "/", *([theirs.rstrip("/") + "/"] if theirs else [])]
    declared = _declared(events)
    vouched = _vouched([*setup, *_all(events, FileRef)])
    # the setup's database "a" is at {src}/a.db: resources may come from below it or {src}
    derived = [str(box.src / "a.db") + "/", src, *_declared(events, DatabaseSnapshot)]
    resources = {urlsplit(r.uri).path for r in _all(events, ResourceUri)}
    only_resources = resources - {urlsplit(f.uri).path for f in _all(events, FileRef)}
    for read in reads:
        url, path = read.url, _path(read.url)
        scheme = urlsplit(url).scheme
        assert scheme in ("", "file"), f"opened through another filesystem: {url}"
        assert not any((path + "/").startswith(p) for p in protected), (
            f"read the foreign database's or the other source's data: {url}")
        if path.startswith(targets) or path.rstrip("/") in (str(box.wh), str(box.ext)):
            continue  # the target's own files: staged copies, the copier's idempotence check, listings
        if read.sync is not None:
            assert prefix_mode, f"a directory sync read without --source-prefix: {url} (of {read.sync[0]})"
            assert path.startswith(src), f"a directory sync read outside --source-prefix: {url}"
            other = _other_db_dir(box, path, _synced_database(box, read.sync[1]))
            assert other is None, f"a directory sync read inside another database's directory {other}: {url}"
            continue
        below = [src] if prefix_mode else derived
        as_resource = path in resources and any(path.startswith(p) for p in below)
        if path in only_resources:
            assert as_resource, f"resource read from no derived store: {url}"
            continue
        assert as_resource or path in vouched, f"read a file no record checksums: {url}"
        if prefix_mode:
            assert path.startswith(src), f"read outside --source-prefix: {url}"
        else:  # a data file (or a URI both a data file and a resource)
            cm = CM_NAME.search(path) is not None
            assert cm or as_resource or any(path.startswith(p) or path == p for p in declared), (
                f"read undeclared {url}")


def _all(value: Any, kind: type) -> list[Any]:
    """Every ``kind`` object inside ``value`` (events, payloads, snapshots)."""
    if isinstance(value, kind):
        return [value]
    if isinstance(value, list):
        return [x for item in value for x in _all(item, kind)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [x for f in dataclasses.fields(value) for x in _all(getattr(value, f.name), kind)]
    return []


# --- where an event may write ---------------------------------------------------------------------

_ONE_TABLE = (InsertPayload, AddPartitionPayload, DropPartitionPayload, AlterPartitionPayload,
              CreateTablePayload, DropTablePayload, AlterTablePayload)


def _write_scope(event: Event) -> tuple[str, bool] | None:
    """(the warehouse directory, relative to the sandbox, an event about one table may change files
    in; whether only inside its partitions' directories), or None for events of several objects."""
    payload = event.payload
    if not isinstance(payload, _ONE_TABLE) or (isinstance(payload, AlterTablePayload) and payload.is_rename):
        return None
    snap = payload.after if isinstance(payload, AlterTablePayload) else payload.table
    if snap is None:
        return None
    return f"wh/{snap.db.lower()}.db/{snap.name.lower()}/", isinstance(payload, DropPartitionPayload)


def _check_writes(event: Event, before: dict[str, str], after: dict[str, str]) -> None:
    scope = _write_scope(event)
    if scope is None:
        return
    own, partitions_only = scope
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    for path in sorted(changed):
        if not path.startswith("wh/"):
            continue  # external directories: their owners and the other source's replica are checked
        assert path.startswith(own), (
            f"event {event.event_id} ({event.event_type}) about {own} changed {path}, another object's")
        if partitions_only:
            assert "=" in path[len(own):].split("/", 1)[0] and "/" in path[len(own):], (
                f"event {event.event_id} (DROP_PARTITION) changed {path}: the table's own files, "
                "not a partition's")


# --- the catalog and what the target keeps --------------------------------------------------------

FOREIGN = ("foreign", "other_src", OTHER_DB)  # a database not replicated, one of another source, its replica


def _foreign(catalog: MemoryCatalog) -> dict[str, Any]:
    """The catalog objects of the databases this source did not create."""
    out: dict[str, Any] = {}
    for kind, objects in catalog.dump().items():
        assert isinstance(objects, dict)
        for key, value in objects.items():
            if (key if isinstance(key, str) else key[0]) in FOREIGN:
                out[f"{kind}:{key}"] = value
    return out


def _check_names(catalog: MemoryCatalog) -> None:
    """The catalog holds only names a metastore can hold (Hive's ``DBS.NAME`` and ``TBLS.TBL_NAME``
    lengths, no control character): a record's odd name never reaches the metastore."""
    def odd(name: str, limit: int) -> bool:
        return len(name) > limit or any(c < " " or "\x7f" <= c <= "\x9f" for c in name)

    for db in catalog.databases:
        assert not odd(db, 128), f"database name {db[:80]!r} in the catalog"
    for _, table in catalog.tables:
        assert not odd(table, 256), f"table name {table[:80]!r} in the catalog"


def _check_kept(box: Box) -> None:
    acid = box.wh / "_streamer" / "acid"
    kept = sum(p.stat().st_size for p in acid.rglob("*") if p.is_file()) if acid.exists() else 0
    assert kept < MAX_VISIBILITY_BYTES, f"the ACID visibility files grew to {kept} bytes"
    state = box.state / STATE_FILE
    size = state.stat().st_size if state.exists() else 0
    assert size < MAX_STATE_BYTES, f"{STATE_FILE} grew to {size} bytes"


# --- the example --------------------------------------------------------------------------------


@dataclasses.dataclass
class Setup:
    applier: Applier
    catalog: MemoryCatalog
    state: TargetState
    refs: list[FileRef]
    theirs: Path  # the other source's external replica directory
    make: Callable[[], Applier]  # this source's applier again, as after a restart


def _setup(box: Box, prefix_mode: bool, layout: str, per_batch: bool) -> Setup:
    catalog = MemoryCatalog()
    catalog.create_database(DatabaseSnapshot("foreign", location=str(box.wh / "foreign.db")))
    catalog.create_table(TableSnapshot("t", "foreign", sd=StorageDescriptor(str(box.wh / "foreign.db/t"))))
    catalog.create_database(DatabaseSnapshot("other_src", parameters={REPL_SOURCE_PARAM: OTHER_SOURCE}))
    rules = SourceRules((box.src.as_uri(),)) if prefix_mode else SourceRules()
    paths = TargetPaths(box.wh.as_uri(), box.ext.as_uri(), layout)
    # the other source's job: its own applier and state dir, the same metastore and roots
    other_state = TargetState(box.root / "state-other")
    other = Applier(catalog, FileCopier(max_workers=2), paths, OTHER_SOURCE, state=other_state)
    sales = b.table(OTHER_DB, "sales", location=OTHER_LOCATION, table_type="EXTERNAL_TABLE")
    report = run_plan(other, plan([b.create_db(1, OTHER_DB), b.create_table(2, sales)], {}), other_state)
    assert report.applied == [1, 2], report
    replica = catalog.get_table(OTHER_DB, "sales")
    assert replica is not None and replica.sd.location is not None
    theirs = Path(_path(replica.sd.location))
    theirs.mkdir(parents=True, exist_ok=True)
    (theirs / "000000_0").write_bytes(THEIRS)

    state = TargetState(box.state)

    def make() -> Applier:
        return Applier(catalog, FileCopier(max_workers=2), paths, b.SOURCE_ID, state=state, sources=rules,
                       markers_per_batch=per_batch)

    applier = make()
    t = b.table("a", "t", location=f"file://{box.src}/a.db/t")
    legit = FileRef(f"file://{box.src}/a.db/t/f1", _sha(LEGIT), "sha256")
    a = DatabasePayload(DatabaseSnapshot("a", location=f"file://{box.src}/a.db"))
    events = [b.event(1, EventType.CREATE_DATABASE, a, "a"), b.create_table(2, t), b.insert(3, t, [legit])]
    assert run_plan(applier, plan(events, {}), state).applied == [1, 2, 3]
    return Setup(applier, catalog, state, [legit], theirs, make)


class _Crash(Exception):
    """The job dies mid-batch: its markers are not written, its journal stays."""


def _apply_each(box: Box, s: Setup, events: list[Event], per_batch: bool) -> None:
    """Each event as its own plan, run as the job runs it; a halt is checked against the bounds,
    then retried, so that the next event is applied. ``per_batch``: all in one batch journaling its
    markers, which crashes at its end; the restarted job then writes the journaled markers."""
    applier, state = s.applier, s.state

    def one(event: Event) -> None:
        before = box.target_files()
        report = RunReport()
        for step in plan([event], applier.load_progress(), state.halts()).steps:
            run_step(applier, step, state, report)
        _check_writes(event, before, box.target_files())
        _check_kept(box)
        for db in state.halts():
            state.retry(db)

    if not per_batch:
        for event in events:
            one(event)
        return
    with contextlib.suppress(_Crash), applier.batch(max(len(events), 8)):
        for event in events:
            one(event)
        raise _Crash
    s.make().load_progress()  # the restart: journaled steps get their markers
    _check_kept(box)


def _run_example(
    draw_events: Callable[[Box], list[Event]], prefix_mode: bool, layout: str, per_batch: bool = False
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box = Box(Path(tmp))
        box.build()
        s = _setup(box, prefix_mode, layout, per_batch)
        outside, foreign, theirs = box.outside(), _foreign(s.catalog), box.tree(s.theirs)
        events = draw_events(box)
        with recorded_reads() as reads:
            _apply_each(box, s, events, per_batch)
        assert box.outside() == outside, "changed outside the target roots (or the foreign database)"
        assert box.tree(s.theirs) == theirs, "the other source's external replica changed"
        assert _foreign(s.catalog) == foreign, "a database this source did not create changed"
        _check_names(s.catalog)
        _check_reads(box, reads, events, prefix_mode, s.refs, str(s.theirs))


def _property(data: st.DataObject, prefix_mode: bool, layout: str, per_batch: bool) -> None:
    _run_example(lambda box: data.draw(hostile_events(box)), prefix_mode, layout, per_batch)


MODES = st.booleans()
LAYOUTS = st.sampled_from(["authority", "path"])
BATCHES = st.sampled_from([False, False, False, True])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), prefix_mode=MODES, layout=LAYOUTS, per_batch=BATCHES)
def test_hostile_events_keep_the_trust_boundary(
    data: st.DataObject, prefix_mode: bool, layout: str, per_batch: bool
) -> None:
    _property(data, prefix_mode, layout, per_batch)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), prefix_mode=MODES, layout=LAYOUTS, per_batch=BATCHES)
def test_hostile_events_keep_the_trust_boundary_long(
    data: st.DataObject, prefix_mode: bool, layout: str, per_batch: bool
) -> None:
    _property(data, prefix_mode, layout, per_batch)


@pytest.fixture(autouse=True)
def _only_selected_slow(request: pytest.FixtureRequest) -> None:
    """The long variant runs only when asked for (``-m slow``), not in every ``pytest tests/unit``."""
    if request.node.get_closest_marker("slow") and "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("10,000 examples: run with -m slow")
    if request.node.get_closest_marker("slow") and "not slow" in (request.config.option.markexpr or ""):
        pytest.skip("deselected")


def test_the_sandbox_sees_what_the_old_code_did(tmp_path: Path) -> None:
    """The invariants catch the attacks of issues 27 and 38 (else the property would prove nothing)."""
    box = Box(tmp_path)
    box.build()
    before = box.outside()
    (box.root / "sibling" / "secret").write_bytes(b"changed")
    assert box.outside() != before
    with recorded_reads() as reads:
        LocalFileSystem().open(str(box.sibling / "secret"), "rb").close()
    with pytest.raises(AssertionError, match="read a file no record checksums"):
        _check_reads(box, reads, [], prefix_mode=True)
    with pytest.raises(AssertionError, match="read a file no record checksums"):
        _check_reads(box, reads, [], prefix_mode=False)
    # before the derived stores: a function's own event was all a resource needed
    jar = ResourceUri("JAR", (box.sibling / "secret").as_uri())
    fn = FunctionSnapshot("f", "a", "C", resource_uris=[jar])
    function = b.event(9, EventType.CREATE_FUNCTION, CreateFunctionPayload(fn), "a")
    with pytest.raises(AssertionError, match="resource read from no derived store"):
        _check_reads(box, reads, [function], prefix_mode=False)
    # before issue 38 item 2: a location an event declares was enough, checksum or not
    t = b.table("a", "t", location=f"file://{box.src}/a.db/t")
    unverified = b.insert(9, t, [FileRef(f"file://{box.src}/a.db/t/f1")])
    read = [Read(str(box.src / "a.db" / "t" / "f1"))]
    with pytest.raises(AssertionError, match="read a file no record checksums"):
        _check_reads(box, read, [unverified], prefix_mode=False)
    # ... and a directory sync read what it listed: anywhere without a prefix, another database's
    # directory with one
    synced = [Read(str(box.src / "excluded.db" / "t" / "f1"), ("x", str(box.wh / "a.db" / "t")))]
    with pytest.raises(AssertionError, match="sync read without --source-prefix"):
        _check_reads(box, synced, [], prefix_mode=False)
    with pytest.raises(AssertionError, match="inside another database's directory"):
        _check_reads(box, synced, [], prefix_mode=True)
    own = [Read(str(box.src / "excluded.db" / "t" / "f1"), ("x", str(box.wh / "excluded.db" / "t")))]
    _check_reads(box, own, [], prefix_mode=True)
    # before issue 38 item 9: an empty spec's drop deleted the table's own files
    drop = b.drop_partition(9, t, [[]])
    with pytest.raises(AssertionError, match="the table's own files"):
        _check_writes(drop, {"wh/a.db/t/f1": "x", "wh/a.db/t/p=1/f": "y"}, {"wh/a.db/t/p=1/f": "y"})
    _check_writes(drop, {"wh/a.db/t/f1": "x", "wh/a.db/t/p=1/f": "y"}, {"wh/a.db/t/f1": "x"})
    with pytest.raises(AssertionError, match="another object's"):
        _check_writes(b.insert(9, t, []), {"wh/a.db/u/f1": "x"}, {})
