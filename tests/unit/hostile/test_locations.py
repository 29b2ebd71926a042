"""Hostile locations in events, applied through the real Applier: nothing is written outside the roots.

Every case runs a CREATE_DATABASE, a table whose location (or partition location, or file name) is
hostile, and an INSERT, on a MemoryCatalog and real tmp dirs; then audits the whole tmp tree: each
file that exists afterwards and did not before lies under the target roots (warehouse, external
base dir) or the state dir, and resolves (symlinks followed) inside them. A location that would
escape must halt its database with a typed error, never be written.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.events.model import Event, FileRef, PartitionSnapshot, StorageDescriptor, TableSnapshot
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b

pytestmark = pytest.mark.timeout(120)


@dataclasses.dataclass
class Sandbox:
    root: Path

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def inside(self) -> list[Path]:
        return [self.root / "wh", self.root / "ext", self.root / "state"]

    def applier(self) -> tuple[Applier, TargetState]:
        state = TargetState(self.root / "state")
        paths = TargetPaths(str(self.root / "wh"), str(self.root / "ext"))
        return Applier(MemoryCatalog(), FileCopier(max_workers=2), paths, b.SOURCE_ID, state=state), state

    def files(self) -> set[Path]:
        return {p for p in self.root.rglob("*") if p.is_file() or p.is_symlink()}

    def table(self, location: str, keys: tuple[str, ...] = (), external: bool = False) -> TableSnapshot:
        kind = "EXTERNAL_TABLE" if external else "MANAGED_TABLE"
        snap = b.table("a", "t", keys, location=f"file://{self.src}/a.db/t", table_type=kind)
        return dataclasses.replace(snap, sd=dataclasses.replace(snap.sd, location=location))

    def source_file(self, name: str = "f") -> FileRef:
        return b.write_source_file(self.src / "a.db" / "t", name, b"payload")


def _run(box: Sandbox, events: list[Event]) -> TargetState:
    applier, state = box.applier()
    run_plan(applier, plan(events, applier.load_progress(), state.halts()), state)
    return state


def _audit(box: Sandbox, before: set[Path]) -> None:
    """Every new file lies under a target root (or the state dir) and resolves inside it."""
    roots = [r.resolve() for r in box.inside]
    for path in box.files() - before:
        real = path.resolve()
        assert any(real.is_relative_to(r) for r in roots), f"written outside the roots: {path} -> {real}"
        assert any(path.is_relative_to(r) for r in box.inside), f"written outside the target roots: {path}"
    assert not any(box.outside.rglob("*")) or set(box.outside.rglob("*")) <= before, "outside dir changed"


def _box(tmp: str) -> Sandbox:
    box = Sandbox(Path(tmp))
    box.src.mkdir(parents=True)
    box.outside.mkdir()
    (box.root / "wh").mkdir()
    return box


ESCAPING = [
    "file://{src}/a.db/../../../outside",
    "file://{src}/a.db/%2e%2e/%2e%2e/%2e%2e/outside",
    "file://{src}/a.db/%2E%2E%2F%2E%2E%2F%2E%2E/outside",
    "file://{root}/outside",
    "/{root}/outside",
    "file://evilhost/{root}/outside",
    "hdfs://nn/data/../../../{root}/outside",
    "s3://bucket/../../{root}/outside",
    "ftp://host/{root}/outside",
    "file://{src}/a.db/t\x00/../../outside",
]


@pytest.mark.parametrize("external", [False, True], ids=["managed", "external"])
@pytest.mark.parametrize("template", ESCAPING)
def test_hostile_table_locations_write_nothing_outside(template: str, external: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box = _box(tmp)
        location = template.format(src=box.src, root=str(box.root).lstrip("/"))
        snap = box.table(location, external=external)
        ref = box.source_file()
        before = box.files()
        state = _run(box, [b.create_db(1, "a"), b.create_table(2, snap), b.insert(3, snap, [ref])])
        _audit(box, before)
        if external and (".." in location or "%2e" in location.lower() or "\x00" in location):
            assert "a" in state.halts(), f"{location!r} was applied"


HOSTILE_NAMES = ["../../outside/x", "..", "%2e%2e/%2e%2e/outside/x", "x\x00y", ".streamer-tmp-x"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_file_names_write_nothing_outside(name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box = _box(tmp)
        snap = box.table(f"file://{box.src}/a.db/t")
        real = box.source_file()
        ref = dataclasses.replace(real, uri=real.uri.rsplit("/", 1)[0] + "/" + name)
        before = box.files()
        state = _run(box, [b.create_db(1, "a"), b.create_table(2, snap), b.insert(3, snap, [ref])])
        _audit(box, before)
        assert "a" in state.halts()


def test_hostile_partition_location_writes_nothing_outside() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box = _box(tmp)
        snap = box.table(f"file://{box.src}/a.db/t", keys=("dt",))
        part = PartitionSnapshot(values=["../../../outside"], db="a", table="t",
                                 sd=StorageDescriptor(location=f"file://{box.src}/a.db/t/../../../../outside"))
        ref = b.write_source_file(box.src / "a.db" / "t" / "p", "f", b"payload")
        before = box.files()
        _run(box, [b.create_db(1, "a"), b.create_table(2, snap), b.add_partition(3, snap, [part], [ref])])
        _audit(box, before)


@pytest.mark.parametrize("planted", ["a.db", "a.db/t"])
def test_symlink_planted_in_the_target_tree_is_not_followed(planted: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box = _box(tmp)
        snap = box.table(f"file://{box.src}/a.db/t")
        ref = box.source_file()
        _run(box, [b.create_db(1, "a")])
        link = box.root / "wh" / planted
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_dir() and not link.is_symlink():
            os.rmdir(link)
        link.symlink_to(box.outside, target_is_directory=True)
        before = box.files()
        state = _run(box, [b.create_table(2, snap), b.insert(3, snap, [ref])])
        assert not any(box.outside.iterdir()), f"written through the symlink: {list(box.outside.iterdir())}"
        _audit(box, before)
        assert "a" in state.halts()


SEGMENTS = st.sampled_from(
    ["..", "%2e%2e", "%2E%2e", ".", "%2f", "a", "x y", "~", "\x00", "%00", "//", "outside"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scheme=st.sampled_from(["file://", "file:///", "", "hdfs://nn/", "s3a://b/", "file://h/"]),
    segments=st.lists(SEGMENTS, min_size=1, max_size=8),
    external=st.booleans(),
)
def test_any_composed_location_stays_inside(scheme: str, segments: list[str], external: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box = _box(tmp)
        location = scheme + str(box.src).lstrip("/") + "/" + "/".join(segments)
        snap = box.table(location, external=external)
        ref = box.source_file()
        before = box.files()
        _run(box, [b.create_db(1, "a"), b.create_table(2, snap), b.insert(3, snap, [ref])])
        _audit(box, before)
