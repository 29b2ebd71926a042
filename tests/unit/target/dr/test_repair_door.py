"""Verification repairs pass the applier's door (``streamer.target.apply.door``) as the job's changes do.

A workload applied by the real applier onto the in-memory catalog and real directories, its source the
bundled sqlite warehouse it ran on (``verify --against-source`` reads it as it reads a live source).
The replica is then crafted so that a repair would change what this source does not own, or copy a
file that is not the one verified: each is refused with the object and the cause, and changes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from streamer.events.model import DatabaseSnapshot, PartitionSnapshot
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.source.enrich import EnrichSettings, FsspecInspector, enrich_ref, map_refs
from streamer.target.dr import drift as d
from streamer.target.dr.source_check import SourceConnection, check_against_source
from tests.unit.target.dr.test_verify import Target, data_files, make_target
from tests.unit.testing.replicas import workload_run

INTRUDER = "intruder"


@dataclasses.dataclass
class Replica:
    source: Path  # the bundled warehouse's directory: metastore.sqlite, warehouse/, cmroot/
    target: Target

    def conn(self) -> SourceConnection:
        return SourceConnection(notification_db=str(self.source / "metastore.sqlite"))

    def source_file(self, replica_file: Path) -> Path:
        """The source's file a replica file copies (the target mirrors ``<db>.db/<table>/<partition>``)."""
        found = self.source / "warehouse" / replica_file.relative_to(self.target.root / "wh")
        assert found.is_file(), found
        return found


@pytest.fixture
def replica(tmp_path: Path) -> Replica:
    """Its own workload (these tests change source files): plain partitioned tables only."""
    work = tmp_path / "src"
    done = workload_run(work, 4, 60, txn_share=0.0)
    enrich = EnrichSettings(cmroot=str(work / "cmroot"))
    inspector = FsspecInspector()
    events = [map_refs(e, lambda ref: enrich_ref(ref, enrich, inspector)) for e in done.events]
    target = make_target(tmp_path / "tg", dataclasses.replace(done, events=events))
    target.apply(done.history.last_event_id)
    assert target.verify().ok
    return Replica(work, target)


def a_partition(target: Target) -> tuple[str, str, PartitionSnapshot]:
    """A partition of a plain (not transactional) table with data files on the replica."""
    catalog = target.catalog
    for db in catalog.list_databases():
        for name in catalog.list_tables(db):
            table = catalog.get_table(db, name)
            if table is None or not table.partition_keys or table.is_transactional:
                continue
            for p in catalog.list_partitions(db, name):
                if p.sd.location and Path(p.sd.location).is_dir() and any(Path(p.sd.location).iterdir()):
                    return db, name, p
    raise AssertionError("the workload left no partition with files")


def every_file(directory: Path) -> dict[str, bytes]:
    """Every file below ``directory`` (hidden and staging ones too) with its content."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def crafted(target: Target, owner: str | None) -> Path:
    """The replica's partition moved (in its metadata only) into the directory of database
    ``intruder``, which this source does not own: made by hand (``owner`` None) or another source's."""
    wh = target.root / "wh"
    params = {REPL_SOURCE_PARAM: owner} if owner else {}
    target.catalog.create_database(DatabaseSnapshot(INTRUDER, location=(wh / f"{INTRUDER}.db").as_uri(),
                                                    parameters=params))
    db, table, part = a_partition(target)
    moved = wh / f"{INTRUDER}.db" / table / Path(str(part.sd.location)).relative_to(wh / f"{db}.db" / table)
    moved.mkdir(parents=True)
    (moved / "theirs.parquet").write_bytes(b"the intruder's own data\n")
    place = dataclasses.replace(part.sd, location=str(moved))
    target.catalog.alter_partitions(db, table, [dataclasses.replace(part, sd=place)])
    return wh / f"{INTRUDER}.db"


def not_owned(owner: str | None) -> str:
    return f"replicated from source {owner!r}" if owner else "not created by replication"


@pytest.mark.parametrize("owner", [None, "another-source"])
def test_a_verify_repair_into_a_database_this_source_does_not_own_is_refused_and_changes_nothing(
    replica: Replica, owner: str | None
) -> None:
    target = replica.target
    theirs = crafted(target, owner)
    before = every_file(theirs)
    report = target.verify(repair=True)
    missing = [x.obj for x in report.drifts if x.kind == d.FILE and x.repair is not None]
    assert missing, report.render()
    assert report.repaired == []
    assert len(report.refused) == len(missing), report.render()
    for obj, refusal in zip(sorted(missing), sorted(report.refused), strict=True):
        assert refusal.startswith(f"{obj}: ApplyError: ") and f"{INTRUDER!r}" in refusal, refusal
        assert not_owned(owner) in refusal, refusal
    assert every_file(theirs) == before
    assert report.to_json()["refused"] == report.refused
    assert f"refused    {report.refused[0]}" in report.render()


@pytest.mark.parametrize("owner", [None, "another-source"])
def test_a_source_check_repair_into_a_database_this_source_does_not_own_is_refused_and_changes_nothing(
    replica: Replica, owner: str | None
) -> None:
    """Neither the copies of the source's files nor the removal of the file only the replica's
    metadata shows (the intruder's own) happen."""
    target = replica.target
    theirs = crafted(target, owner)
    before = every_file(theirs)
    report = check_against_source(target.settings(), replica.conn(), catalog=target.catalog, repair=True)
    fixes = [x for x in report.drifts if x.kind == d.FILE and x.repair is not None]
    assert any("theirs.parquet" in x.obj for x in fixes) and len(fixes) > 1, report.render()
    assert report.repaired == []
    assert len(report.refused) == len(fixes), report.render()
    for x in fixes:
        (refusal,) = [r for r in report.refused if r.startswith(f"{x.obj}: ApplyError: ")]
        assert f"{INTRUDER!r}" in refusal and not_owned(owner) in refusal, refusal
    assert every_file(theirs) == before


def tamper(path: Path) -> None:
    """The same size, another content."""
    content = path.read_bytes()
    path.write_bytes(bytes([content[0] ^ 1]) + content[1:])


def test_a_verify_repair_whose_source_file_no_longer_matches_its_checksum_is_refused(
    replica: Replica,
) -> None:
    """The file the event names changed on the source since (its change-manager copy too): the copy
    would not be the event's file. The other repair is made; the refused one changes nothing."""
    target = replica.target
    files = data_files(target)
    lost = files[0]
    changed = next(f for f in files if f.parent != lost.parent)
    lost.unlink()
    changed.unlink()
    (fix,) = [x.repair for x in target.verify().drifts if x.repair and changed.name in x.obj
              and Path(x.repair.directory) == changed.parent]
    for uri in (fix.ref.uri, fix.ref.cm_uri):
        if uri and Path(urlsplit(uri).path).exists():
            tamper(Path(urlsplit(uri).path))
    before = every_file(changed.parent)
    report = target.verify(repair=True)
    assert [Path(o).name for o in report.repaired] == [lost.name], report.render()
    (refusal,) = report.refused
    assert refusal.startswith(f"{next(x.obj for x in report.drifts)}: ChecksumMismatchError: "), refusal
    assert changed.name in refusal and "no copy matches the event" in refusal, refusal
    assert lost.exists() and not changed.exists()
    assert every_file(changed.parent) == before  # nothing staged left behind either


def test_a_source_check_repair_whose_source_file_changed_since_it_was_hashed_is_refused(
    replica: Replica,
) -> None:
    """A replica file differs from the source's by content; between the check (which hashed the
    source's file) and the repair, the source's file changes without any event: the copy would not
    be the file judged, so it is refused and the replica's file stays as it was."""
    target = replica.target
    victim = data_files(target)[0]
    source = replica.source_file(victim)
    tamper(victim)
    damaged = victim.read_bytes()
    entered: list[int] = []

    @contextlib.contextmanager
    def guard() -> Iterator[None]:
        entered.append(1)
        if len(entered) == 2:  # the repair's: after the check hashed both sides
            tamper(source)
            source.write_bytes(source.read_bytes()[:-1] + b"!")
        yield

    report = check_against_source(target.settings(), replica.conn(), catalog=target.catalog, guard=guard,
                                  repair=True)
    (drift,) = report.drifts
    assert drift.kind == d.CHECKSUM and victim.name in drift.obj, report.render()
    assert report.repaired == []
    (refusal,) = report.refused
    assert refusal.startswith(f"{drift.obj}: ChecksumMismatchError: "), refusal
    assert victim.read_bytes() == damaged
    assert sorted(p.name for p in victim.parent.iterdir()) == sorted(
        p.name for p in source.parent.iterdir() if not p.name.startswith((".", "_")))
