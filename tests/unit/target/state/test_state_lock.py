"""The job and operator commands change the state dir under one lock, re-reading before each change:
no operator action is undone by the job's stale copy, and no job progress by the operator's."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from streamer.target.state.lock import StateLockTimeout, state_lock
from streamer.target.state.state_file import TargetState
from tests.unit.target.holder import held_elsewhere


def test_retry_in_another_process_survives_the_jobs_next_halt(tmp_path: Path) -> None:
    """The interleaving of issue 27: the job read the state (a halted) at the start of its batch, the
    operator retries a, then the job halts b in the same batch: both changes are kept."""
    job = TargetState(tmp_path)
    job.halt("a", 5, "no copy matches")
    job.set_offset("a", 40)
    job = TargetState(tmp_path)  # the job's copy, read at the start of the batch

    assert TargetState(tmp_path).retry("a") is not None  # `streamer target retry --db a`

    job.halt("b", 9, "cannot copy")
    after = TargetState(tmp_path)
    assert set(after.halts()) == {"b"}
    assert after.pending_replays() == {"a": 40}


def test_stale_operator_copy_keeps_the_jobs_progress(tmp_path: Path) -> None:
    """An operator's copy read before the job recorded progress must not erase that progress (the
    record that keeps a replay from re-creating a dropped database)."""
    job = TargetState(tmp_path)
    job.halt("a", 5, "boom")
    operator = TargetState(tmp_path)
    job.record_applied("gone", 17)  # a dropped database's last id
    operator.skip("a", 5)
    assert TargetState(tmp_path).applied() == {"gone": 17, "a": 5}


def _halt_many(state_dir: str, db: str, n: int) -> None:
    state = TargetState(state_dir)
    for i in range(n):
        state.record_applied(db, i + 1)
    state.halt(db, n + 1, "done")


def test_concurrent_processes_lose_no_change(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_halt_many, args=(str(tmp_path), f"db{i}", 25)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    state = TargetState(tmp_path)
    assert state.applied() == {f"db{i}": 25 for i in range(4)}
    assert set(state.halts()) == {f"db{i}" for i in range(4)}


def test_a_held_lock_is_a_bounded_wait_naming_the_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with held_elsewhere(lambda: state_lock(str(tmp_path))) as holder:
        with pytest.raises(StateLockTimeout, match=rf"held by pid {holder.pid} on "), \
                state_lock(tmp_path, wait=0.2):
            pass
        monkeypatch.setenv("STREAMER_STATE_LOCK_WAIT", "0.2")
        with pytest.raises(StateLockTimeout):  # a change from the job or a command waits as long
            TargetState(tmp_path).halt("a", 1, "x")
    with state_lock(tmp_path, wait=5):  # released when the holder let go
        pass


def test_the_lock_is_reentrant_in_a_thread(tmp_path: Path) -> None:
    with state_lock(tmp_path, wait=1), state_lock(tmp_path, wait=1):
        TargetState(tmp_path).halt("a", 1, "x")
    assert TargetState(tmp_path).is_halted("a")


def test_a_halt_records_where_to_re_read_from_in_the_same_change(tmp_path: Path) -> None:
    """A retry between the job's halt and a later offset update would release the database with
    nothing to re-read: its held events passed unapplied. The halt carries its offset at once."""
    job = TargetState(tmp_path)
    job.offset_of = {9: 40}.get  # the batch's event id -> Kafka offset
    job.halt("b", 9, "cannot copy")
    released = TargetState(tmp_path).retry("b")  # the operator, before the job's next step
    assert released is not None and released.offset == 40
    assert TargetState(tmp_path).pending_replays() == {"b": 40}


def test_a_replay_done_keeps_a_release_recorded_since(tmp_path: Path) -> None:
    """The job re-read a's held events from 40; meanwhile a halted again at offset 55 and was retried:
    finishing the first replay must not drop the second."""
    job = TargetState(tmp_path)
    job.offset_of = {5: 40, 8: 55}.get
    job.halt("a", 5, "x")
    job.retry("a")
    job.halt("a", 8, "again")
    TargetState(tmp_path).retry("a")  # the operator
    job.replay_done("a", 40)
    assert TargetState(tmp_path).pending_replays() == {"a": 55}
    job.replay_done("a", 55)
    assert TargetState(tmp_path).pending_replays() == {}
