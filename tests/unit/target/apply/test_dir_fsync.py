"""Directory fsyncs behind a fenced batch's steps (streamer.target.apply.dir_fsync), and the journal's
syncs that make nothing durable (streamer.target.apply.journal)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from streamer.events.model import Event
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.target.apply import dir_fsync, door, files, markers
from streamer.target.apply import journal as j
from streamer.target.apply.applier import DEFER_MIN_EVENTS, regrouped
from streamer.target.apply.dir_fsync import DirFsyncs
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from tests.unit.target import builders as b
from tests.unit.target.apply.test_apply import Env, make_env


def test_a_queued_fsync_covers_later_renames_but_a_running_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started, release = threading.Event(), threading.Event()
    synced: list[str] = []

    def slow_fsync(directory: str) -> None:
        started.set()
        release.wait(5)
        synced.append(directory)

    monkeypatch.setattr(dir_fsync, "fsync_dir", slow_fsync)
    fsyncs = DirFsyncs()
    fsyncs.add("/d")
    assert started.wait(5)  # running: it may have read the directory before the next rename
    fsyncs.add("/d")  # so a new one is queued
    fsyncs.add("/d")  # queued, not started: it will see this rename too
    fsyncs.add("/e")
    release.set()
    fsyncs.wait()
    assert synced == ["/d", "/d", "/e"]
    fsyncs.close()


def test_a_failed_fsync_is_raised_even_when_a_later_one_of_its_directory_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def failing_once(directory: str) -> None:
        calls.append(directory)
        if len(calls) == 1:
            raise OSError(5, "Input/output error")  # the kernel reports a writeback error once

    monkeypatch.setattr(dir_fsync, "fsync_dir", failing_once)
    fsyncs = DirFsyncs()
    fsyncs.add("/d")
    while len(calls) < 1:
        time.sleep(0.001)
    time.sleep(0.05)  # the first one done: the next is queued anew
    fsyncs.add("/d")
    with pytest.raises(OSError, match="Input/output"):
        fsyncs.wait()
    assert calls == ["/d", "/d"]
    with pytest.raises(OSError, match="restart the job"):  # and at every later wait: no marker after it
        fsyncs.wait()
    fsyncs.close()


def _log_syncs_and_markers(env: Env, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Inline fsyncs, deferred ones (held until the batch's end begins, so one that did not wait would
    pass them) and ``repl.last.id`` writes, in the order they happened."""
    log: list[tuple[str, str]] = []
    lock = threading.Lock()

    def note(kind: str, what: str) -> None:
        with lock:
            log.append((kind, what))

    batch_end = threading.Event()

    def deferred(directory: str) -> None:
        batch_end.wait(5)  # held until the batch's end begins: it must wait for this one
        note("deferred", directory)

    flush = markers.flush

    def flush_after_steps(ctx: object, progress: object) -> None:
        batch_end.set()
        flush(ctx, progress)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "fsync_dir", lambda directory: note("inline", directory))
    monkeypatch.setattr(dir_fsync, "fsync_dir", deferred)
    monkeypatch.setattr(markers, "flush", flush_after_steps)
    alter = env.catalog.alter_database

    def alter_database(name: str, db: object, *args: object, **kw: object) -> None:
        note("marker", getattr(db, "parameters", {}).get(LAST_ID_PARAM, ""))  # a fence's too: same value
        alter(name, db, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(env.catalog, "alter_database", alter_database)
    return log


def _inserts(env: Env, name: str, n: int, first_id: int) -> list[Event]:
    snap = env.table(name)
    refs = [env.file(snap, f"{i:06d}_0", f"{name}{i}".encode()) for i in range(n)]
    return [b.insert(first_id + i, snap, [ref]) for i, ref in enumerate(refs)]


def _setup(env: Env, tables: list[str]) -> int:
    env.applier.markers.per_batch = True  # a backlog's markers once per database, at its end
    events = [b.create_db(1, "a"), *(b.create_table(2 + i, env.table(name)) for i, name in enumerate(tables))]
    assert env.run(events) == [e.event_id for e in events]
    return len(events) + 1


def test_a_fenced_batch_syncs_its_directories_behind_its_steps_and_before_its_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path, coalesce_backlog=True)
    first = _setup(env, ["t", "u"])
    t, u = env.table("t"), env.table("u")
    events = []
    for i in range(DEFER_MIN_EVENTS):  # u's ALTERs, between t's INSERTs, collapse into the last one
        ref = env.file(t, f"{i:06d}_0", f"t{i}".encode())
        events += [b.insert(first + 2 * i, t, [ref]),
                   b.alter_table(first + 2 * i + 1, u, b.replace(u, parameters={"v": str(i)}))]
    the_plan = regrouped(env.applier, plan(events, env.applier.load_progress(), env.state.halts()))
    assert any(step.fenced for step in the_plan.steps)  # the order changed: the segment is fenced
    log = _log_syncs_and_markers(env, monkeypatch)
    report = run_plan(env.applier, the_plan, env.state)
    assert not report.halted and sorted(report.applied) == [e.event_id for e in events]
    table_dir = str(env.wh / "a.db" / "t")
    # the first one held while it runs, at most one queued behind it covers every later rename
    kinds = [kind for kind, what in log if what == table_dir]
    assert set(kinds) == {"deferred"} and len(kinds) <= 2
    marker = log.index(("marker", str(events[-1].event_id)))
    assert all(i < marker for i, (kind, _) in enumerate(log) if kind == "deferred")
    assert env.catalog.databases["a"].parameters[LAST_ID_PARAM] == str(events[-1].event_id)
    assert len([f for f in env.files() if f.startswith("a.db/t/")]) == DEFER_MIN_EVENTS


def test_a_step_the_journal_records_syncs_its_directory_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path, coalesce_backlog=True)
    first = _setup(env, ["t"])
    events = _inserts(env, "t", DEFER_MIN_EVENTS, first)
    log = _log_syncs_and_markers(env, monkeypatch)
    assert env.run(events) == [e.event_id for e in events]  # in event order: nothing fenced
    table_dir = str(env.wh / "a.db" / "t")
    assert [kind for kind, what in log if what == table_dir] == ["inline"] * len(events)


def test_the_journal_syncs_only_when_a_line_was_written_since_its_last_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(j.os, "fdatasync", lambda fd: synced.append(fd))
    journal = j.ProgressJournal(tmp_path)
    journal.before_step({("a", "t")})
    journal.record("a", 1)
    journal.before_step({("a", "t")})  # the line of a step that changed the table goes to disk first
    assert len(synced) == 1
    journal.before_step({("a", "t")})  # a fenced database's step wrote no line: nothing to make durable
    journal.sync()
    assert len(synced) == 1
    journal.record("a", 2)
    journal.sync()
    assert len(synced) == 2
    assert journal.read() == {"a": 2}


def test_a_step_that_records_itself_on_its_own_syncs_inline() -> None:
    from streamer.target.apply.effects import Advance, CommitTxn
    from streamer.target.apply.executor import _recorded_at_batch_end

    fenced = Advance("a", 9, deferred=True, journaled=False)
    assert _recorded_at_batch_end([fenced])
    assert not _recorded_at_batch_end([Advance("a", 9, deferred=True, journaled=True)])
    assert not _recorded_at_batch_end([Advance("a", 9, deferred=False, journaled=False)])
    # a commit is written to the visibility store at once, and a replay trusts it (copies nothing again)
    assert not _recorded_at_batch_end([CommitTxn(7, frozenset()), fenced])


def _queue_held(env: Env, monkeypatch: pytest.MonkeyPatch, log: list[str]) -> threading.Event:
    release = threading.Event()

    def held(directory: str) -> None:
        release.wait(5)
        log.append("fsync")

    monkeypatch.setattr(dir_fsync, "fsync_dir", held)
    env.applier.markers.dir_fsyncs.add(str(env.wh))
    threading.Timer(0.2, release.set).start()
    return release


def test_a_marker_written_outside_the_batch_end_waits_for_the_queued_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path)
    assert env.run([b.create_db(1, "a")]) == [1]
    log: list[str] = []
    _queue_held(env, monkeypatch, log)
    alter = env.catalog.alter_database
    monkeypatch.setattr(env.catalog, "alter_database", lambda *a, **k: (log.append("marker"), alter(*a, **k)))
    markers.write_marker(env.applier, "a", 2, 2)
    assert log == ["fsync", "marker"]


def test_a_directory_moves_only_after_the_queued_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path)
    src, dst = env.wh / "a.db" / "t" / "p=1", env.wh / "a.db" / "t" / "p=2"
    src.mkdir(parents=True)
    log: list[str] = []
    _queue_held(env, monkeypatch, log)
    move = files.move_dir
    monkeypatch.setattr(files, "move_dir", lambda *a, **k: (log.append("move"), move(*a, **k))[1])
    assert door.move_dir(env.applier, str(src), str(dst), event_id=3)
    assert log == ["fsync", "move"] and dst.is_dir()


@pytest.mark.parametrize("fenced", [False, True])
def test_a_dropped_directory_s_parent_is_synced_after_its_rename_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fenced: bool
) -> None:
    env = make_env(tmp_path)
    part = env.wh / "a.db" / "t" / "p=1"
    part.mkdir(parents=True)
    synced: list[tuple[str, str]] = []
    monkeypatch.setattr(door, "fsync_dir", lambda d: synced.append(("inline", d)))
    queue = env.applier.markers.dir_fsyncs
    monkeypatch.setattr(queue, "add", lambda d: synced.append(("queued", d)))
    env.applier.dir_fsyncs = queue if fenced else None  # as executor.run sets it for the step
    door.remove_tree(env.applier, str(part), event_id=5)
    assert not part.exists()
    assert synced == [("queued" if fenced else "inline", str(env.wh / "a.db" / "t"))]


def test_a_directory_that_cannot_be_opened_is_not_taken_for_a_gone_one(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError):  # before: every OSError passed as "nothing to sync"
        dir_fsync.fsync_dir(str(tmp_path / "f" / "x"))
    dir_fsync.fsync_dir(str(tmp_path / "gone"))  # absent: nothing to sync
