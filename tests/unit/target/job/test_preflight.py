"""What `target run` checks before Spark starts and says while it waits (issue 40 items 5 and 6): a
live job on the state dir, a checkpoint of another topic, a topic of another source are one line; no
record yet and a bound beyond the head are warnings, repeated while the job waits."""

from __future__ import annotations

import json
import logging
import multiprocessing
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from streamer.errors import ConfigError
from streamer.metastore.memory import MemoryCatalog
from streamer.target.dr.failover import JobLock, JobRunningError
from streamer.target.job.preflight import (
    Waiting,
    beyond_head_message,
    check_checkpoint,
    claim,
    nothing_yet_message,
    other_source_message,
    refuse_live_job,
    sources_of,
)
from streamer.target.job.settings import (
    KafkaSettings,
    LayoutSettings,
    MetastoreSettings,
    TargetSettings,
)
from streamer.target.state.binding import read_binding


def _settings(tmp_path: Path, topic: str = "t.prod") -> TargetSettings:
    return TargetSettings(
        source_id="prod",
        kafka=KafkaSettings(bootstrap_servers="k:9092", topic=topic),
        metastore=MetastoreSettings(uri="thrift://h:9083"),
        layout=LayoutSettings(warehouse_root="/wh", state_dir=str(tmp_path),
                              checkpoint_dir=str(tmp_path / "checkpoint")),
    )


def _checkpoint(root: Path, topic: str) -> None:
    """A checkpoint whose committed batch 0 resumes from offset 7 of ``topic`` (Spark's layout)."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    offset = json.dumps({"topic": topic, "partition": 0, "offset": 7})
    (root / "offsets" / "0").write_text(f"v1\n{{}}\n{offset}")
    (root / "commits" / "0").write_text("v1\n{}\n")


def test_a_checkpoint_of_another_topic_is_one_line_before_spark(tmp_path: Path) -> None:
    _checkpoint(tmp_path / "checkpoint", "t.dev")
    with pytest.raises(ConfigError) as refused:
        check_checkpoint(_settings(tmp_path))
    assert str(refused.value) == (
        f"--topic t.prod: the checkpoint {tmp_path / 'checkpoint'} holds offsets of topic t.dev: it is "
        "another target's; give this target's own --state-dir (and --checkpoint-dir), or --topic t.dev")


def test_a_checkpoint_of_the_topic_or_none_passes(tmp_path: Path) -> None:
    check_checkpoint(_settings(tmp_path))
    _checkpoint(tmp_path / "checkpoint", "t.prod")
    check_checkpoint(_settings(tmp_path))


def _hold(state_dir: str, held: Event, done: Event) -> None:
    lock = JobLock(state_dir)
    assert lock.acquire()
    held.set()
    done.wait(30)
    lock.release()


def test_a_second_job_on_a_live_jobs_state_dir_is_refused_at_once(tmp_path: Path) -> None:
    refuse_live_job(tmp_path)  # no job ever ran here
    ctx = multiprocessing.get_context("fork")
    held, done = ctx.Event(), ctx.Event()
    other = ctx.Process(target=_hold, args=(str(tmp_path), held, done))
    other.start()
    try:
        assert held.wait(30)
        with pytest.raises(JobRunningError) as refused:
            refuse_live_job(tmp_path)
        assert str(refused.value) == (
            f"--state-dir {tmp_path}: a target job (pid {other.pid}) is running on it; two jobs must not "
            "share a state dir: stop that one first, or give this target's own --state-dir")
    finally:
        done.set()
        other.join(30)
    refuse_live_job(tmp_path)  # it stopped: the lock file it leaves is no refusal


def test_the_words_name_the_values_and_the_flags() -> None:
    assert other_source_message("nosuch", "topA", "srcA", 31) == (
        "--source-id nosuch: topic topA holds the records of source 'srcA' (its last record is event 31); "
        "give --source-id srcA, or the topic of source 'nosuch' (--topic; default streamer.nosuch.events)")
    assert beyond_head_message(500, 31, "topA") == (
        "--until-event 500 is beyond the source head (event 31, topic topA): the job applies up to 31 and "
        "waits for the source to reach 500")
    said = nothing_yet_message("streamer.nosuch.events", "nosuch", False,
                               ["streamer.prod.events", "streamer.dev.events", "__consumer_offsets"], 9)
    assert said == (
        "topic streamer.nosuch.events does not exist yet (source 'nosuch'; the broker has topics of "
        "source(s) dev, prod); --until-event 9 is beyond it: the job waits for records; check --source-id "
        "and --topic if no agent publishes there")
    assert "no streamer.<id>.events topic on the broker; its topics: topA, topB" in nothing_yet_message(
        "t", "s", True, ["topA", "topB", "t"], None)


def test_sources_are_read_from_default_topic_names_only() -> None:
    assert sources_of(["streamer.a.events", "streamer..events", "streamer.b.c.events", "x.a.events"]) == [
        "a", "b.c"]


def test_a_job_that_never_read_a_record_is_reminded_then_less_often() -> None:
    waiting = Waiting("t", "nosuch", None, started=0.0, first=60.0, every=300.0)
    assert waiting.note(59.0, False, 0) is None
    level, text = waiting.note(60.0, False, 0) or (0, "")
    assert level == logging.WARNING
    assert text == ("no record read from topic t in 60 s (source 'nosuch'): is an agent publishing there? "
                    "(check --source-id and --topic)")
    assert waiting.note(200.0, False, 0) is None
    assert waiting.note(360.0, False, 0) is not None


def test_a_bound_not_reached_is_reminded_and_a_quiet_restart_is_not() -> None:
    bounded = Waiting("t", "prod", 500, started=0.0, first=60.0, every=300.0)
    assert bounded.note(61.0, True, 31) == (
        logging.INFO, "waiting for the source to reach --until-event 500: consumed through event 31 (61 s "
        "since start)")
    assert bounded.note(400.0, True, 500) is None
    quiet = Waiting("t", "prod", None, started=0.0)
    assert quiet.note(1000.0, True, 31) is None  # it consumed before: a quiet source, not a wrong one


def _probe(state_dir: str, answer: Queue[str]) -> None:
    try:
        refuse_live_job(state_dir)
        answer.put("free")
    except JobRunningError as exc:
        answer.put(str(exc))


def test_a_claimed_state_dir_is_bound_and_locked_while_held(tmp_path: Path) -> None:
    """What `target run` and the demo's job hold while they apply: a second job is refused."""
    ctx = multiprocessing.get_context("fork")
    answer: Queue[str] = ctx.Queue()
    with claim(_settings(tmp_path), MemoryCatalog()):
        binding = read_binding(tmp_path)
        assert binding is not None and (binding.source_id, binding.topic) == ("prod", "t.prod")
        child = ctx.Process(target=_probe, args=(str(tmp_path), answer))
        child.start()
        child.join(30)
        assert "a target job (pid " in answer.get(timeout=5)
    child = ctx.Process(target=_probe, args=(str(tmp_path), answer))
    child.start()
    child.join(30)
    assert answer.get(timeout=5) == "free"
