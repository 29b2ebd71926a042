"""Several sources' target jobs sharing one warehouse: each keeps its ACID commits visible.

Two appliers of two source ids (two jobs: each its own visibility store, as each process has) on one
target metastore and warehouse interleave transactions; every commit of both stays visible to the
readers (``streamer.read.resolve``, what the read API pins). Before per-source files, both jobs
rewrote one cached file and the last writer dropped the other's commits. A replica of the single
file of earlier releases keeps reading and writing.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest

from streamer.events.envelope import Event
from streamer.events.model import AcidWrite, CommitTxnPayload, EventType, OpenTxnPayload, TableSnapshot
from streamer.metastore.memory import MemoryCatalog
from streamer.read.resolve import resolve
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b

ACID = {"transactional": "true", "transactional_properties": "default"}


@dataclasses.dataclass
class Job:
    """One source's target job: its own applier, state dir and (default) visibility store."""

    source_id: str
    db: str
    applier: Applier
    state: TargetState
    src: Path  # the source's warehouse

    def run(self, events: list[Event]) -> list[int]:
        mine = [dataclasses.replace(e, source=dataclasses.replace(e.source, source_id=self.source_id))
                for e in events]
        the_plan = plan(mine, self.applier.load_progress(), self.state.halts())
        applied = run_plan(self.applier, the_plan, self.state).applied
        assert not self.state.halts(), self.state.halts()
        return applied

    def table(self, name: str) -> TableSnapshot:
        return b.table(self.db, name, (), location=f"file://{self.src}/{self.db}.db/{name}", **ACID)

    def write(self, snap: TableSnapshot, write_id: int) -> AcidWrite:
        subdir = f"delta_{write_id:07d}_{write_id:07d}_0000"
        base = Path((snap.sd.location or "").removeprefix("file://"))
        content = f"{self.source_id}-{snap.name}-{write_id}".encode()
        ref = dataclasses.replace(b.write_source_file(base, f"{subdir}/bucket_00000", content), subdir=subdir)
        return AcidWrite(snap.db, snap.name, write_id, [ref], None, snap, None)


def open_txn(event_id: int, *txns: int) -> Event:
    return b.event(event_id, EventType.OPEN_TXN, OpenTxnPayload(list(txns)))


def commit(event_id: int, txn: int, *writes: AcidWrite) -> Event:
    return b.event(event_id, EventType.COMMIT_TXN, CommitTxnPayload(txn, list(writes)))


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    (tmp_path / "wh").mkdir()
    return tmp_path / "wh"


def make_job(tmp_path: Path, catalog: MemoryCatalog, source_id: str, db: str) -> Job:
    """A fresh job (a process start): nothing cached from an earlier one."""
    state = TargetState(tmp_path / f"state-{source_id}")
    paths = TargetPaths(str(tmp_path / "wh"))
    applier = Applier(catalog, FileCopier(max_workers=2), paths, source_id, state=state)
    return Job(source_id, db, applier, state, tmp_path / f"src-{source_id}")


def visible(catalog: MemoryCatalog, wh: Path, name: str) -> list[int]:
    """What a reader of the target sees of ``name``: its committed write ids, and a file for each."""
    pinned = resolve(catalog, name, str(wh))
    assert pinned.write_ids is not None, name
    dirs = {f.relative.split("/")[0] for files in pinned.partitions.values() for f in files}
    assert dirs == {f"delta_{w:07d}_{w:07d}_0000" for w in pinned.write_ids}, name
    return list(pinned.write_ids)


def two_jobs(tmp_path: Path) -> tuple[MemoryCatalog, Job, Job]:
    catalog = MemoryCatalog()
    a = make_job(tmp_path, catalog, "src-a", "sales")
    c = make_job(tmp_path, catalog, "src-b", "ads")
    a.run([b.create_db(1, "sales"), b.create_table(2, a.table("t"))])
    c.run([b.create_db(1, "ads"), b.create_table(2, c.table("u"))])
    return catalog, a, c


def test_two_sources_interleaving_commits_keep_both_visible(tmp_path: Path, wh: Path) -> None:
    catalog, a, c = two_jobs(tmp_path)
    ta, tu = a.table("t"), c.table("u")
    a.run([open_txn(10, 1)])
    c.run([open_txn(10, 1)])  # the same source txn id in both sources: two transactions
    a.run([commit(11, 1, a.write(ta, 1))])
    c.run([commit(11, 1, c.write(tu, 1))])  # B's job knew nothing of A's commit
    a.run([open_txn(12, 2), commit(13, 2, a.write(ta, 2))])
    c.run([open_txn(12, 3), commit(13, 3, c.write(tu, 3))])
    assert visible(catalog, wh, "sales.t") == [1, 2]
    assert visible(catalog, wh, "ads.u") == [1, 3]

    # restarted jobs (nothing cached) see and keep their own history; a replayed commit changes nothing
    a2, c2 = make_job(tmp_path, catalog, "src-a", "sales"), make_job(tmp_path, catalog, "src-b", "ads")
    a2.applier.apply(plan([commit(13, 2, a.write(ta, 2))], {}).steps[0])
    c2.run([open_txn(14, 4), commit(15, 4, c.write(tu, 4))])
    a.run([open_txn(14, 5), commit(15, 5, a.write(ta, 5))])  # the old A job, still cached
    assert visible(catalog, wh, "sales.t") == [1, 2, 5]
    assert visible(catalog, wh, "ads.u") == [1, 3, 4]


def test_two_sources_committing_at_once_lose_nothing(tmp_path: Path, wh: Path) -> None:
    catalog, a, c = two_jobs(tmp_path)
    rounds = 15
    writes = {job.source_id: [job.write(job.table(name), w) for w in range(1, rounds + 1)]
              for job, name in ((a, "t"), (c, "u"))}
    errors: list[BaseException] = []

    def drive(job: Job) -> None:
        try:
            for w, write in enumerate(writes[job.source_id], start=1):
                job.run([open_txn(10 * w, w), commit(10 * w + 1, w, write)])
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=(job,)) for job in (a, c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert visible(catalog, wh, "sales.t") == list(range(1, rounds + 1))
    assert visible(catalog, wh, "ads.u") == list(range(1, rounds + 1))


def test_a_replica_of_the_single_file_keeps_working(tmp_path: Path, wh: Path) -> None:
    """The single file of earlier releases: read for a source until its first change, which starts
    that source's own file from its part of it; the old file is never written."""
    catalog, a, c = two_jobs(tmp_path)
    ta, tu = a.table("t"), c.table("u")
    for w in (1, 2):  # the files earlier releases published (the commits' data)
        a.run([commit(20 + w, 100 + w, a.write(ta, w))])
    c.run([commit(21, 200, c.write(tu, 1))])
    for f in (wh / "_streamer/acid").rglob("*.json"):
        f.unlink()  # ... and not their visibility: the old release kept it in one file
    legacy = wh / "_streamer/acid/visible.json"
    legacy.write_text(json.dumps({  # as the earlier release wrote it
        "version": 1,
        "next_txn": 5,
        "tables": {"sales.t": [[1, 2]], "ads.u": [[1, 1]]},
        "txns": {
            "src-a": {"1": {"target": 1, "state": "committed", "pending_bytes": 0},
                      "2": {"target": 2, "state": "committed", "pending_bytes": 0},
                      "3": {"target": 4, "state": "open", "pending_bytes": 0}},
            "src-b": {"1": {"target": 3, "state": "committed", "pending_bytes": 0}},
        },
    }, indent=1))
    before = legacy.read_bytes()
    a, c = make_job(tmp_path, catalog, "src-a", "sales"), make_job(tmp_path, catalog, "src-b", "ads")
    assert visible(catalog, wh, "sales.t") == [1, 2]
    assert visible(catalog, wh, "ads.u") == [1]

    a.run([commit(30, 3, a.write(ta, 3))])  # opened under the old release
    assert visible(catalog, wh, "sales.t") == [1, 2, 3]
    assert visible(catalog, wh, "ads.u") == [1]  # B has no file of its own yet: the old one
    state = a.applier.acid.current()
    assert set(state.txns) == {"src-a"} and state.txn("src-a", 3).target_id == 4  # type: ignore[union-attr]
    assert state.next_txn == 5

    c.run([open_txn(31, 2), commit(32, 2, c.write(tu, 2))])
    assert visible(catalog, wh, "ads.u") == [1, 2]
    assert visible(catalog, wh, "sales.t") == [1, 2, 3]
    assert c.applier.acid.current().txn("src-b", 2).target_id == 5  # type: ignore[union-attr]
    assert legacy.read_bytes() == before  # never written: an old job of a third source may still use it

    legacy.unlink()  # once every source has its own file, the old one holds nothing anybody reads
    assert visible(catalog, wh, "sales.t") == [1, 2, 3]
    assert visible(catalog, wh, "ads.u") == [1, 2]
