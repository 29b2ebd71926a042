"""A database halted at an INSERT whose files were gone resumes by itself when the stream brings the
event that voids them (issue 25): the job retries from the INSERT, re-reads its held events with the
voiding one among them, and applies the run whole; after a restart too."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streamer.events.model import Event, FileRef
from streamer.metastore.memory import MemoryCatalog
from streamer.target.job.settings import TrustSettings
from streamer.target.job.streaming import BatchApplier, replay_held
from tests.unit.target import builders as b

from .test_held_events import Topic
from .test_held_events import _job as held_job


def _job(
    tmp_path: Path, catalog: MemoryCatalog, topic: Topic, monkeypatch: pytest.MonkeyPatch
) -> BatchApplier:
    """The job of ``test_held_events``, reading the source files below ``tmp_path/src``."""
    return held_job(tmp_path, catalog, topic, monkeypatch,
                    trust=TrustSettings(source_prefixes=((tmp_path / "src").as_uri(),)))


def _events(tmp_path: Path) -> tuple[list[Event], FileRef, FileRef]:
    src = tmp_path / "src"
    t = b.table("a", "t", location=f"file://{src}/a.db/t")
    u = b.table("a", "u", location=f"file://{src}/a.db/u")
    first = b.write_source_file(src / "a.db" / "t", "first", b"first")
    final = b.write_source_file(src / "a.db" / "t", "final", b"final")
    events = [
        b.create_db(1, "a"),
        b.create_table(2, t),
        b.create_table(3, u),
        b.insert(4, t, [first]),  # its file is gone (below): halts, no voiding event yet
        b.alter_table(5, t, dataclasses.replace(t, parameters={"numRows": "1"})),  # held
        b.insert(6, t, [final], replace=True),  # voids event 4's file
    ]
    return events, first, final


@pytest.mark.parametrize("restart", [False, True])
def test_a_later_overwrite_releases_the_halted_insert_and_the_run_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restart: bool
) -> None:
    catalog, topic = MemoryCatalog(), Topic()
    job = _job(tmp_path, catalog, topic, monkeypatch)
    events, first, _ = _events(tmp_path)
    Path(first.uri.removeprefix("file://")).unlink()  # the source's overwrite deleted it
    job.process(topic.append(*events[:4]))
    assert job.state.halts()["a"].event_id == 4
    job.process(topic.append(events[4]))
    assert job.state.halts()["a"].event_id == 4  # nothing voids the file yet
    if restart:  # the halted INSERT is no longer in memory: it is re-read from the topic
        job = _job(tmp_path, catalog, topic, monkeypatch)
    job.process(topic.append(events[5]))
    assert "a" not in job.state.halts()  # released; its held events are re-read with the next batch
    job.process(topic.append(b.create_db(7, "other")))
    assert "a" not in job.state.halts()
    assert job.applier.progress["a"] == 6
    table_dir = tmp_path / "wh" / "a.db" / "t"
    assert sorted(p.name for p in table_dir.iterdir() if not p.name.startswith((".", "_"))) == ["final"]
    table = catalog.get_table("a", "t")
    assert table is not None and table.parameters.get("numRows") == "1"  # the deferred ALTER applied


def test_a_release_on_an_idle_stream_is_applied_without_waiting_for_another_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The voiding event is the last the source wrote: no later batch comes to re-read the held
    events, so the job's loop does (``replay_held``), up to the last record it consumed."""
    catalog, topic = MemoryCatalog(), Topic()
    job = _job(tmp_path, catalog, topic, monkeypatch)
    events, first, _ = _events(tmp_path)
    Path(first.uri.removeprefix("file://")).unlink()
    assert not replay_held(job)  # nothing consumed, nothing held
    job.process(topic.append(*events[:5]))
    assert not replay_held(job)  # halted: nothing to re-read until a release
    job.process(topic.append(events[5]))
    assert "a" not in job.state.halts() and job.applier.progress["a"] == 3  # released, not yet re-read
    assert replay_held(job)
    assert job.applier.progress["a"] == 6 and not job.state.pending_replays()
    table = catalog.get_table("a", "t")
    assert table is not None and table.parameters.get("numRows") == "1"
    assert not replay_held(job)  # done: the next call does nothing
    job.process(topic.append(b.create_db(7, "other")))  # the next record is not re-applied
    assert job.applier.progress["a"] == 6 and "a" not in job.state.halts()


def test_an_insert_no_later_event_voids_stays_halted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, topic = MemoryCatalog(), Topic()
    job = _job(tmp_path, catalog, topic, monkeypatch)
    events, first, _ = _events(tmp_path)
    Path(first.uri.removeprefix("file://")).unlink()
    job.process(topic.append(*events[:5]))
    other = b.insert(6, b.table("a", "u", location=f"file://{tmp_path}/src/a.db/u"), [], replace=True)
    job.process(topic.append(other))  # overwrites another table: no release
    job.process(topic.append(b.create_db(7, "other")))
    assert job.state.halts()["a"].event_id == 4
    assert job.applier.progress["a"] == 3


def test_a_retry_that_halts_again_is_not_repeated_for_every_later_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table was renamed before any overwrite: the retry's replay finds no run and halts again;
    later overwrites of a new table of that name do not re-read the held range once per batch."""
    catalog, topic = MemoryCatalog(), Topic()
    job = _job(tmp_path, catalog, topic, monkeypatch)
    events, first, final = _events(tmp_path)
    Path(first.uri.removeprefix("file://")).unlink()
    t = b.table("a", "t", location=f"file://{tmp_path}/src/a.db/t")
    job.process(topic.append(*events[:4]))
    job.process(topic.append(b.alter_table(5, t, dataclasses.replace(t, name="t2"))))
    job.process(topic.append(b.create_table(6, t), b.insert(7, t, [final], replace=True)))
    assert "a" not in job.state.halts()  # released once: the overwrite names the halted table
    job.process(topic.append(b.create_db(8, "other")))
    assert job.state.halts()["a"].event_id == 4  # the rename stops the run: halted again
    replays = len(topic.replayed)
    job.process(topic.append(b.insert(9, t, [final], replace=True)))
    job.process(topic.append(b.create_db(10, "more")))
    assert job.state.halts()["a"].event_id == 4
    assert len(topic.replayed) == replays  # no second retry, no second re-read


def test_a_run_halted_by_another_gone_write_is_retried_when_that_one_is_voided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unpaced Spark SQL: the run from event 4 (voided by 6) holds event 5, whose files are gone too and
    whose own overwrite (7) comes later: halted at 4 naming 5, retried when 7 arrives, and applied."""
    catalog, topic = MemoryCatalog(), Topic()
    job = _job(tmp_path, catalog, topic, monkeypatch)
    src = tmp_path / "src"
    t = b.table("a", "t", ("p",), location=f"file://{src}/a.db/t")
    files = {n: b.write_source_file(src / "a.db" / "t" / f"p={n[0]}", n, n.encode())
             for n in ("1a", "2a", "1b", "2b")}
    for gone_name in ("1a", "2a"):
        Path(files[gone_name].uri.removeprefix("file://")).unlink()
    job.process(topic.append(
        b.create_db(1, "a"), b.create_table(2, t),
        b.add_partition(3, t, [b.partition(t, "1"), b.partition(t, "2")]),
        b.insert(4, t, [files["1a"]], values=["1"]),
    ))
    assert job.state.halts()["a"].event_id == 4
    job.process(topic.append(b.insert(5, t, [files["2a"]], values=["2"], replace=True),
                             b.insert(6, t, [files["1b"]], values=["1"], replace=True)))
    job.process(topic.append(b.create_db(100, "x")))  # the retry's replay: the run from 4 fails at 5
    halt = job.state.halts()["a"]
    assert halt.event_id == 4 and "event 5 failed while a voiding run was pending" in halt.cause
    job.process(topic.append(b.insert(7, t, [files["2b"]], values=["2"], replace=True)))
    job.process(topic.append(b.create_db(101, "y")))
    assert "a" not in job.state.halts()
    assert job.applier.progress["a"] == 7
    table_dir = tmp_path / "wh" / "a.db" / "t"
    visible = sorted(p.name for p in table_dir.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert visible == ["1b", "2b"]
