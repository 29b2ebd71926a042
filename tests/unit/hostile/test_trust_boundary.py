"""Hostile events against a real filesystem sandbox: the target's trust boundary holds (docs/security.md).

Each example builds a sandbox (a source tree, the target's roots, sibling directories holding
sentinel files, a foreign database's data inside the warehouse root), applies a replicated database
and then random events drawn from hostile pools: locations (``/``, a root itself, ``..``, other
tables' and sibling directories, other schemes), names, file URIs (``file://`` outside, other
schemes, ``..``, cm copies elsewhere), envelope/payload mismatches and missing checksums. Each event
is applied on its own (a refused one halts nothing that the next would need). Invariants:

- no file or directory outside the target roots is created, changed or deleted, nor anything of
  the foreign database inside them (sentinel trees compared before and after);
- no file is opened for reading outside the allowed sources: with ``--source-prefix``, only below
  it; without, only below a location some event declared for its object (or a cmroot copy named
  for its file), and never inside a target root; a function's resource (a URI no event names as a
  data file) only below a store derived from a database record (a database's location, its
  ``<root>/<name>.db`` warehouse root), never from the function's own event;
- no database this source did not create changes in the catalog (a foreign one, another source's).

``test_hostile_events_keep_the_trust_boundary`` runs 300 examples; the ``slow`` variant 10,000
(selected only with ``-m slow``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import pytest
from fsspec.implementations.local import LocalFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.errors import StreamerError
from streamer.events.model import (
    AcidWrite,
    AddConstraintsPayload,
    AlterDatabasePayload,
    CommitTxnPayload,
    Constraint,
    CreateFunctionPayload,
    DatabasePayload,
    DatabaseSnapshot,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    ResourceUri,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.metastore.memory_catalog import MemoryCatalog
from streamer.target.apply import files as files_module
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.sources import SourceRules
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b

pytestmark = pytest.mark.timeout(3600)

SECRET = b"sentinel: never copied, never changed"
LEGIT = b"legit source data"
CM_NAME = re.compile(r"_[0-9a-f]{64}$")


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


# --- hostile pools --------------------------------------------------------------------------------

LOCATIONS = [
    "file://{src}/a.db/t", "file://{src}/a.db/e", "file://{src}/a.db/u", "file://{src}/a.db/t/p=1",
    "file:///", "/", "hdfs://nn/", "hdfs://nn", "file://{root}", "file://{sibling}", "file://{sibling}/a.db/t",
    "file://{src}/a.db/t/../../../sibling", "file://{src}/a.db/%2e%2e/%2e%2e/sibling", "file://{wh}",
    "file://{ext}", "file://{wh}/foreign.db/t", "file://{wh}/foreign.db", "memory://x/y", "file://evil{root}",
    "http://127.0.0.1:9/x", "file://{src}", "file://{ext}/file/_", "hdfs://nn/data/t",
    # roots and what maps to them, more often: the attacks that reach furthest
    "file:///", "/", "hdfs://nn/", "file://{ext}", "file://{wh}", "file://{ext}/file/_",
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
]
DBS = ["a", "a", "a", "A", "foreign", "other_src", "../x", "a/b", "b"]
TABLES = ["t", "t", "e", "u", "../x", "T", "x"]
TYPES = ["MANAGED_TABLE", "EXTERNAL_TABLE"]
VALUES = ["1", "2", "../x", "..", "a/b", ""]


def _fill(template: str, box: Box) -> str:
    return template.format(src=box.src, root=box.root, sibling=box.sibling, wh=box.wh, ext=box.ext,
                           top=box.root / "top-sentinel")


@st.composite
def hostile_events(draw: st.DrawFn, box: Box) -> list[Event]:
    """Up to 10 events from the pools, each either consistent or with a mismatched envelope."""
    location = st.sampled_from(LOCATIONS).map(lambda t: _fill(t, box))

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

    def refs() -> list[FileRef]:
        out = []
        legit = [FILES[0]] if draw(st.booleans()) else []  # a readable file: the write rules get tested
        for uri, content, cm in legit + draw(st.lists(st.sampled_from(FILES), max_size=3)):
            out.append(FileRef(_fill(uri, box), _sha(content) if content else None,
                               "sha256" if content else None, _fill(cm, box) if cm else None,
                               partition=draw(st.sampled_from([None, "p=1"]))))
        return out

    events: list[Event] = []
    for event_id in range(10, 10 + draw(st.integers(1, 10))):
        kind = "create" if event_id == 10 else draw(st.sampled_from(
            ["create", "insert", "insert", "insert", "add_partition", "add_partition", "drop_table",
             "drop_partition", "rename", "truncate", "drop_db", "alter_db", "txn", "constraint", "function",
             "function"]))
        snap = table("a" if draw(st.booleans()) else None, new=kind == "create")
        if kind == "create":
            event = b.create_table(event_id, snap, refs())
        elif kind == "insert":
            values = [draw(st.sampled_from(VALUES))] if snap.partition_keys else None
            event = b.insert(event_id, snap, refs(), values=values, replace=draw(st.booleans()))
        elif kind == "add_partition":
            part = PartitionSnapshot([draw(st.sampled_from(VALUES))], snap.db, snap.name,
                                     StorageDescriptor(location=draw(location)))
            event = b.add_partition(event_id, snap, [part], refs())
        elif kind == "drop_table":
            event = b.drop_table(event_id, snap)
        elif kind == "drop_partition":
            event = b.drop_partition(event_id, snap, [[draw(st.sampled_from(VALUES))]])
        elif kind in ("rename", "truncate"):
            after = table() if kind == "rename" else snap
            event = b.alter_table(event_id, snap, after, truncate=kind == "truncate")
        elif kind == "drop_db":
            name = draw(st.sampled_from(DBS))
            event = b.event(event_id, EventType.DROP_DATABASE, DatabasePayload(DatabaseSnapshot(name)), name)
        elif kind == "alter_db":  # moves the database's recorded source location: what resources derive from
            name = draw(st.sampled_from(DBS))
            after = DatabaseSnapshot(name, location=draw(location))
            alter = AlterDatabasePayload(DatabaseSnapshot(name), after)
            event = b.event(event_id, EventType.ALTER_DATABASE, alter, name)
        elif kind == "txn":
            write = AcidWrite(snap.db, snap.name, 1, refs(), table_snapshot=snap)
            event = b.event(event_id, EventType.COMMIT_TXN, CommitTxnPayload(event_id, [write]))
        elif kind == "constraint":
            pk = AddConstraintsPayload([Constraint("PRIMARY_KEY", "pk", snap.db, snap.name, "id")])
            event = b.event(event_id, EventType.ADD_PRIMARYKEY, pk, snap.db, snap.name)
        else:
            uri = _fill(draw(st.sampled_from(["file://{src}/lib/u.jar", *(f for f, _, _ in FILES)])), box)
            fn = FunctionSnapshot("f", snap.db, "C", resource_uris=[ResourceUri("JAR", uri)])
            event = b.event(event_id, EventType.CREATE_FUNCTION, CreateFunctionPayload(fn), snap.db)
        if draw(st.integers(0, 3)) == 0:  # a mismatched envelope: the payload acts elsewhere
            event = dataclasses.replace(event, db=draw(st.sampled_from([None, *DBS])),
                                        table=draw(st.sampled_from([None, *TABLES])))
        events.append(event)
    return events


# --- recording what is opened ---------------------------------------------------------------------


@contextlib.contextmanager
def recorded_reads() -> Iterator[list[str]]:
    """Every URL the copier resolves to read a source, and every local path opened for reading."""
    reads: list[str] = []
    real_url_to_fs, real_open = files_module.url_to_fs, LocalFileSystem._open

    def url_to_fs(url: str) -> Any:
        reads.append(url)
        return real_url_to_fs(url)

    def local_open(fs: LocalFileSystem, path: str, mode: str = "rb", *args: Any, **kw: Any) -> Any:
        if "r" in mode:
            reads.append(str(path))
        return real_open(fs, path, mode, *args, **kw)

    with mock.patch.object(files_module, "url_to_fs", url_to_fs), \
            mock.patch.object(LocalFileSystem, "_open", local_open):
        yield reads


def _declared(events: list[Event], kind: type = StorageDescriptor) -> list[str]:
    """Paths (``/``-terminated) of every location the events declare for objects of ``kind``
    (``StorageDescriptor``: tables and partitions, the default mode's stores for data files;
    ``DatabaseSnapshot``: databases, and the parent of a ``<name>.db`` one, for resources)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, kind) and getattr(value, "location", None):
            path = urlsplit(value.location).path.rstrip("/")
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


def _check_reads(box: Box, reads: list[str], events: list[Event], prefix_mode: bool) -> None:
    targets = (str(box.wh) + "/", str(box.ext) + "/")
    foreign = str(box.wh / "foreign.db") + "/"
    declared = _declared(events)
    # the setup's database "a" is at {src}/a.db: resources may come from below it or {src}
    derived = [str(box.src / "a.db") + "/", str(box.src) + "/", *_declared(events, DatabaseSnapshot)]
    resources = {urlsplit(r.uri).path for r in _all(events, ResourceUri)}
    only_resources = resources - {urlsplit(f.uri).path for f in _all(events, FileRef)}
    for url in reads:
        path = urlsplit(url).path if "://" in url or url.startswith("file:") else url
        scheme = urlsplit(url).scheme
        assert scheme in ("", "file"), f"opened through another filesystem: {url}"
        if path.startswith(targets) and not path.startswith(foreign):
            continue  # the target's own files: staged copies, the copier's idempotence check
        assert not path.startswith(foreign), f"read the foreign database's data: {url}"
        if prefix_mode:
            assert path.startswith(str(box.src) + "/"), f"read outside --source-prefix: {url}"
        else:
            cm = CM_NAME.search(path) is not None
            as_resource = path in resources and any(path.startswith(p) for p in derived)
            if path in only_resources:
                assert as_resource, f"resource read from no derived store: {url}"
            else:  # a data file (or a URI both a data file and a resource)
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


FOREIGN = ("foreign", "other_src")  # a database not replicated, and one of another source


def _foreign(catalog: MemoryCatalog) -> dict[str, Any]:
    """The catalog objects of the databases this source did not create."""
    out: dict[str, Any] = {}
    for kind, objects in catalog.dump().items():
        assert isinstance(objects, dict)
        for key, value in objects.items():
            if (key if isinstance(key, str) else key[0]) in FOREIGN:
                out[f"{kind}:{key}"] = value
    return out


def _setup(box: Box, prefix_mode: bool, layout: str) -> tuple[Applier, MemoryCatalog]:
    catalog = MemoryCatalog()
    catalog.create_database(DatabaseSnapshot("foreign", location=str(box.wh / "foreign.db")))
    catalog.create_table(TableSnapshot("t", "foreign", sd=StorageDescriptor(str(box.wh / "foreign.db/t"))))
    catalog.create_database(DatabaseSnapshot("other_src", parameters={REPL_SOURCE_PARAM: "other"}))
    rules = SourceRules((box.src.as_uri(),)) if prefix_mode else SourceRules()
    paths = TargetPaths(box.wh.as_uri(), box.ext.as_uri(), layout)
    applier = Applier(catalog, FileCopier(max_workers=2), paths, b.SOURCE_ID,
                      state=TargetState(box.state), sources=rules)
    t = b.table("a", "t", location=f"file://{box.src}/a.db/t")
    legit = FileRef(f"file://{box.src}/a.db/t/f1", _sha(LEGIT), "sha256")
    db = b.event(1, EventType.CREATE_DATABASE, DatabasePayload(DatabaseSnapshot("a", location=f"file://{box.src}/a.db")),
                 "a")
    for step in plan([db, b.create_table(2, t), b.insert(3, t, [legit])], {}).steps:
        applier.apply(step)
    return applier, catalog


def _run_example(draw_events: Callable[[Box], list[Event]], prefix_mode: bool, layout: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box = Box(Path(tmp))
        box.build()
        applier, catalog = _setup(box, prefix_mode, layout)
        outside, foreign = box.outside(), _foreign(catalog)
        events = draw_events(box)
        with recorded_reads() as reads:
            for event in events:
                for step in plan([event], applier.load_progress()).steps:
                    with contextlib.suppress(StreamerError):  # a refusal is what hostile events get
                        applier.apply(step)
        assert box.outside() == outside, "changed outside the target roots (or the foreign database)"
        assert _foreign(catalog) == foreign, "a database this source did not create changed"
        _check_reads(box, reads, events, prefix_mode)


def _property(data: st.DataObject, prefix_mode: bool, layout: str) -> None:
    _run_example(lambda box: data.draw(hostile_events(box)), prefix_mode, layout)


MODES = st.booleans()
LAYOUTS = st.sampled_from(["authority", "path"])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), prefix_mode=MODES, layout=LAYOUTS)
def test_hostile_events_keep_the_trust_boundary(
    data: st.DataObject, prefix_mode: bool, layout: str
) -> None:
    _property(data, prefix_mode, layout)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), prefix_mode=MODES, layout=LAYOUTS)
def test_hostile_events_keep_the_trust_boundary_long(
    data: st.DataObject, prefix_mode: bool, layout: str
) -> None:
    _property(data, prefix_mode, layout)


@pytest.fixture(autouse=True)
def _only_selected_slow(request: pytest.FixtureRequest) -> None:
    """The long variant runs only when asked for (``-m slow``), not in every ``pytest tests/unit``."""
    if request.node.get_closest_marker("slow") and "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("10,000 examples: run with -m slow")
    if request.node.get_closest_marker("slow") and "not slow" in (request.config.option.markexpr or ""):
        pytest.skip("deselected")


def test_the_sandbox_sees_what_the_old_code_did(tmp_path: Path) -> None:
    """The invariants catch the attacks of issue 27 (else the property would prove nothing)."""
    box = Box(tmp_path)
    box.build()
    before = box.outside()
    (box.root / "sibling" / "secret").write_bytes(b"changed")
    assert box.outside() != before
    with recorded_reads() as reads:
        LocalFileSystem().open(str(box.sibling / "secret"), "rb").close()
    with pytest.raises(AssertionError, match="read outside"):
        _check_reads(box, reads, [], prefix_mode=True)
    with pytest.raises(AssertionError, match="read undeclared"):
        _check_reads(box, reads, [], prefix_mode=False)
    # before the derived stores: a function's own event was all a resource needed
    jar = ResourceUri("JAR", (box.sibling / "secret").as_uri())
    fn = FunctionSnapshot("f", "a", "C", resource_uris=[jar])
    function = b.event(9, EventType.CREATE_FUNCTION, CreateFunctionPayload(fn), "a")
    with pytest.raises(AssertionError, match="resource read from no derived store"):
        _check_reads(box, reads, [function], prefix_mode=False)
