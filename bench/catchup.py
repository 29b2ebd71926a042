"""Catch-up: stop the target, let the source run N events, restart; catch-up rate vs live rate, memory.

Warm-up: the seeded warehouse workload's first events are applied with the target following (its
first events are mostly DDL on an empty warehouse, and the metastore's JVM is cold): not measured.
Live: the workload goes on at the source's full speed with the target following; the live rate is
events applied / (last apply - first commit). Catch-up: the target job's query is stopped, the source
writes N events (the agent keeps publishing), the query is restarted from its checkpoint; the
catch-up rate is N / (last apply - restart). While it catches up, the resident memory of this process
(the driver's Python side) and of Spark's JVM is sampled: ``rss_growth_ratio`` is the peak over the
whole catch-up / the peak while it applied the first quarter of the backlog. A driver that held the
backlog would grow through the catch-up; one that holds a micro-batch (``--max-events-per-trigger``)
stays flat.

``metastore_bound_eps`` is the backlog over the seconds the catch-up waited for metastore answers:
the rate a target that makes its calls one at a time would reach if everything else (Kafka, Spark,
files, planning) took no time. ``ratio_bound`` sets it against the live rate: no batching of
everything but the metastore calls can take the ratio past it (docs/scaling.md).
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click
from common import (
    Pipeline,
    emit,
    exit_on_sigterm,
    peak_rss_bytes,
    quiet_logs,
    ratio,
    reset_peak_rss,
    rss_bytes,
    say,
)


class RssSampler:
    """Samples the RSS of some processes every ``interval`` seconds, with the time of each sample."""

    def __init__(self, pids: dict[str, int | str], interval: float = 0.1) -> None:
        self.pids = pids
        self.interval = interval
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), {k: rss_bytes(pid) for k, pid in self.pids.items()}))
            self._stop.wait(self.interval)

    def peak(self, name: str, until: float | None = None) -> int:
        return max((s[name] for t, s in self.samples if until is None or t <= until), default=0)


def _write(p: Pipeline, workload: Any, n: int, chunk: int = 10) -> tuple[int, int, float]:
    """Write at least ``n`` events on the source; returns (first id, last id, seconds)."""
    start = p.warehouse.current_event_id()
    t0 = time.perf_counter()
    while p.warehouse.current_event_id() - start < n:
        p.commit(workload.run, min(chunk, n - (p.warehouse.current_event_id() - start)))
    return start + 1, p.warehouse.current_event_id(), time.perf_counter() - t0


def _mix(p: Pipeline, first: int, last: int) -> dict[str, int]:
    """Event types of the source's events ``first..last``, most frequent first."""
    rows = p.warehouse.notifications(first - 1, last - first + 1)
    return dict(Counter(str(r.event_type) for r in rows).most_common())


def _wait_published(p: Pipeline, last: int) -> None:
    while p.agent.last_id < last:  # the backlog is in Kafka before the target restarts
        if p.agent_errors:
            raise RuntimeError(f"source agent failed: {p.agent_errors[0]}")
        time.sleep(0.05)


def run_catchup(
    work: Path,
    *,
    events: int,
    warmup_events: int,
    live_events: int,
    timeout: float,
    per_trigger: int,
    coalesce: bool = True,
) -> dict[str, Any]:
    from streamer.metastore.thrift_calls import CALLS
    from streamer.warehouse.workload import Workload

    with Pipeline(work) as p:
        p.start_target(max_events_per_trigger=per_trigger, coalesce_backlog=coalesce)
        workload = Workload(p.warehouse, seed=11)
        say(f"warm-up: {warmup_events} events with the target following")
        _, last, _ = _write(p, workload, warmup_events)
        if not p.wait_applied(last, timeout):
            raise click.ClickException(f"the target did not apply the warm-up in {timeout:.0f} s")

        say(f"live: {live_events} events with the target following")
        t0 = time.time()
        CALLS.reset()
        live_first, live_last, live_source_s = _write(p, workload, live_events)
        if not p.wait_applied(live_last, timeout):
            raise click.ClickException(f"the target did not follow the live phase in {timeout:.0f} s")
        live_seconds = CALLS.seconds
        live_calls = CALLS.reset()
        live_eps = (live_last - live_first + 1) / (p.stages.applied.get(live_last, time.time()) - t0)

        say(f"target stopped; the source writes {events} events")
        p.stop_target()
        first, last, source_s = _write(p, workload, events)
        _wait_published(p, last)
        backlog = last - first + 1
        jvm = p.spark.sparkContext._gateway.proc.pid
        reset_peak_rss()
        reset_peak_rss(jvm)
        say(f"target restarted: catching up on {backlog} events")
        with RssSampler({"driver": "self", "jvm": jvm}) as rss:
            CALLS.reset()
            t_restart = time.time()
            p.start_target(max_events_per_trigger=per_trigger, coalesce_backlog=coalesce)
            caught_up = p.wait_applied(last, timeout)
        catchup_seconds = CALLS.seconds  # waiting for answers (summed over lanes, if any)
        catchup_calls = CALLS.reset()  # every metastore call of this process: the job's, lanes', watermark's
        t_done = p.stages.applied.get(last, time.time())
        applied = sorted(t for i, t in p.stages.applied.items() if first <= i <= last)
        quarter = applied[len(applied) // 4] if applied else t_done
        starts = [p.stages.batch_start.get(i, t_done) for i in range(first, last + 1)]
        first_batch = min(starts, default=t_done)
        catchup_eps = backlog / (t_done - t_restart)
        bound_eps = backlog / max(1e-9, catchup_seconds)
        halts = p.applier.state.halts() if p.applier is not None else {}
        return {
            "events": backlog,
            "catchup_eps": catchup_eps,
            "live_eps": live_eps,
            "ratio": ratio(catchup_eps, live_eps),
            "metastore_calls_per_event": catchup_calls / backlog,
            "metastore_calls_per_event_live": live_calls / (live_last - live_first + 1),
            "metastore_seconds_per_event": catchup_seconds / backlog,
            "metastore_seconds_per_event_live": live_seconds / (live_last - live_first + 1),
            "metastore_share": catchup_seconds / (t_done - t_restart),
            "metastore_bound_eps": bound_eps,
            "ratio_bound": ratio(bound_eps, live_eps),
            "peak_rss_bytes": rss.peak("driver"),
            "rss_growth_ratio": ratio(rss.peak("driver"), rss.peak("driver", until=quarter)),
            "jvm_peak_rss_bytes": rss.peak("jvm"),
            "jvm_rss_growth_ratio": ratio(rss.peak("jvm"), rss.peak("jvm", until=quarter)),
            "driver_vmhwm_bytes": peak_rss_bytes(),
            "caught_up": caught_up,
            "catchup_eps_after_restart": backlog / max(1e-9, t_done - first_batch),
            "restart_s": first_batch - t_restart,
            "batches": p.applier.batches if p.applier is not None else 0,
            "max_events_per_trigger": per_trigger,
            "coalesce_backlog": coalesce,
            "source_write_eps": backlog / source_s,
            "live_source_write_eps": (live_last - live_first + 1) / live_source_s,
            "mix_live": _mix(p, live_first, live_last),
            "mix_catchup": _mix(p, first, last),
            "halted": {d: h.cause for d, h in halts.items()},
        }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option(
    "-n",
    "--events",
    default=5000,
    show_default=True,
    help="Backlog to catch up (the issue's 20,000 takes ~10 min here: see bench/README.md).",
)
@click.option(
    "--max-events-per-trigger",
    "per_trigger",
    default=500,
    show_default=True,
    help="The target's micro-batch cap: a backlog of N spans N / cap batches, so memory sampled "
    "through the catch-up shows whether the driver holds the backlog or one batch (the job's default "
    "is 5,000).",
)
@click.option("--warmup-events", default=300, show_default=True, help="Events applied first, not measured.")
@click.option("--live-events", default=500, show_default=True, help="Events of the live phase.")
@click.option("--timeout", default=1800.0, show_default=True, help="Seconds to wait for each phase.")
@click.option(
    "--coalesce-backlog/--no-coalesce-backlog",
    "coalesce",
    default=True,
    show_default=True,
    help="The target's --coalesce-backlog (a DR target's catch-up setting); off: markers per batch only.",
)
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(
    as_json: bool,
    events: int,
    per_trigger: int,
    warmup_events: int,
    live_events: int,
    timeout: float,
    coalesce: bool,
    work_dir: Path | None,
) -> None:
    """Catch-up rate after a target outage vs the live rate; driver memory through the catch-up."""
    quiet_logs()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-catchup-", dir=work_dir) as tmp:
        result = run_catchup(
            Path(tmp),
            events=events,
            warmup_events=warmup_events,
            live_events=live_events,
            timeout=timeout,
            per_trigger=per_trigger,
            coalesce=coalesce,
        )
    emit("catch-up after a target outage", result, as_json)


if __name__ == "__main__":
    main()
