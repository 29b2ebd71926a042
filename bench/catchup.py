"""Catch-up, then the live lag at a known share of it, on a Derby and a PostgreSQL target metastore.

Warm-up: the seeded warehouse workload's first events are applied with the target following (its
first events are mostly DDL on an empty warehouse, and the metastore's JVM is cold): not measured.
Catch-up: the target job's query is stopped, the source writes N events (the agent keeps
publishing), the query is restarted from its checkpoint; ``catchup_eps`` is N / (last apply -
restart). While it catches up, the resident memory of this process (the driver's Python side) and of
Spark's JVM is sampled: ``rss_growth_ratio`` is the peak over the whole catch-up / the peak while it
applied the first quarter of the backlog. A driver that held the backlog would grow through the
catch-up; one that holds a micro-batch (``--max-events-per-trigger``) stays flat.

``metastore_bound_eps`` is the backlog over the seconds the catch-up waited for metastore answers:
the rate a target that makes its calls one at a time would reach if everything else (Kafka, Spark,
files, planning) took no time. ``efficiency`` = ``catchup_eps`` / ``metastore_bound_eps``: the share
of the catch-up's time spent waiting for the metastore (1.0: the rest costs nothing).

Live: the same workload goes on, paced at ``--live-fraction`` (default 0.5) of the ``catchup_eps`` this
run measured, with the target following; ``lag`` is, per event, apply done - source commit
(p50/p99/max). An unpaced source would saturate the target and measure its queue, not its lag.

``--metastore both`` (the default) runs each target metastore database in its own process, one after
the other: Derby in the work dir, and PostgreSQL (``--pg-dsn``; a database with a unique name is
created there and dropped afterwards), as ``streamer hms run --jdbc-url`` serves one.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import contextlib
import json
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click
from common import (
    METASTORES,
    PG_DSN,
    Pipeline,
    emit,
    exit_on_sigterm,
    lag_stats,
    metastore_database,
    peak_rss_bytes,
    percentile,
    quiet_logs,
    ratio,
    reset_peak_rss,
    rss_bytes,
    say,
)


class PySpy:
    """``py-spy record`` attached to this process (and its subprocesses: Spark's JVM, the Python data
    source's process that reads Kafka, Python workers) from ``__enter__`` to ``__exit__``: the raw
    (collapsed) stacks of every thread, waiting ones included, in ``out``."""

    def __init__(self, out: Path, rate: int = 50) -> None:
        self.out = out
        self.rate = rate
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PySpy:
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        cmd = [exe, "record", "--pid", str(os.getpid()), "--idle", "--threads", "--subprocesses",
               "--nonblocking", "--rate", str(self.rate), "--format", "raw", "-o", str(self.out)]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # attached before the measured window starts
        if self._proc.poll() is not None:
            err = self._proc.stderr.read().decode() if self._proc.stderr else ""
            raise click.ClickException(f"py-spy did not start: {err.strip()}")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        self._proc.wait(60)


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


def _write_paced(p: Pipeline, workload: Any, n: int, rate: float) -> tuple[int, int, float]:
    """Write at least ``n`` events at ``rate`` events/s, one operation at a time, each due when the
    events before it are; returns (first id, last id, seconds)."""
    start = p.warehouse.current_event_id()
    t0 = time.perf_counter()
    while (written := p.warehouse.current_event_id() - start) < n:
        delay = t0 + written / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        p.commit(workload.run, 1)
    return start + 1, p.warehouse.current_event_id(), time.perf_counter() - t0


def _mix(p: Pipeline, first: int, last: int) -> dict[str, int]:
    """Event types of the source's events ``first..last``, most frequent first."""
    rows = p.warehouse.notifications(first - 1, last - first + 1)
    return dict(Counter(str(r.event_type) for r in rows).most_common())


def _typed(p: Pipeline, rows: list[dict[str, Any]], first: int, last: int) -> list[dict[str, Any]]:
    """``rows`` (each with an ``event_id``) with the source event's type."""
    types = {r.event_id: str(r.event_type) for r in p.warehouse.notifications(first - 1, last - first + 1)}
    return [{**r, "event_type": types.get(r["event_id"], "?")} for r in rows]


def _wait_published(p: Pipeline, last: int) -> None:
    while p.agent.last_id < last:  # the backlog is in Kafka before the target restarts
        if p.agent_errors:
            raise RuntimeError(f"source agent failed: {p.agent_errors[0]}")
        time.sleep(0.05)


def _batch_read_seconds() -> float:
    """Seconds this process has spent getting micro-batches' records, both ways (--batch-read)."""
    from streamer.metrics import TARGET_REGISTRY

    name = "streamer_target_batch_read_seconds_sum"
    return sum(TARGET_REGISTRY.get_sample_value(name, {"via": via}) or 0.0 for via in ("kafka", "spark"))


def run_catchup(
    work: Path,
    *,
    events: int,
    warmup_events: int,
    live_events: int,
    timeout: float,
    per_trigger: int,
    coalesce: bool = True,
    live_fraction: float = 0.5,
    jdbc_url: str | None = None,
    jdbc_user: str | None = None,
    py_spy: Path | None = None,
    py_spy_live: Path | None = None,
    copier: str = "job",
    batch_read: str = "driver",
    batch_follow: float = 2.0,
    lanes: int = 4,
) -> dict[str, Any]:
    from streamer.metastore.thrift import CALLS
    from streamer.warehouse.workload import Workload

    with Pipeline(work, jdbc_url=jdbc_url, jdbc_user=jdbc_user) as p:
        p.start_target(max_events_per_trigger=per_trigger, coalesce_backlog=coalesce, copier=copier,
                       batch_read=batch_read, batch_follow_seconds=batch_follow, apply_lanes=lanes)
        workload = Workload(p.warehouse, seed=11)
        say(f"warm-up: {warmup_events} events with the target following")
        _, last, _ = _write(p, workload, warmup_events)
        if not p.wait_applied(last, timeout):
            raise click.ClickException(f"the target did not apply the warm-up in {timeout:.0f} s")

        say(f"target stopped; the source writes {events} events")
        p.stop_target()
        first, last, source_s = _write(p, workload, events)
        _wait_published(p, last)
        backlog = last - first + 1
        jvm = p.spark.sparkContext._gateway.proc.pid
        reset_peak_rss()
        reset_peak_rss(jvm)
        say(f"target restarted: catching up on {backlog} events")
        with (
            PySpy(py_spy) if py_spy is not None else contextlib.nullcontext(),
            RssSampler({"driver": "self", "jvm": jvm}) as rss,
        ):
            CALLS.reset()
            read_before = _batch_read_seconds()
            t_restart = time.time()
            p.start_target(max_events_per_trigger=per_trigger, coalesce_backlog=coalesce, copier=copier,
                       batch_read=batch_read, batch_follow_seconds=batch_follow, apply_lanes=lanes)
            caught_up = p.wait_applied(last, timeout)
        catchup_read_s = _batch_read_seconds() - read_before
        catchup_seconds = CALLS.seconds  # waiting for answers (summed over lanes, if any)
        catchup_busy = CALLS.busy_seconds  # with at least one call in flight (lanes at once count once)
        catchup_calls = CALLS.reset()  # every metastore call of this process: the job's, lanes', watermark's
        t_done = p.stages.applied.get(last, time.time())
        applied = sorted(t for i, t in p.stages.applied.items() if first <= i <= last)
        quarter = applied[len(applied) // 4] if applied else t_done
        starts = [p.stages.batch_start.get(i, t_done) for i in range(first, last + 1)]
        first_batch = min(starts, default=t_done)
        catchup_eps = backlog / (t_done - t_restart)
        bound_eps = backlog / max(1e-9, catchup_seconds)
        batches = p.applier.batches if p.applier is not None else 0

        live_rate = live_fraction * catchup_eps
        say(f"live: {live_events} events at {live_rate:.1f}/s ({live_fraction:.0%} of the catch-up rate)")
        CALLS.reset()
        read_before = _batch_read_seconds()
        with PySpy(py_spy_live) if py_spy_live is not None else contextlib.nullcontext():
            live_first, live_last, live_source_s = _write_paced(p, workload, live_events, live_rate)
            live_caught_up = p.wait_applied(live_last, timeout)
        live_read_s = _batch_read_seconds() - read_before
        live_seconds = CALLS.seconds
        live_calls = CALLS.reset()
        live_n = live_last - live_first + 1
        live_ids = range(live_first, live_last + 1)
        live_done = p.stages.applied.get(live_last, time.time())
        halts = p.applier.state.halts() if p.applier is not None else {}
        return {
            "events": backlog,
            "catchup_eps": catchup_eps,
            "metastore_bound_eps": bound_eps,
            "efficiency": catchup_eps / bound_eps,
            "lag_p50_s": percentile(p.stages.lags(live_ids), 0.5),
            "lag_p99_s": percentile(p.stages.lags(live_ids), 0.99),
            "live_fraction": live_fraction,
            "live_rate_eps": live_n / live_source_s,  # offered: what the paced source wrote
            "live_applied_eps": live_n / max(1e-9, live_done - p.stages.committed.get(live_first, live_done)),
            "live_events": live_n,
            "live_caught_up": live_caught_up,
            "lag": lag_stats(p.stages.lags(live_ids)),
            "lag_split": p.stages.split(live_ids),
            # the slowest live events, with their type: what the p99 is made of
            "lag_tail": _typed(p, p.stages.tail(live_ids), live_first, live_last),
            "metastore_calls_per_event": catchup_calls / backlog,
            "metastore_calls_per_event_live": live_calls / live_n,
            "metastore_seconds_per_event": catchup_seconds / backlog,
            "metastore_seconds_per_event_live": live_seconds / live_n,
            "metastore_share": catchup_seconds / (t_done - t_restart),
            # the share of the catch-up during which the metastore had a call to answer: 1.0 is a
            # target whose own work all ran while it waited for the metastore
            "metastore_busy_share": catchup_busy / (t_done - t_restart),
            # getting the micro-batches' records (streamer_target_batch_read_seconds: Kafka or collect)
            "batch_read_share": catchup_read_s / (t_done - t_restart),
            "batch_read_seconds_live_per_event": live_read_s / live_n,
            "peak_rss_bytes": rss.peak("driver"),
            "rss_growth_ratio": ratio(rss.peak("driver"), rss.peak("driver", until=quarter)),
            "jvm_peak_rss_bytes": rss.peak("jvm"),
            "jvm_rss_growth_ratio": ratio(rss.peak("jvm"), rss.peak("jvm", until=quarter)),
            "driver_vmhwm_bytes": peak_rss_bytes(),
            "caught_up": caught_up,
            "catchup_eps_after_restart": backlog / max(1e-9, t_done - first_batch),
            "restart_s": first_batch - t_restart,
            # the catch-up's rate from its first micro-batch on, against the same bound
            "efficiency_after_restart": backlog / max(1e-9, t_done - first_batch) / bound_eps,
            # INSERT files the steps took from the copier's staging directory (PooledFileCopier.prestage)
            "prestaged_files": getattr(p.applier.applier.copier if p.applier is not None else None,
                                       "prestaged_taken", None),
            # why a step copied a file itself: not queued (a first or coalesced step, ADD_PARTITION),
            # not started yet, refused or failed ahead (by exception type), not taken
            "prestage_counts": dict(getattr(p.applier.applier.copier if p.applier is not None else None,
                                            "prestage_counts", {})),
            "batches": batches,
            "max_events_per_trigger": per_trigger,
            "coalesce_backlog": coalesce,
            "apply_lanes": lanes,
            "copier": copier,
            "batch_read": batch_read,
            "batch_follow_seconds": batch_follow,
            "source_write_eps": backlog / source_s,
            "mix_catchup": _mix(p, first, last),
            "mix_live": _mix(p, live_first, live_last),
            "halted": {d: h.cause for d, h in halts.items()},
        }


def _in_subprocess(kind: str, args: list[str]) -> dict[str, Any]:
    """One variant's figures, from this script run with ``--metastore kind --json`` (a fresh process: a
    Spark session cannot move to another target metastore)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--json", "--metastore", kind, *args]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        return {"failed": f"exit status {done.returncode} (its log is above)"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result.pop("machine", None)
    return result


SUMMARY = ("catchup_eps", "metastore_bound_eps", "efficiency", "metastore_busy_share", "live_rate_eps",
           "lag_p50_s", "lag_p99_s")


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
@click.option("--live-events", default=500, show_default=True, help="Events of the paced live phase.")
@click.option(
    "--live-fraction",
    default=0.5,
    show_default=True,
    type=click.FloatRange(0.01, 1.0),
    help="The live phase's source rate, as a share of the catch-up rate measured in the same run.",
)
@click.option(
    "--metastore",
    type=click.Choice([*METASTORES, "both"]),
    default="both",
    show_default=True,
    help="The target metastore's database: Derby in the work dir, PostgreSQL (--pg-dsn), or each in turn.",
)
@click.option(
    "--pg-dsn",
    default=PG_DSN,
    show_default=True,
    help="libpq connection string of a PostgreSQL database to connect to; the bench creates (and drops) "
    "a database with a unique name on that server for the target metastore.",
)
@click.option("--timeout", default=1800.0, show_default=True, help="Seconds to wait for each phase.")
@click.option(
    "--coalesce-backlog/--no-coalesce-backlog",
    "coalesce",
    default=True,
    show_default=True,
    help="The target's --coalesce-backlog (a DR target's catch-up setting); off: markers per batch only.",
)
@click.option(
    "--copier",
    type=click.Choice(["job", "no-prestage", "per-copy"]),
    default="job",
    show_default=True,
    help="The target's file copier: the job's (one long-lived pool, prestaging a batch's later INSERT "
    "files), the job's without prestaging, or a thread pool per copy (the copier before issue 41), for "
    "A/B runs.",
)
@click.option(
    "--batch-read",
    type=click.Choice(["driver", "spark"]),
    default="driver",
    show_default=True,
    help="The target's --batch-read: the driver reads each micro-batch's records from Kafka, or Spark "
    "collects them (the job before issue 41's fourth stop), for A/B runs.",
)
@click.option(
    "--batch-follow",
    "batch_follow",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="The target's --batch-follow: seconds a micro-batch goes on applying the records that arrive "
    "after its own (0: off, the job before issue 41's fifth stop), for A/B runs.",
)
@click.option(
    "--apply-lanes",
    "lanes",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="The target's --apply-lanes: connections applying a regrouped batch's tables at once (1: one "
    "after another, the job before issue 41's sixth stop), for A/B runs.",
)
@click.option(
    "--py-spy",
    "py_spy",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Sample the catch-up (restart to last apply) with py-spy (the dev extra) into this file, as raw "
    "stacks of this process and its subprocesses; bench/profile_table.py makes the table (one metastore).",
)
@click.option(
    "--py-spy-live",
    "py_spy_live",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The same for the paced live phase (first write to last apply).",
)
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(
    as_json: bool,
    events: int,
    per_trigger: int,
    warmup_events: int,
    live_events: int,
    live_fraction: float,
    metastore: str,
    pg_dsn: str,
    timeout: float,
    coalesce: bool,
    copier: str,
    batch_read: str,
    batch_follow: float,
    lanes: int,
    py_spy: Path | None,
    py_spy_live: Path | None,
    work_dir: Path | None,
) -> None:
    """Catch-up rate after a target outage against the metastore's bound, and the lag at a share of it."""
    quiet_logs()
    exit_on_sigterm()
    if metastore == "both":
        if py_spy is not None or py_spy_live is not None:
            raise click.UsageError("--py-spy and --py-spy-live profile one --metastore (derby or postgres)")
        args = [
            f"--events={events}",
            f"--max-events-per-trigger={per_trigger}",
            f"--warmup-events={warmup_events}",
            f"--live-events={live_events}",
            f"--live-fraction={live_fraction}",
            f"--pg-dsn={pg_dsn}",
            f"--timeout={timeout}",
            "--coalesce-backlog" if coalesce else "--no-coalesce-backlog",
            f"--copier={copier}",
            f"--batch-read={batch_read}",
            f"--batch-follow={batch_follow}",
            f"--apply-lanes={lanes}",
            *([f"--work-dir={work_dir}"] if work_dir is not None else []),
        ]
        variants = {kind: _in_subprocess(kind, args) for kind in METASTORES}
        summary = {f"{kind}.{key}": variants[kind].get(key) for kind in METASTORES for key in SUMMARY}
        emit("catch-up and paced lag, Derby and PostgreSQL target metastores", {"summary": summary,
             **variants}, as_json)
        if any("failed" in v for v in variants.values()):
            raise SystemExit(1)
        return
    with (
        metastore_database(metastore, pg_dsn) as (jdbc_url, jdbc_user),
        tempfile.TemporaryDirectory(prefix="bench-catchup-", dir=work_dir) as tmp,
    ):
        result = run_catchup(
            Path(tmp),
            events=events,
            warmup_events=warmup_events,
            live_events=live_events,
            timeout=timeout,
            per_trigger=per_trigger,
            coalesce=coalesce,
            live_fraction=live_fraction,
            jdbc_url=jdbc_url,
            jdbc_user=jdbc_user,
            py_spy=py_spy.resolve() if py_spy is not None else None,
            py_spy_live=py_spy_live.resolve() if py_spy_live is not None else None,
            copier=copier,
            batch_read=batch_read,
            batch_follow=batch_follow,
            lanes=lanes,
        )
    title = f"catch-up and paced lag ({metastore} target metastore)"
    emit(title, {"metastore": metastore, **result}, as_json)


if __name__ == "__main__":
    main()
