"""``verify`` end to end without services: a workload applied by the real applier onto the in-memory
catalog and real directories, then verified, damaged behind its back, verified, repaired."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamer import metrics
from streamer.events.model import DropPartitionPayload, DropTablePayload, Event, FileRef, InsertPayload
from streamer.metastore.memory import MemoryCatalog
from streamer.source.enrich import EnrichSettings, FsspecInspector, enrich_ref, map_refs
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.apply.sources import SourceRules
from streamer.target.dr import drift as d
from streamer.target.dr.verify import VerifySettings, verify
from streamer.target.state.state_file import TargetState
from streamer.target.state.status import write_progress
from tests.unit.testing.replicas import Run, workload_run

SOURCE = "warehouse"


@dataclasses.dataclass
class Target:
    root: Path
    catalog: MemoryCatalog
    applier: Applier
    state: TargetState
    events: list[Event]

    def apply(self, upto: int) -> None:
        batch = [e for e in self.events if e.event_id <= upto]
        report = run_plan(self.applier, plan(batch, self.applier.load_progress(), ()), self.state)
        assert not report.halted, report.halted
        write_progress(self.root / "state", {}, upto)

    def settings(self, **kw: object) -> VerifySettings:
        return VerifySettings(
            hms_uri="memory", state_dir=str(self.root / "state"), bootstrap_servers="-", topic="-",
            source_id=SOURCE, warehouse_root=str(self.root / "wh"), **kw,  # type: ignore[arg-type]
        )

    def verify(self, **kw: object) -> d.VerifyReport:
        repair = bool(kw.pop("repair", False))
        return verify(self.settings(**kw), catalog=self.catalog, events=self.history, repair=repair)

    def history(self) -> Iterator[Event]:
        return iter(self.events)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A workload's events as the agent publishes them (checksum algorithm, size, cmroot copy)."""
    work = tmp_path_factory.mktemp("verify-workload")
    done = workload_run(work, 5, 140)
    enrich = EnrichSettings(cmroot=str(work / "cmroot"))
    files = FsspecInspector()
    events = [map_refs(e, lambda ref: enrich_ref(ref, enrich, files)) for e in done.events]
    return dataclasses.replace(done, events=events)


def make_target(root: Path, run: Run, sources: SourceRules | None = None) -> Target:
    catalog = MemoryCatalog()
    state = TargetState(root / "state")
    (root / "wh").mkdir(parents=True)
    paths = TargetPaths(str(root / "wh"), str(root / "ext"))
    applier = Applier(catalog, FileCopier(max_workers=2), paths, SOURCE, state=state, sources=sources)
    return Target(root, catalog, applier, state, run.events)


def data_files(target: Target) -> list[Path]:
    def visible(p: Path) -> bool:
        return p.is_file() and not any(s.startswith((".", "_")) for s in p.relative_to(target.root).parts)

    return sorted(p for p in (target.root / "wh").rglob("*") if visible(p))


def test_a_faithful_replica_verifies_clean_even_when_the_source_moved_on(tmp_path: Path, run: Run) -> None:
    target = make_target(tmp_path, run)
    middle = run.history.event_ids[len(run.history.event_ids) // 2]
    target.apply(middle)  # the topic holds everything; the target stopped half-way
    report = target.verify()
    assert report.ok, report.render()
    assert sum(r.counts.files for r in report.databases) > 0
    assert sum(r.later_events for r in report.databases) > 0  # the source did move on
    target.apply(run.history.last_event_id)
    at_end = target.verify()
    assert at_end.ok, at_end.render()
    assert sum(r.counts.files for r in at_end.databases) > 10
    sample = metrics.REGISTRY.get_sample_value("streamer_verify_last_run_timestamp_seconds")
    assert sample is not None and sample > 0


def test_damage_behind_streamers_back_is_reported_by_kind_and_files_are_repaired(
    tmp_path: Path, run: Run
) -> None:
    target = make_target(tmp_path, run)
    target.apply(run.history.last_event_id)
    assert target.verify().ok
    files = [f for f in data_files(target) if "delta_" not in str(f) and "base_" not in str(f)]
    deleted, corrupted = files[0], files[-1]
    deleted.unlink()
    corrupted.write_bytes(corrupted.read_bytes() + b"tampered\n")
    db = next(n for n in target.catalog.list_databases() if target.catalog.list_tables(n))
    name = target.catalog.list_tables(db)[0]
    table = target.catalog.get_table(db, name)
    assert table is not None
    target.catalog.alter_table(db, name, dataclasses.replace(
        table, parameters={**table.parameters, "owner.note": "changed by hand"}))

    report = target.verify()
    kinds = {x.kind for x in report.drifts}
    assert {d.FILE, d.CHECKSUM, d.PARAMETERS} <= kinds, report.render()
    assert any(deleted.name in x.obj for x in report.drifts if x.kind == d.FILE)
    assert any(corrupted.name in x.obj for x in report.drifts if x.kind == d.CHECKSUM)
    labels = {"db": db, "kind": "parameters"}
    gauge = metrics.REGISTRY.get_sample_value("streamer_verify_drift_objects", labels)
    assert gauge == 1

    repaired = target.verify(repair=True)
    assert len(repaired.repaired) == 2, repaired.render()
    assert deleted.exists()
    assert {x.kind for x in repaired.drifts} == {d.PARAMETERS}  # metadata drift is reported, not repaired
    again = target.verify()
    assert [x.kind for x in again.drifts] == [d.PARAMETERS]


def test_verification_reads_under_the_guard(tmp_path: Path, run: Run) -> None:
    """In the job the guard is the batch lock: every database read happens while it is held."""
    target = make_target(tmp_path, run)
    target.apply(run.history.last_event_id)
    lock = threading.Lock()
    held: list[bool] = []
    original = target.catalog.list_tables

    def spy(db: str) -> list[str]:
        held.append(lock.locked())
        return original(db)

    target.catalog.list_tables = spy  # type: ignore[method-assign]
    report = verify(target.settings(), catalog=target.catalog, events=target.history, guard=lambda: lock)
    assert report.ok and held and all(held)


def test_only_the_databases_asked_for(tmp_path: Path, run: Run) -> None:
    target = make_target(tmp_path, run)
    target.apply(run.history.last_event_id)
    every = target.verify()
    one = every.databases[0].db
    assert [r.db for r in target.verify(databases=[one]).databases] == [one]
    missing = target.verify(databases=["nosuch"])
    assert missing.ok and [r.db for r in missing.databases] == ["nosuch"]


def test_without_source_checksums_the_source_files_are_hashed_where_they_cannot_have_moved(
    tmp_path: Path, run: Run
) -> None:
    """A source without checksums (Hive on a filesystem without them): files are copied unverified,
    and verification hashes the source's copy of files in tables unchanged since the cut-off."""
    events = [map_refs(e, lambda r: dataclasses.replace(r, checksum=None, checksum_algorithm=None))
              for e in run.events]
    cmroots: set[str] = set()

    def note_cmroot(ref: FileRef) -> FileRef:
        if ref.cm_uri:
            cmroots.add(ref.cm_uri.rsplit("/", 1)[0])
        return ref

    for e in run.events:
        map_refs(e, note_cmroot)
    # such a source needs --allow-unverified-files, and its cmroot declared (copies named by no checksum)
    unverified = SourceRules(cmroots=tuple(cmroots), allow_unverified=True)
    target = make_target(tmp_path, dataclasses.replace(run, events=events), unverified)
    target.apply(run.history.last_event_id)
    report = target.verify()
    assert report.ok, report.render()
    assert sum(r.counts.files for r in report.databases) > 10
    candidates = [f for f in data_files(target) if "delta_" not in str(f) and "base_" not in str(f)]
    victim = candidates[0]
    content = victim.read_bytes()
    victim.write_bytes(bytes([content[0] ^ 1]) + content[1:])  # same size: only a hash tells
    (drift,) = target.verify().drifts
    assert drift.kind == d.CHECKSUM and victim.name in drift.obj and "recomputed" in drift.detail
    sizes_only = target.verify(recompute_source=False)
    assert sizes_only.ok and sum(r.counts.unverified for r in sizes_only.databases) > 10


def test_repair_without_a_warehouse_root_is_a_usage_error(tmp_path: Path) -> None:
    from streamer.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["verify", "--hms-uri", "thrift://127.0.0.1:1", "--state-dir", str(tmp_path),
              "--bootstrap-servers", "127.0.0.1:1", "--repair"])
    assert exited.value.code == 2


def test_a_batch_applied_between_listing_and_hashing_is_not_drift(tmp_path: Path, run: Run) -> None:
    """The job applies a batch as soon as the verifier releases its lock after listing a database:
    files hashed afterwards may be gone or replaced, so the drift is confirmed under the lock, at the
    new cut-off, and is not reported."""
    target = make_target(tmp_path, run)
    # just before an event that removes files the replica holds: hashing after it finds them gone
    destructive = next(
        e for e in run.events
        if e.event_id > run.history.event_ids[10] and (
            isinstance(e.payload, DropTablePayload | DropPartitionPayload)
            or (isinstance(e.payload, InsertPayload) and e.payload.replace))
    )
    cut = destructive.event_id - 1
    target.apply(cut)
    acquired: list[int] = []

    @contextlib.contextmanager
    def job_lock() -> Iterator[None]:
        acquired.append(1)
        yield
        if len(acquired) == 1:  # the job's next micro-batch, right after the first guarded read
            target.apply(run.history.last_event_id)

    report = verify(target.settings(), catalog=target.catalog, events=target.history, guard=job_lock)
    assert report.ok, report.render()
    judged = {r.db: r.event_id for r in report.databases}
    assert judged[(destructive.db or "").lower()] == run.history.last_event_id  # confirmed after the batch
    assert len(acquired) > len(report.databases)  # that database needed its confirming pass
