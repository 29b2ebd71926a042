"""ACID transactions through the applier: memory catalog, real files, the real visibility file."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from streamer import metrics
from streamer.errors import ApplyError
from streamer.events.model import (
    AbortTxnPayload,
    AcidWrite,
    AcidWritePayload,
    CommitTxnPayload,
    Event,
    EventType,
    FileRef,
    OpenTxnPayload,
    TableSnapshot,
)
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier, Staged
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import GLOBAL_DB, plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from streamer.target.state.visibility import (
    ACID_PARAM,
    ACID_PROPERTIES_PARAM,
    AcidStateError,
    TxnState,
    Visibility,
    VisibilityStore,
    load_visibility,
)
from tests.unit.target import builders as b

ACID = {"transactional": "true", "transactional_properties": "default"}


class SpyCopier(FileCopier):
    """A real copier that keeps what it staged, so tests read its own report."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.staged: list[Staged] = []

    def stage_all(
        self, refs: Iterable[FileRef], dest_for_ref: Callable[[FileRef], str], **kw: Any
    ) -> Staged:
        staged = super().stage_all(refs, dest_for_ref, **kw)
        self.staged.append(staged)
        return staged

    def bytes_copied(self) -> int:
        return sum(s.report().bytes_copied for s in self.staged)


class SpyStore(VisibilityStore):
    """The real store; records each saved state and what the target root held at that instant."""

    def __init__(self, root: str, wh: Path) -> None:
        super().__init__(root, b.SOURCE_ID)
        self.wh = wh
        self.saves: list[tuple[Visibility, set[str]]] = []
        self.fail_next = False

    def _save(self, state: Visibility) -> None:
        if self.fail_next:
            self.fail_next = False
            raise AcidStateError("disk full (test)")
        files = {str(p.relative_to(self.wh)) for p in self.wh.rglob("*") if p.is_file()}
        self.saves.append((state, files))
        super()._save(state)


@dataclasses.dataclass
class Env:
    root: Path
    catalog: MemoryCatalog
    copier: SpyCopier
    store: SpyStore
    applier: Applier
    state: TargetState

    @property
    def wh(self) -> Path:
        return self.root / "wh"

    def table(self, db: str, name: str, keys: tuple[str, ...] = ()) -> TableSnapshot:
        return b.table(db, name, keys, location=f"file://{self.root}/src/{db}.db/{name}", **ACID)

    def write(self, snap: TableSnapshot, write_id: int, content: bytes, part: str | None = None) -> AcidWrite:
        """A source delta file of ``write_id`` and the write that names it."""
        subdir = f"delta_{write_id:07d}_{write_id:07d}_0000"
        base = Path((snap.sd.location or "").removeprefix("file://"))
        rel = f"{part}/{subdir}/bucket_00000" if part else f"{subdir}/bucket_00000"
        ref = dataclasses.replace(b.write_source_file(base, rel, content), subdir=subdir, partition=part)
        psnap = b.partition(snap, *[kv.split("=")[1] for kv in part.split("/")]) if part else None
        return AcidWrite(snap.db, snap.name, write_id, [ref], part, snap, psnap)

    def run(self, events: list[Event]) -> list[int]:
        the_plan = plan(events, self.applier.load_progress(), self.state.halts())
        return run_plan(self.applier, the_plan, self.state).applied

    def target_files(self) -> set[str]:
        files = {str(p.relative_to(self.wh)) for p in self.wh.rglob("*") if p.is_file()}
        return {f for f in files if not f.startswith("_streamer/")}


@pytest.fixture
def env(tmp_path: Path) -> Env:
    (tmp_path / "wh").mkdir()
    catalog, copier = MemoryCatalog(), SpyCopier()
    store = SpyStore(str(tmp_path / "wh"), tmp_path / "wh")
    state = TargetState(tmp_path / "state")
    paths = TargetPaths(str(tmp_path / "wh"))
    applier = Applier(catalog, copier, paths, b.SOURCE_ID, state=state, acid=store)
    return Env(tmp_path, catalog, copier, store, applier, state)


def open_txn(event_id: int, *txns: int) -> Event:
    return b.event(event_id, EventType.OPEN_TXN, OpenTxnPayload(list(txns)))


def commit(event_id: int, txn: int, *writes: AcidWrite) -> Event:
    return b.event(event_id, EventType.COMMIT_TXN, CommitTxnPayload(txn, list(writes)))


def abort(event_id: int, txn: int, *dbs: str) -> Event:
    return b.event(event_id, EventType.ABORT_TXN, AbortTxnPayload(txn, list(dbs)))


def two_tables(env: Env) -> tuple[TableSnapshot, TableSnapshot]:
    t1, t2 = env.table("a", "t1"), env.table("b", "t2", ("p",))
    env.run([b.create_db(1, "a"), b.create_db(2, "b"), b.create_table(3, t1), b.create_table(4, t2),
             b.add_partition(5, t2, [b.partition(t2, "x")])])
    return t1, t2


def sample(metric: str) -> float:
    return metrics.REGISTRY.get_sample_value(metric) or 0.0


def test_acid_table_keeps_hive_acid_keys_under_streamer_keys(env: Env) -> None:
    two_tables(env)
    params = env.catalog.get_table("a", "t1").parameters  # type: ignore[union-attr]
    assert "transactional" not in params and "transactional_properties" not in params
    assert params[ACID_PARAM] == "true" and params[ACID_PROPERTIES_PARAM] == "default"


def test_commit_publishes_all_tables_then_flips_visibility_once(env: Env) -> None:
    t1, t2 = two_tables(env)
    w1, w2 = env.write(t1, 1, b"one"), env.write(t2, 1, b"two", "p=x")
    committed = sample("streamer_target_txns_committed_total")
    env.run([open_txn(10, 7)])
    assert env.store.current().open_count() == 1
    saves_before = len(env.store.saves)
    assert env.run([commit(11, 7, w1, w2)]) == [11]

    expected = {
        "a.db/t1/delta_0000001_0000001_0000/bucket_00000",
        "b.db/t2/p=x/delta_0000001_0000001_0000/bucket_00000",
    }
    assert env.target_files() == expected
    assert len(env.store.saves) == saves_before + 1  # one atomic replace for the whole transaction
    state, files_then = env.store.saves[-1]
    assert expected <= files_then  # every file was in place before anything became visible
    assert state.write_ids("a.t1") == [1] and state.write_ids("b.t2") == [1]
    assert load_visibility(str(env.wh), b.SOURCE_ID) == state
    assert state.txn(b.SOURCE_ID, 7).state is TxnState.COMMITTED  # type: ignore[union-attr]
    assert env.store.current().open_count() == 0
    assert sample("streamer_target_txns_committed_total") == committed + 1
    assert env.state.applied()[GLOBAL_DB] == 11


def test_abort_copies_zero_bytes(env: Env) -> None:
    t1, t2 = two_tables(env)
    w1, w2 = env.write(t1, 1, b"aborted-1"), env.write(t2, 1, b"aborted-2", "p=x")
    copied = sample("streamer_target_bytes_copied_total")
    aborted = sample("streamer_target_txns_aborted_total")
    skipped = sample("streamer_target_aborted_bytes_skipped_total")
    acid_write = b.event(12, EventType.ACID_WRITE, AcidWritePayload(8, w1), "a", "t1")
    assert env.run([open_txn(11, 8), acid_write, abort(13, 8, "a", "b")]) == [11, 12, 13]

    assert env.copier.staged == [] and env.copier.bytes_copied() == 0
    assert env.target_files() == set()
    assert not list(env.wh.rglob("delta_*"))
    assert sample("streamer_target_bytes_copied_total") == copied
    assert sample("streamer_target_txns_aborted_total") == aborted + 1
    assert sample("streamer_target_aborted_bytes_skipped_total") == skipped + len(b"aborted-1")
    state = env.store.current()
    assert state.txn(b.SOURCE_ID, 8).state is TxnState.ABORTED  # type: ignore[union-attr]
    assert state.write_ids("a.t1") == [] and state.open_count() == 0
    with pytest.raises(ApplyError, match="was aborted"):  # the source never does this; refuse loudly
        env.applier.apply(plan([commit(14, 8, w1, w2)], {}).steps[0])


def test_crash_before_visibility_flip_converges_on_replay(env: Env) -> None:
    t1, t2 = two_tables(env)
    w1, w2 = env.write(t1, 3, b"one"), env.write(t2, 4, b"two", "p=x")
    env.run([open_txn(10, 9)])
    env.store.fail_next = True
    assert env.run([commit(11, 9, w1, w2)]) == []  # the GLOBAL stream halts at the commit
    assert env.state.is_halted(GLOBAL_DB)
    assert len(env.target_files()) == 2  # published but invisible: no write id names them yet
    assert env.store.current().write_ids("a.t1") == []

    env.copier.staged.clear()
    env.state.retry(GLOBAL_DB)
    assert env.run([open_txn(10, 9), commit(11, 9, w1, w2)]) == [11]
    assert [s.report().skipped for s in env.copier.staged] == [1, 1]  # already there: not copied again
    assert env.copier.bytes_copied() == 0
    state = env.store.current()
    assert state.write_ids("a.t1") == [3] and state.write_ids("b.t2") == [4]
    assert state.txn(b.SOURCE_ID, 9).target_id == 1  # type: ignore[union-attr]


def test_replay_after_the_flip_is_a_no_op(env: Env) -> None:
    t1, _ = two_tables(env)
    w1 = env.write(t1, 1, b"one")
    env.run([open_txn(10, 5), commit(11, 5, w1)])
    before, saves = env.store.current(), len(env.store.saves)
    env.copier.staged.clear()
    step = plan([commit(11, 5, w1)], {}).steps[0]  # as if progress had not been recorded
    env.applier.apply(step)
    assert env.copier.staged == [] and len(env.store.saves) == saves
    assert env.store.current() == before


def test_txn_mapping_is_idempotent_and_dense(env: Env) -> None:
    env.applier.apply(plan([open_txn(1, 40, 41)], {}).steps[0])
    env.applier.apply(plan([open_txn(1, 40, 41)], {}).steps[0])  # replayed
    env.applier.apply(plan([open_txn(2, 42)], {}).steps[0])
    state = env.store.current()
    assert {t: state.txn(b.SOURCE_ID, t).target_id for t in (40, 41, 42)} == {40: 1, 41: 2, 42: 3}  # type: ignore[union-attr]
    assert state.open_count() == 3 and state.next_txn == 4


def test_unknown_txns(env: Env) -> None:
    t1, _ = two_tables(env)
    saves = len(env.store.saves)
    env.run([abort(10, 99), commit(11, 98)])  # opened before this target's history, nothing to copy
    assert len(env.store.saves) == saves
    env.run([commit(12, 97, env.write(t1, 2, b"late"))])  # its writes still arrive complete
    assert env.store.current().write_ids("a.t1") == [2]


def test_write_to_a_missing_table_halts_with_a_clear_error(env: Env) -> None:
    t1, _ = two_tables(env)
    ghost = env.write(env.table("a", "ghost"), 1, b"x")
    env.run([open_txn(10, 3), commit(11, 3, env.write(t1, 1, b"ok"), ghost)])
    halt = env.state.halts()[GLOBAL_DB]
    assert halt.event_id == 11 and halt.object == "a.ghost" and "missing on the target" in halt.cause
    assert env.target_files() == set()  # nothing of the transaction was published
    assert env.store.current().write_ids("a.t1") == []


def test_rename_keeps_write_ids_and_recreate_starts_empty(env: Env) -> None:
    t1, _ = two_tables(env)
    env.run([open_txn(10, 1), commit(11, 1, env.write(t1, 1, b"one"))])
    renamed = dataclasses.replace(t1, name="t9")
    env.run([b.alter_table(12, t1, renamed)])
    state = env.store.current()
    assert state.write_ids("a.t9") == [1] and state.write_ids("a.t1") == []
    env.run([b.drop_table(13, renamed), b.create_table(14, renamed)])
    assert env.store.current().write_ids("a.t9") == []
