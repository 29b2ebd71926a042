"""Replication lag: source commit -> visible on the target metastore, under background load.

A canary writer bumps a table property every ``--canary-interval`` seconds on the bundled source
warehouse while a background load creates tables at ``--rate`` events/s. The default rate keeps the
target metastore half busy: its create_table and alter_table capacities are measured with raw
Thrift calls, and the load gets what the canary's alter_table calls leave of ``--utilization``. A
poller reads the canary table on the target HMS every ``--poll-interval`` seconds; lag = first time
a value (or a newer one) is seen - its source commit time. The poller is a reader of the metastore
like any other: at 2 ms it made ~130 ``get_table`` calls/s, ~40% of the metastore's work under
the default load; polling less often can only make a measured lag larger, by up to one interval.
Per event, the split is: source read (commit -> the agent's ``ts_ms``), publish + Kafka + Spark
trigger (``ts_ms`` -> micro-batch start), apply (batch start -> apply done). A second phase inserts
small files and polls the target directory for the file to appear.

The measured window follows ``--warmup`` seconds of the same mix: a fresh metastore JVM applies
each event ~3x slower for its first 15-40 s while it compiles its hot paths, and a production
metastore is warm; the warm-up's own lags are printed as ``warmup``. Capacity is measured twice,
at the start (cold: the basis of the default load, as when issue 17 set its goal) and after the
warm-up (warm: 3-5x higher here). ``--load-basis warm`` offers half of the warm capacity instead:
on one 2-core machine that shares its cores with Spark, the broker and the agent, that is more
than the whole pipeline carries (bench/README.md).

``--metastore postgres`` keeps the target metastore on PostgreSQL (``--pg-dsn``: a database with a
unique name is created on that server and dropped afterwards) instead of Derby in the work dir.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import tempfile
import threading
import time
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
    median,
    metastore_database,
    metric_sum,
    percentile,
    quiet_logs,
    raw_alter_rate,
    raw_create_rate,
    say,
)


class CanaryPoller:
    """Reads the canary property (and the insert table's files) on the target as fast as it can."""

    def __init__(self, hms_uri: str, interval: float) -> None:
        from streamer.metastore.thrift import HmsCatalog

        self.catalog = HmsCatalog(hms_uri)
        self.interval = interval
        self.seen: dict[int, float] = {}  # canary seq -> first time seen
        self.files_seen: dict[int, float] = {}  # visible file count -> first time seen
        self.files_dir: str | None = None
        self.polls = 0
        self.paused = threading.Event()  # set: no polls (while the metastore's capacity is measured)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.catalog.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.paused.is_set():
                time.sleep(0.01)
                continue
            table = self.catalog.get_table("canary", "c")
            seq = int(table.parameters.get("canary.seq", "-1")) if table is not None else -1
            if seq >= 0 and seq not in self.seen:
                self.seen[seq] = time.time()
            if self.files_dir is not None:
                try:
                    n = sum(1 for name in os.listdir(self.files_dir) if not name.startswith((".", "_")))
                except FileNotFoundError:
                    n = 0
                if n not in self.files_seen:
                    self.files_seen[n] = time.time()
            self.polls += 1
            time.sleep(self.interval)


def spark_trigger_split(progress: list[dict[str, Any]]) -> dict[str, float]:
    """Median milliseconds of each phase of Spark's micro-batches that carried records (its
    ``durationMs``: latestOffset, walCommit, addBatch = read + foreachBatch, commitOffsets, ...)."""
    phases: dict[str, list[float]] = {}
    for entry in progress:
        if entry.get("numInputRows", 0) > 0:
            for phase, ms in entry.get("durationMs", {}).items():
                phases.setdefault(phase, []).append(float(ms))
    return {phase: median(values) for phase, values in sorted(phases.items())}


def visible_lags(committed: dict[int, float], seen: dict[int, float]) -> list[float]:
    """Lag of each committed key: the first time it, or a newer one, was seen - its commit time."""
    out = []
    for key, t in committed.items():
        times = [s for k, s in seen.items() if k >= key]
        if times:
            out.append(min(times) - t)
    return out


def lag_windows(
    committed: dict[int, float], seen: dict[int, float], start: float, width: float
) -> list[dict[str, float | int | None]]:
    """Canary lags per ``width`` seconds of commit time from ``start``: where in a run the tail lies
    (a JVM still compiling shows as slow first windows; a steady one as even windows)."""
    groups: dict[int, dict[int, float]] = {}
    for key, t in committed.items():
        groups.setdefault(int((t - start) // width), {})[key] = t
    out: list[dict[str, float | int | None]] = []
    for index in sorted(groups):
        lags = visible_lags(groups[index], seen)
        out.append({"from_s": index * width, "p50_s": percentile(lags, 0.5), "max_s": max(lags, default=None),
                    "samples": len(lags)})
    return out


def load_rate_for(
    rate: float | None, capacity: float, alter_capacity: float, canary_interval: float, utilization: float
) -> float:
    """``rate``, or the create_table/s that with the canary's alter_table calls use ``utilization``
    of the metastore's capacity."""
    if rate is not None:
        return rate
    canary_share = (1 / canary_interval) / alter_capacity
    return max(0.0, capacity * (utilization - canary_share))


class Mix:
    """The canary bumps and the background load, committed on the source at their rates."""

    def __init__(self, p: Pipeline, canary_interval: float) -> None:
        self.p = p
        self.canary_interval = canary_interval
        self.seq = 0  # canary values keep counting across runs: the poller keys on them
        self.n_load = 0
        self.canary_commits: dict[int, float] = {}
        self.canary_ids: list[int] = []

    def run(self, duration: float, load_rate: float) -> tuple[int, int]:
        """Commit the mix for ``duration`` seconds; returns (canary bumps, load events) of this run."""
        from streamer.warehouse.workload import COLUMNS

        p, wh = self.p, self.p.warehouse
        seq0, load0 = self.seq, self.n_load
        started = time.time()
        next_canary = next_load = started
        while time.time() - started < duration:
            now = time.time()
            if now >= next_canary:
                self.seq += 1
                _, ids = p.commit(wh.alter_table_properties, "canary", "c", {"canary.seq": str(self.seq)})
                self.canary_commits[self.seq] = p.stages.committed[ids[-1]]
                self.canary_ids += ids
                next_canary += self.canary_interval
            elif load_rate > 0 and now >= next_load:
                self.n_load += 1
                p.commit(wh.create_table, "load", f"t{self.n_load}", COLUMNS)
                next_load += 1 / load_rate
            else:
                time.sleep(max(0.0, min(next_canary, next_load if load_rate > 0 else next_canary) - now))
        return self.seq - seq0, self.n_load - load0


def run_lag(
    work: Path,
    *,
    duration: float,
    rate: float | None,
    canary_interval: float,
    insert_duration: float,
    insert_interval: float,
    capacity_calls: int,
    utilization: float,
    trigger_seconds: float = 0.1,
    kafka_reader: str = "driver",
    consistency: str = "global",
    warmup: float = 0.0,
    poll_interval: float = 0.01,
    load_basis: str = "cold",
    jdbc_url: str | None = None,
    jdbc_user: str | None = None,
) -> dict[str, Any]:
    from streamer.warehouse.workload import COLUMNS

    if load_basis == "warm" and warmup <= 0:
        raise click.ClickException("--load-basis warm needs a --warmup")
    with Pipeline(work, jdbc_url=jdbc_url, jdbc_user=jdbc_user) as p:
        p.start_target(trigger_seconds=trigger_seconds, kafka_reader=kafka_reader, consistency=consistency)
        wh = p.warehouse
        wh.create_database("canary")
        wh.create_table("canary", "c", COLUMNS, params={"canary.seq": "0"})
        wh.create_database("load")
        wh.create_database("ins")
        wh.create_table("ins", "small", COLUMNS)
        if not p.wait_applied(wh.current_event_id(), 120):
            raise click.ClickException("the target did not apply the set-up events in 120 s")
        poller = CanaryPoller(p.hms.uri, poll_interval)
        poller.start()

        def capacity(tag: str) -> tuple[float, float]:
            """Raw create_table and alter_table calls/s, with the poller paused."""
            say(f"measuring the target metastore's capacity ({capacity_calls} raw create_table, alter_table)")
            poller.paused.set()
            try:
                creates = raw_create_rate(p.catalog, p.warehouse, p.target_root, capacity_calls, tag)
                return creates, raw_alter_rate(p.catalog, f"raw_{tag}", "t0", capacity_calls)
            finally:
                poller.paused.clear()

        mix = Mix(p, canary_interval)
        cold = capacity("lag")
        warm: dict[str, Any] = {}
        basis = cold
        if warmup > 0:
            warm_rate = load_rate_for(rate, *cold, canary_interval, utilization)
            say(f"warm-up {warmup:.0f}s: canary every {canary_interval}s, load {warm_rate:.1f} tables/s")
            mix.run(warmup, warm_rate)
            if not p.wait_applied(wh.current_event_id(), 120):  # else the window would start on a backlog
                raise click.ClickException("the target did not catch up with the warm-up in 120 s")
            time.sleep(0.3)  # the poller's last sightings, as after the measured window
            warm = {**lag_stats(visible_lags(mix.canary_commits, poller.seen)), "seconds": warmup}
            mix.canary_commits.clear()
            mix.canary_ids.clear()
            warm["hms_create_table_capacity_eps"], warm["hms_alter_table_capacity_eps"] = capacity("warm")
            if load_basis == "warm":
                basis = (warm["hms_create_table_capacity_eps"], warm["hms_alter_table_capacity_eps"])
        load_rate = load_rate_for(rate, *basis, canary_interval, utilization)
        say(f"canary every {canary_interval}s + load {load_rate:.1f} create_table/s for {duration:.0f}s")
        started, polls_before = time.time(), poller.polls
        seq, n_load = mix.run(duration, load_rate)
        canary_commits, canary_ids = mix.canary_commits, mix.canary_ids
        elapsed = time.time() - started
        last_load_id = wh.current_event_id()
        caught_up = p.wait_applied(last_load_id, 120)
        time.sleep(0.3)
        canary_lags = visible_lags(canary_commits, poller.seen)
        windows = lag_windows(canary_commits, poller.seen, started, 10.0)
        polls_per_s = (poller.polls - polls_before) / (time.time() - started)

        say(f"small-file INSERT every {insert_interval}s for {insert_duration:.0f}s")
        target_small = p.catalog.get_table("ins", "small")
        poller.files_dir = target_small.sd.location.removeprefix("file:") if target_small else None
        insert_commits: dict[int, float] = {}
        insert_ids: list[int] = []
        started_ins = time.time()
        n_ins = 0
        while time.time() - started_ins < insert_duration:
            n_ins += 1
            _, ids = p.commit(
                wh.insert, "ins", "small", [{"id": n_ins, "name": "x", "amount": 1.0, "ok": True}]
            )
            insert_commits[n_ins] = p.stages.committed[ids[-1]]
            insert_ids += ids
            time.sleep(insert_interval)
        p.wait_applied(wh.current_event_id(), 120)
        time.sleep(0.3)
        trigger_ms = spark_trigger_split(p.query.recentProgress if p.query is not None else [])
        poller.stop()
        insert_lags = visible_lags(insert_commits, poller.files_seen)
        with p.stages.lock:
            measured = [i for i, t in p.stages.committed.items() if started <= t <= started + elapsed]
        event_lags = p.stages.lags(measured)  # the measured window's: not the warm-up's nor the INSERTs'
        publish_n = metric_sum("streamer_source_publish_seconds_count")
        publish_mean = metric_sum("streamer_source_publish_seconds_sum") / publish_n if publish_n else None
        result: dict[str, Any] = {
            **lag_stats(canary_lags),
            "kafka_reader": kafka_reader,
            "consistency": consistency,
            "trigger_seconds": trigger_seconds,
            "rate_eps": (seq + n_load) / elapsed,
            "load_rate_eps": n_load / elapsed,
            "canary_rate_eps": seq / elapsed,
            "load_basis": load_basis,
            "hms_create_table_capacity_eps": basis[0],
            "hms_alter_table_capacity_eps": basis[1],
            # share of the metastore's raw capacity the offered events need (1.0 = saturated)
            "offered_utilization": (n_load / elapsed) / basis[0] + (seq / elapsed) / basis[1],
            "caught_up": caught_up,
            "events_coalesced": metric_sum("streamer_target_events_coalesced_total"),
            "poll_interval_s": poll_interval,
            "poller_polls_per_s": polls_per_s,
            # capacities measured before the warm-up (cold) and after it; the load's share of the latter
            "hms_capacity_cold_eps": {"create_table": cold[0], "alter_table": cold[1]},
            "warmup": warm,
            "canary_windows": windows,  # per 10 s of the measured window
            "offered_utilization_warm": (
                (n_load / elapsed) / warm["hms_create_table_capacity_eps"]
                + (seq / elapsed) / warm["hms_alter_table_capacity_eps"]
                if warm
                else None
            ),
            "split_canary": {**p.stages.split(canary_ids), "agent_publish_txn_mean_s": publish_mean},
            "applied_lag_all_events": lag_stats(event_lags),
            "insert": {
                **lag_stats(insert_lags),
                "inserts": n_ins,
                "split": p.stages.split(insert_ids),
                "spark_trigger_ms": trigger_ms,
            },
        }
        return result


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--duration", default=60.0, show_default=True, help="Seconds of canary + load.")
@click.option(
    "--rate",
    type=float,
    default=None,
    help="Background load, create_table events/s [default: what --utilization leaves after the canary].",
)
@click.option(
    "--utilization",
    default=0.5,
    show_default=True,
    help="Share of the measured metastore capacity the canary and the default load use together.",
)
@click.option(
    "--warmup",
    default=30.0,
    show_default=True,
    help="Seconds of the same mix before the measured window (JIT warm-up of a fresh metastore); 0: none.",
)
@click.option(
    "--poll-interval",
    default=0.01,
    show_default=True,
    help="Seconds the poller sleeps between reads of the target (it adds at most this to a lag).",
)
@click.option(
    "--load-basis",
    type=click.Choice(["cold", "warm"]),
    default="cold",
    show_default=True,
    help="Which capacity measurement --utilization is a share of: before the warm-up, or after it.",
)
@click.option("--canary-interval", default=0.1, show_default=True, help="Seconds between canary bumps.")
@click.option("--insert-duration", default=20.0, show_default=True, help="Seconds of small-file INSERTs.")
@click.option("--insert-interval", default=0.2, show_default=True, help="Seconds between INSERTs.")
@click.option(
    "--capacity-calls",
    default=60,
    show_default=True,
    help="Raw create_table (and alter_table) calls to measure the HMS capacity.",
)
@click.option(
    "--trigger-seconds",
    default=0.1,
    show_default=True,
    help="The target job's --trigger-seconds (driver reader: longest wait of an idle micro-batch).",
)
@click.option(
    "--kafka-reader",
    type=click.Choice(["driver", "task"]),
    default="driver",
    show_default=True,
    help="The target job's --kafka-reader (task: the earlier reader, for A/B runs).",
)
@click.option(
    "--consistency",
    type=click.Choice(["global", "database"]),
    default="global",
    show_default=True,
    help="The target job's --consistency (database: the canary's, the load's and the inserts' databases "
    "are separate lanes).",
)
@click.option(
    "--metastore",
    type=click.Choice(METASTORES),
    default="derby",
    show_default=True,
    help="The target metastore's database: Derby in the work dir, or PostgreSQL (--pg-dsn).",
)
@click.option(
    "--pg-dsn",
    default=PG_DSN,
    show_default=True,
    help="libpq connection string of a PostgreSQL database to connect to; the bench creates (and drops) "
    "a database with a unique name on that server for the target metastore.",
)
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(
    as_json: bool,
    duration: float,
    rate: float | None,
    canary_interval: float,
    insert_duration: float,
    insert_interval: float,
    capacity_calls: int,
    utilization: float,
    trigger_seconds: float,
    kafka_reader: str,
    consistency: str,
    warmup: float,
    poll_interval: float,
    load_basis: str,
    metastore: str,
    pg_dsn: str,
    work_dir: Path | None,
) -> None:
    """Lag from source commit to visible on the target (canary + load, and small-file INSERTs)."""
    quiet_logs()
    exit_on_sigterm()
    with (
        metastore_database(metastore, pg_dsn) as (jdbc_url, jdbc_user),
        tempfile.TemporaryDirectory(prefix="bench-lag-", dir=work_dir) as tmp,
    ):
        result = run_lag(
            Path(tmp),
            duration=duration,
            rate=rate,
            canary_interval=canary_interval,
            insert_duration=insert_duration,
            insert_interval=insert_interval,
            capacity_calls=capacity_calls,
            utilization=utilization,
            trigger_seconds=trigger_seconds,
            kafka_reader=kafka_reader,
            consistency=consistency,
            warmup=warmup,
            poll_interval=poll_interval,
            load_basis=load_basis,
            jdbc_url=jdbc_url,
            jdbc_user=jdbc_user,
        )
    result = {"metastore": metastore, **result}
    emit("lag: source commit -> visible on target", result, as_json)


if __name__ == "__main__":
    main()
