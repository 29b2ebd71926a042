"""A state dir belongs to one target, and a wrong setting is one line before Spark starts (issue 40
items 5 and 6): the real CLI against the embedded broker and metastore.

One bounded job binds its state dir; then another source's job, a second job on the live dir, an
unknown --source-id, a wrong metastore, an empty state dir and a misnamed database are each refused
in one line within seconds (nothing applied, no state dir made), and a topic with no record yet or a
bound beyond the source head is a warning at start instead of silence.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamer.embedded_metastore.server import free_port
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.topics import ensure_topic
from streamer.target.state.binding import read_binding
from tests.integration.target.helpers import (
    STREAMER,
    Source,
    Stream,
    TargetProcess,
    TargetStack,
    mixed_workload,
    target_argv,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@dataclass(frozen=True)
class Named:
    """A source id and topic a job is told (not necessarily an agent's)."""

    source_id: str
    topic: str


def _run(stack: TargetStack, bootstrap: str, stream: Stream, extra: Sequence[str] = (),
         hms_uri: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``streamer target run`` as an operator types it; returns once it exits."""
    argv = target_argv(stack, bootstrap, stream, metrics_port=free_port(), extra=extra)
    if hms_uri is not None:
        argv[argv.index("--hms-uri") + 1] = hms_uri
    return subprocess.run([STREAMER, *argv], capture_output=True, text=True, timeout=timeout)


def _one_error_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and " at org.apache" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


def _warned(job: TargetProcess, text: str, timeout: float = 60) -> str:
    """The job's warning containing ``text``, logged before Spark starts; the job is stopped."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for line in job.tail(20000).splitlines():
                if " WARNING " in line and text in line:
                    return line
            assert job.alive, job.tail()
            time.sleep(0.2)
        raise AssertionError(f"no warning {text!r}: {job.tail()}")
    finally:
        job.stop()


def test_a_state_dir_is_bound_to_its_target_and_wrong_settings_are_one_line(
    broker: EmbeddedBroker, spark: SparkSession, source: Source, target_stack: TargetStack,
    target_jobs: list[TargetJob], prefix: str, tmp_path: Path,
) -> None:
    bootstrap = broker.bootstrap_servers
    last = mixed_workload(source.publishing(), prefix, 20, seed=3)
    job = TargetInProcess(target_stack, bootstrap, source, spark=spark, name="bounded",
                          extra=["--until-event", str(last)]).start()
    target_jobs.append(job)
    assert job.wait(300) == 0, job.tail()
    binding = read_binding(target_stack.state_dir)
    assert binding is not None
    assert (binding.source_id, binding.topic, binding.hms_uri) == (source.source_id, source.topic,
                                                                    target_stack.hms.uri)

    # another target's job on this state dir: refused before anything is read or applied
    other = Named(f"other-{prefix.rstrip('_')}", f"{source.topic}-other")
    ensure_topic(broker.client_settings(), other.topic)
    started = time.monotonic()
    line = _one_error_line(_run(target_stack, bootstrap, other, ["--until-event", "10"]), 2)
    assert line == (f"error: --source-id {other.source_id}: --state-dir {target_stack.state_dir} belongs to "
                    f"another target (source {source.source_id!r}, topic {source.topic}, metastore "
                    f"{target_stack.hms.uri}); give this target's own --state-dir, or --source-id "
                    f"{source.source_id}")
    assert time.monotonic() - started < 20

    # a source id the topic's records do not carry: one line naming the one they do
    fresh = TargetStack(target_stack.hms, tmp_path / "fresh")
    line = _one_error_line(_run(fresh, bootstrap, Named("nosuch", source.topic)), 2)
    assert line.startswith(f"error: --source-id nosuch: topic {source.topic} holds the records of source "
                           f"{source.source_id!r} (its last record is event {last})")

    # a wrong metastore: one line within seconds, no state dir (nor job.lock) left behind
    started = time.monotonic()
    line = _one_error_line(_run(fresh, bootstrap, source, hms_uri=f"thrift://127.0.0.1:{free_port()}"), 1)
    assert line.startswith("error: --hms-uri thrift://127.0.0.1:") and "cannot connect" in line
    assert time.monotonic() - started < 20 and not fresh.state_dir.exists()

    # an empty state dir is no target's; a misnamed database is not "not halted"
    fresh.state_dir.mkdir(parents=True)
    status = ["status", "--hms-uri", target_stack.hms.uri]
    done = target_stack.cli(*status, "--state-dir", str(fresh.state_dir), ok=(2,))
    assert done.stderr.strip().endswith("holds no target state (no `streamer target run` has used it); "
                                        "give the --state-dir of the target job")
    done = target_stack.cli(*status, "--state-dir", str(target_stack.state_dir), "--source-id",
                            other.source_id, ok=(2,))
    assert f"--source-id {other.source_id}: --state-dir {target_stack.state_dir} belongs to" in done.stderr
    done = target_stack.cli("target", "retry", "--state-dir", str(target_stack.state_dir), "--db", "nosuchdb",
                            ok=(1,))
    assert done.stderr.startswith("Error: no database 'nosuchdb' in this target's state"), done.stderr

    # no record yet (an unknown source id, its default topic), a bound beyond the head: said at start
    unknown = TargetProcess(fresh, bootstrap, Named("nosuch", "streamer.nosuch.events"), name="unknown")
    unknown.argv = [a for a in unknown.argv if a not in ("--topic", "streamer.nosuch.events")]
    said = _warned(unknown.start(), "streamer.nosuch.events does not exist yet")
    assert "(source 'nosuch';" in said and "check --source-id and --topic" in said
    ahead = TargetProcess(target_stack, bootstrap, source, name="ahead", extra=["--until-event", "100000"])
    said = _warned(ahead.start(), "--until-event 100000 is beyond the source head")
    assert f"(event {last}, topic {source.topic})" in said


def test_a_second_job_on_a_live_jobs_state_dir_is_refused_at_once(
    broker: EmbeddedBroker, spark: SparkSession, source: Source, target_stack: TargetStack,
    target_jobs: list[TargetJob], prefix: str,
) -> None:
    mixed_workload(source.publishing(), prefix, 10, seed=4)
    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    job.wait_for(lambda: (target_stack.state_dir / "target.json").exists(), "the state dir bound")
    started = time.monotonic()
    line = _one_error_line(_run(target_stack, broker.bootstrap_servers, source), 1)
    assert line.startswith(f"error: --state-dir {target_stack.state_dir}: a target job (pid ")
    assert line.endswith("is running on it; two jobs must not share a state dir: stop that one first, or "
                         "give this target's own --state-dir")
    assert time.monotonic() - started < 20
    assert json.loads((target_stack.state_dir / "target.json").read_text())["source_id"] == source.source_id
