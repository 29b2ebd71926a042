"""Prestaged copies (PooledFileCopier.prestage): a batch's later INSERT files copied and verified into a
hidden staging directory while earlier steps run, taken by their steps, dropped when no step takes
them (a halt), and never read where the read rules refuse them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from streamer.errors import ChecksumMismatchError
from streamer.events.model import EventType, FileRef
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.paths import Root
from streamer.target.apply.plan import Plan, Step, StepKind
from streamer.target.apply.sources import SourceRules
from streamer.target.job.executor_copy import (
    PooledFileCopier,
    PrestageGroup,
    SparkFileCopier,
    prestage_groups,
)
from streamer.target.job.streaming import BatchApplier
from tests.unit.target import builders as b
from tests.unit.target.job.test_bounded import records, settings


def _files(top: Path) -> list[Path]:
    return sorted(p for p in top.rglob("*") if p.is_file()) if top.exists() else []


@pytest.fixture
def where(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(source dir, target object dir, staging dir): the last two below the target root ``tmp/wh``."""
    src, wh = tmp_path / "src" / "t", tmp_path / "wh"
    src.mkdir(parents=True)
    wh.mkdir()
    return src, wh / "db.db" / "t", wh / "_streamer" / "staging" / "me"


def _copier(tmp_path: Path, sources: SourceRules | None = None) -> PooledFileCopier:
    return PooledFileCopier(max_workers=2, chunk_size=7, roots=[Root.parse(str(tmp_path / "wh"))],
                            sources=sources)


def _group(src: Path, *refs: FileRef) -> PrestageGroup:
    return PrestageGroup(tuple(refs), (f"file://{src}",))


def test_a_step_takes_its_prestaged_copy_and_publishes_the_same_files(
    tmp_path: Path, where: tuple[Path, Path, Path]
) -> None:
    src, obj, staging = where
    refs = [b.write_source_file(src, f"f{i}", b"row" * (i + 1)) for i in range(3)]
    copier = _copier(tmp_path, SourceRules())
    assert copier.prestage([_group(src, *refs)], str(staging)) == 3
    for ref in refs:  # wait for each: the step would take it whenever it is done
        copier._prestaged[ref].result()
    for ref in refs:  # the source may change now: the verified copies are what the step publishes
        Path(ref.uri.removeprefix("file://")).write_bytes(b"changed")
    report = copier.copy_all(refs, lambda _: str(obj), event_id=9, source_location=f"file://{src}")
    assert report.files == 3 and copier.prestaged_taken == 3
    assert {p.name: p.read_bytes() for p in _files(obj)} == {f"f{i}": b"row" * (i + 1) for i in range(3)}
    assert _files(staging) == []  # taken by renames: nothing left behind
    assert copier.drop_prestaged() == 0


def test_a_prestaged_copy_that_fails_its_checksum_is_not_kept_and_the_step_fails_as_without(
    tmp_path: Path, where: tuple[Path, Path, Path]
) -> None:
    src, obj, staging = where
    good = b.write_source_file(src, "f", b"original")
    Path(good.uri.removeprefix("file://")).write_bytes(b"tampered")  # not the event's file any more
    copier = _copier(tmp_path, SourceRules())
    copier.prestage([_group(src, good)], str(staging))
    assert copier._prestaged[good].result() is None
    assert _files(staging) == []
    with pytest.raises(ChecksumMismatchError):
        copier.copy_all([good], lambda _: str(obj), event_id=9, source_location=f"file://{src}")
    assert copier.prestaged_taken == 0 and _files(obj) == []


def test_a_prestaged_copy_changed_since_its_verification_is_discarded_and_copied_again(
    tmp_path: Path, where: tuple[Path, Path, Path]
) -> None:
    src, obj, staging = where
    ref = b.write_source_file(src, "f", b"original")
    copier = _copier(tmp_path, SourceRules())
    copier.prestage([_group(src, ref)], str(staging))
    ahead = copier._prestaged[ref].result()
    assert ahead is not None and ahead.temp is not None
    Path(ahead.temp).write_bytes(b"other, longer content")
    assert copier.copy_all([ref], lambda _: str(obj), event_id=9, source_location=f"file://{src}").files == 1
    assert copier.prestaged_taken == 0  # copied from the source again
    assert [p.read_bytes() for p in _files(obj)] == [b"original"]
    assert _files(staging) == []


def test_what_no_step_took_is_dropped(tmp_path: Path, where: tuple[Path, Path, Path]) -> None:
    src, _, staging = where
    refs = [b.write_source_file(src, f"f{i}", b"x" * i) for i in range(1, 5)]
    copier = _copier(tmp_path, SourceRules())
    copier.prestage([_group(src, *refs)], str(staging))
    for ref in refs:
        copier._prestaged[ref].result()
    assert len(_files(staging)) == 4
    assert copier.drop_prestaged() == 4
    assert _files(staging) == []


def test_a_file_the_read_rules_refuse_is_never_read(tmp_path: Path, where: tuple[Path, Path, Path]) -> None:
    src, _, staging = where
    outside = b.write_source_file(tmp_path / "elsewhere", "f", b"secret")
    inside = b.write_source_file(src, "g", b"fine")
    copier = _copier(tmp_path, SourceRules())
    # the file is below neither location the event names: refused before it is opened
    copier.prestage([_group(src, outside), _group(src, inside)], str(staging))
    assert copier._prestaged[outside].result() is None
    assert copier._prestaged[inside].result() is not None
    # every location must allow it: one that does not is enough to refuse
    other = PrestageGroup((b.write_source_file(src, "h", b"h"),), (f"file://{src}", f"file://{tmp_path}/x"))
    copier.prestage([other], str(staging))
    assert copier._prestaged[other.refs[0]].result() is None
    copier.drop_prestaged()
    assert _files(staging) == []


def test_a_staging_directory_outside_the_roots_or_not_local_is_not_used(
    tmp_path: Path, where: tuple[Path, Path, Path]
) -> None:
    src, _, _ = where
    ref = b.write_source_file(src, "f", b"data")
    copier = _copier(tmp_path, SourceRules())
    assert copier.prestage([_group(src, ref)], str(tmp_path / "not-a-root" / "staging")) == 0
    assert copier.prestage([_group(src, ref)], "memory:///wh/_streamer/staging/me") == 0
    assert not (tmp_path / "not-a-root").exists()


def test_a_stopped_processs_staged_files_are_removed_at_the_first_prestage(
    tmp_path: Path, where: tuple[Path, Path, Path]
) -> None:
    src, _, staging = where
    staging.mkdir(parents=True)
    (staging / ".streamer-tmp-left-by-a-killed-job").write_bytes(b"x")
    ref = b.write_source_file(src, "f", b"data")
    copier = _copier(tmp_path, SourceRules())
    copier.prestage([_group(src, ref)], str(staging))
    copier._prestaged[ref].result()
    assert [p.name for p in _files(staging)] != [] and all("killed" not in p.name for p in _files(staging))
    copier.drop_prestaged()


def test_executor_copies_are_not_prestaged(tmp_path: Path, where: tuple[Path, Path, Path]) -> None:
    from streamer.target.job.executor_copy import ExecutorCopy

    src, _, staging = where
    refs = [b.write_source_file(src, f"f{i}", b"x") for i in range(3)]
    copier = SparkFileCopier(None, ExecutorCopy(min_bytes=0, min_files=2),  # type: ignore[arg-type]
                             roots=[Root.parse(str(tmp_path / "wh"))])
    assert copier.prestage([_group(src, *refs[:2]), _group(src, refs[2])], str(staging)) == 1


def test_which_files_a_plan_prestages() -> None:
    t = b.table("db", "t", ("p",))
    ref = FileRef(uri="file:///source/warehouse/db.db/t/p=1/f", checksum=hashlib.sha256(b"").hexdigest(),
                  checksum_algorithm="sha256", size=0)
    unverified = FileRef(uri="file:///source/warehouse/db.db/t/p=1/g", size=3)
    first = b.insert(1, t, [ref], values=["1"])
    later = b.insert(2, t, [ref, unverified], values=["1"])
    coalesced = b.insert(3, t, [ref], values=["1"])
    steps = (
        Step(StepKind.EVENT, (first,), "db"),  # starts at once: nothing to gain
        Step(StepKind.EVENT, (b.create_table(4, t),), "db"),
        Step(StepKind.EVENT, (later,), "db"),
        Step(StepKind.COALESCED, (coalesced,), "db"),
    )
    groups = prestage_groups(Plan(steps=steps))
    assert groups == [PrestageGroup((ref,), ("file:///source/warehouse/db.db/t/p=1",
                                             "file:///source/warehouse/db.db/t"))]
    assert later.event_type is EventType.INSERT


def test_which_files_of_added_partitions_a_plan_prestages() -> None:
    """An ADD_PARTITION step copies every file of its events: each partition's own files are grouped
    under its location; a file below none of them is left to the step (which refuses it)."""
    t = b.table("db", "t", ("p",))

    def ref(rel: str) -> FileRef:
        return FileRef(uri=f"{t.sd.location}/{rel}", checksum=hashlib.sha256(rel.encode()).hexdigest(),
                       checksum_algorithm="sha256", size=1)

    p1, p2, p3 = b.partition(t, "1"), b.partition(t, "2"), b.partition(t, "3")
    one = b.add_partition(2, t, [p1, p2], [ref("p=1/a"), ref("p=2/b"), ref("p=10/stray"),
                                            FileRef(uri=f"{t.sd.location}/p=1/unverified", size=1)])
    merged = (b.add_partition(3, t, [p3], [ref("p=3/c")]),)
    steps = (
        Step(StepKind.EVENT, (b.add_partition(1, t, [p1], [ref("p=1/first")]),), "db"),  # starts at once
        Step(StepKind.EVENT, (one,), "db"),
        Step(StepKind.ADD_PARTITIONS, merged, "db"),
    )
    assert prestage_groups(Plan(steps=steps)) == [
        PrestageGroup((ref("p=1/a"),), (p1.sd.location, t.sd.location)),
        PrestageGroup((ref("p=2/b"),), (p2.sd.location, t.sd.location)),
        PrestageGroup((ref("p=3/c"),), (p3.sd.location, t.sd.location)),
    ]


def test_a_batch_prestages_the_files_of_its_later_added_partitions(tmp_path: Path) -> None:
    """Through the job's batch: ADD_PARTITION steps after the first take their files from the staging
    directory and publish the same bytes a copy from the source gives."""
    src = tmp_path / "src" / "db.db" / "t"
    t = b.table("db", "t", ("p",), location=f"file://{src}")
    events = [b.create_db(1, "db"), b.create_table(2, t)]
    for i in range(4):
        part = b.partition(t, str(i))
        ref = b.write_source_file(src / f"p={i}", f"f{i}", f"data{i}".encode())
        events.append(b.add_partition(3 + i, t, [part], [ref]))
    copier = PooledFileCopier(max_workers=2)
    job = BatchApplier(settings(tmp_path, None), MemoryCatalog(), copier=copier)
    job.process(records(events))
    assert job.state.halts() == {}
    wh = tmp_path / "wh" / "db.db" / "t"
    assert {f"{p.parent.name}/{p.name}": p.read_bytes() for p in _files(wh)} == {
        f"p={i}/f{i}": f"data{i}".encode() for i in range(4)
    }
    assert copier.prestaged_taken >= 3  # every ADD_PARTITION step but the batch's first
    assert _files(tmp_path / "wh" / "_streamer" / "staging") == []


def test_a_batch_prestages_its_later_inserts_and_a_halt_leaves_nothing_staged(tmp_path: Path) -> None:
    """Through the job's batch: the steps after the first take their files from the staging
    directory; a database halted at a bad file leaves its later steps' prestaged copies unused, and
    they are removed at the batch's end; every other database's files are published."""
    src_root = tmp_path / "src"
    good, bad = b.table("good", "t", location=f"file://{src_root}/good.db/t"), \
        b.table("bad", "t", location=f"file://{src_root}/bad.db/t")
    events = [b.create_db(1, "good"), b.create_db(2, "bad"), b.create_table(3, good), b.create_table(4, bad)]
    event_id = 5
    for i in range(4):
        for snap in (good, bad):
            ref = b.write_source_file(src_root / f"{snap.db}.db" / "t", f"f{i}", f"{snap.db}{i}".encode())
            if snap is bad and i == 1:
                ref = FileRef(uri=ref.uri, checksum="0" * 64, checksum_algorithm="sha256", size=ref.size)
            events.append(b.insert(event_id, snap, [ref]))
            event_id += 1
    copier = PooledFileCopier(max_workers=2)
    job = BatchApplier(settings(tmp_path, None), MemoryCatalog(), copier=copier)
    job.process(records(events))
    assert set(job.state.halts()) == {"bad"}
    wh = tmp_path / "wh"
    assert {p.name: p.read_bytes() for p in _files(wh / "good.db" / "t")} == {
        f"f{i}": f"good{i}".encode() for i in range(4)
    }
    assert [p.name for p in _files(wh / "bad.db" / "t")] == ["f0"]  # halted at its second insert
    assert copier.prestaged_taken >= 4
    assert _files(wh / "_streamer" / "staging") == []


def test_a_budget_of_zero_turns_prestaging_off(tmp_path: Path, where: tuple[Path, Path, Path]) -> None:
    src, _, staging = where
    copier = _copier(tmp_path, SourceRules())
    copier.prestage_max_bytes = 0
    assert copier.prestage([_group(src, b.write_source_file(src, "f", b""))], str(staging)) == 0
    assert not staging.exists()


def test_files_without_a_recorded_size_are_prestaged_within_the_budget(
    tmp_path: Path, where: tuple[Path, Path, Path]
) -> None:
    """Source agents record checksums but not always sizes: the source file's size counts then."""
    src, obj, staging = where
    refs = [b.replace(b.write_source_file(src, f"f{i}", b"123456"), size=None) for i in range(3)]
    copier = _copier(tmp_path, SourceRules())
    copier.prestage_max_bytes = 13  # two of the three files
    assert copier.prestage([_group(src, *refs)], str(staging)) == 3
    done = [copier._prestaged[ref].result() for ref in refs]
    assert sum(d is not None for d in done) == 2 and len(_files(staging)) == 2
    assert copier.copy_all(refs, lambda _: str(obj), event_id=9, source_location=f"file://{src}").files == 3
    assert copier.prestaged_taken == 2 and _files(staging) == []
    assert sorted(p.read_bytes() for p in _files(obj)) == [b"123456"] * 3


def test_a_file_gone_from_the_source_is_prestaged_from_its_cmroot_copy(
    tmp_path: Path, where: tuple[Path, Path, Path]
) -> None:
    """An overwritten or dropped source file without a recorded size: its cmroot copy is sized, read
    and verified ahead, as the step's own copy would fall back to it."""
    src, obj, staging = where
    ref = b.write_source_file(src, "f", b"original")
    cm = tmp_path / "cm" / "f_chk"
    cm.parent.mkdir()
    cm.write_bytes(b"original")
    Path(ref.uri.removeprefix("file://")).unlink()
    ref = b.replace(ref, size=None, cm_uri=f"file://{cm}")
    copier = _copier(tmp_path, SourceRules(cmroots=(f"file://{cm.parent}",)))
    copier.prestage([_group(src, ref)], str(staging))
    ahead = copier._prestaged[ref].result()
    assert ahead is not None and ahead.cm_fallback
    report = copier.copy_all([ref], lambda _: str(obj), event_id=9, source_location=f"file://{src}")
    assert report.cm_fallbacks == 1
    assert copier.prestaged_taken == 1 and [p.read_bytes() for p in _files(obj)] == [b"original"]
