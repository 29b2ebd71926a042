"""A bounded job that reaches --until-event inside a micro-batch, and a running job that is failed
over, stop with one line and exit 0: no ERROR line, no traceback (issue 28.5)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from streamer.kafka.broker import EmbeddedBroker
from streamer.target.dr.failover import FailoverRecord, write_record
from tests.integration.target.helpers import Source, TargetProcess, TargetStack, mixed_workload

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]


def _quiet(log: str) -> None:
    assert "Traceback" not in log, log[-6000:]
    assert " ERROR " not in log and "ERROR " not in log.splitlines()[-1], log[-6000:]
    assert "at org.apache" not in log, log[-6000:]


def test_until_event_and_failover_stop_without_a_traceback(
    broker: EmbeddedBroker, source: Source, target_stack: TargetStack, target_jobs: list[TargetProcess],
    prefix: str,
) -> None:
    last = mixed_workload(source.publishing(), prefix, 40, seed=5)
    until = last - 10  # one micro-batch holds every event: it straddles the bound
    bounded = TargetProcess(target_stack, broker.bootstrap_servers, source, name="bounded",
                            extra=["--until-event", str(until)]).start()
    target_jobs.append(bounded)
    assert bounded.proc is not None and bounded.proc.wait(300) == 0, bounded.tail(6000)
    log = bounded.log_path.read_text(errors="replace")
    assert f"stopped at --until-event {until}; event {until + 1} and later are held" in log
    _quiet(log)

    job = TargetProcess(target_stack, broker.bootstrap_servers, source, name="job").start()
    target_jobs.append(job)
    job.wait_for(lambda: target_stack.applied_ids(source.last_ids()) == source.last_ids(), "catch-up")
    write_record(target_stack.state_dir, FailoverRecord("pending", datetime.now(UTC).isoformat()))
    mixed_workload(source.publishing(), prefix + "b", 5, seed=6)  # a batch the fenced job refuses
    assert job.proc is not None and job.proc.wait(120) == 0, job.tail(6000)
    log = job.log_path.read_text(errors="replace")
    assert "failed over: this target no longer applies events" in log
    _quiet(log)
