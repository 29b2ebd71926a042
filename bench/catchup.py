"""Catch-up: stop the target, let the source run N events, restart; catch-up rate vs live rate, memory.

Live: the seeded warehouse workload runs with the target job following; the live rate is events
applied / (last apply - first commit). Catch-up: the target job's query is stopped, the source writes
N events (the agent keeps publishing), the query is restarted from its checkpoint; the catch-up rate
is N / (last apply - restart). Done at N/4 and at N, resetting the peak RSS (VmHWM) of this process
(the driver's Python side) and of Spark's JVM before each restart: their ratio shows whether the
driver's memory grows with the backlog.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import tempfile
import time
from pathlib import Path
from typing import Any

import click
from common import Pipeline, emit, exit_on_sigterm, peak_rss_bytes, quiet_logs, ratio, reset_peak_rss, say


def _write(p: Pipeline, workload: Any, n: int, chunk: int = 10) -> tuple[int, float]:
    """Write at least ``n`` events on the source; returns (last event id, seconds)."""
    start = p.warehouse.current_event_id()
    t0 = time.perf_counter()
    while p.warehouse.current_event_id() - start < n:
        p.commit(workload.run, min(chunk, n - (p.warehouse.current_event_id() - start)))
    return p.warehouse.current_event_id(), time.perf_counter() - t0


def _catch_up(p: Pipeline, workload: Any, n: int, timeout: float) -> dict[str, Any]:
    p.stop_target()
    first = p.warehouse.current_event_id() + 1
    last, _ = _write(p, workload, n)
    while p.agent.last_id < last:  # the backlog is in Kafka before the target restarts
        time.sleep(0.05)
    jvm = p.spark.sparkContext._gateway.proc.pid
    reset_peak_rss()
    reset_peak_rss(jvm)
    t0 = time.time()
    p.start_target()
    done = p.wait_applied(last, timeout)
    t1 = p.stages.applied.get(last, time.time())
    events = last - first + 1
    first_batch = min(p.stages.batch_start.get(i, t1) for i in range(first, last + 1))
    return {
        "events": events,
        "caught_up": done,
        "catchup_eps": events / (t1 - t0),
        "catchup_eps_after_restart": events / max(1e-9, t1 - first_batch),
        "restart_s": first_batch - t0,
        "peak_rss_bytes": peak_rss_bytes(),
        "jvm_peak_rss_bytes": peak_rss_bytes(jvm),
    }


def run_catchup(work: Path, *, events: int, live_events: int, timeout: float) -> dict[str, Any]:
    from streamer.warehouse.workload import Workload

    with Pipeline(work) as p:
        p.start_target()
        workload = Workload(p.warehouse, seed=11)
        say(f"live: {live_events} events with the target following")
        first = p.warehouse.current_event_id() + 1
        t0 = time.time()
        last, source_s = _write(p, workload, live_events)
        p.wait_applied(last, timeout)
        live_eps = (last - first + 1) / (p.stages.applied.get(last, time.time()) - t0)
        small = max(1, events // 4)
        say(f"catch-up of {small} events")
        a = _catch_up(p, workload, small, timeout)
        say(f"catch-up of {events} events")
        b = _catch_up(p, workload, events, timeout)
        halts = p.applier.state.halts() if p.applier is not None else {}
    return {
        "events": b["events"],
        "catchup_eps": b["catchup_eps"],
        "live_eps": live_eps,
        "ratio": ratio(b["catchup_eps"], live_eps),
        "peak_rss_bytes": b["peak_rss_bytes"],
        "rss_growth_ratio": ratio(b["peak_rss_bytes"], a["peak_rss_bytes"]),
        "jvm_rss_growth_ratio": ratio(b["jvm_peak_rss_bytes"], a["jvm_peak_rss_bytes"]),
        "source_write_eps": live_events / source_s,
        "at_n": b,
        "at_n_over_4": a,
        "halted": {d: h.cause for d, h in halts.items()},
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option(
    "-n",
    "--events",
    default=300,
    show_default=True,
    help="Backlog to catch up (the issue's 20,000 would take over an hour at this HMS's rate; see README).",
)
@click.option("--live-events", default=80, show_default=True, help="Events of the live phase.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for each phase.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(as_json: bool, events: int, live_events: int, timeout: float, work_dir: Path | None) -> None:
    """Catch-up rate after a target outage vs the live rate; driver peak memory at N/4 and N."""
    quiet_logs()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-catchup-", dir=work_dir) as tmp:
        result = run_catchup(Path(tmp), events=events, live_events=live_events, timeout=timeout)
    emit("catch-up after a target outage", result, as_json)


if __name__ == "__main__":
    main()
