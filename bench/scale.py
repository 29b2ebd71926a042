"""Scaling out: catch-up in ``global`` vs ``database`` consistency, copies on the driver vs executors.

Catch-up: the bundled source writes a backlog spread over ``--databases`` databases (round robin:
per database and round a CREATE_TABLE, an ADD_PARTITION, an ALTER_TABLE and a one-file INSERT, so
nothing coalesces and every event costs metastore calls). The events are decoded and enriched as the
agent does and Avro-encoded once; then ``BatchApplier.process`` applies the same backlog in
micro-batches of ``--batch`` records twice, into two sets of target databases (``--db-map``) on one
PostgreSQL-backed target metastore: once with ``--consistency global`` (one lane, one metastore
connection), once with ``database`` (``--lanes`` lanes, a connection each). Kafka and Spark's
scheduling are left out: the catch-up of a backlog is bound by the apply path (bench/catchup.py
measures it end to end). Where the time goes: each catalog call is timed (busy seconds summed over
the lanes / wall seconds = how many calls were in flight on average), and the CPU seconds of this
process (decoding, planning, Thrift), the metastore JVM and PostgreSQL are read from /proc.

Copies: ``--copy-files`` files of ``--copy-file-mib`` MiB (sha256) are staged and published by
``FileCopier`` on the driver's thread pool, then by ``SparkFileCopier`` as tasks on the executors of
a ``--spark-master`` cluster (default ``local-cluster[2,1,768]``: two executor JVMs with their own
Python workers), after one warm-up copy that starts the workers.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import contextlib
import hashlib
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from common import emit, encode_events, exit_on_sigterm, median, prepared_events, quiet_logs, ratio, say

PG_HOST, PG_PORT = "127.0.0.1", 5432
SOURCE_ID = "bench"


# --- where the time goes ---------------------------------------------------------------------


class TimedCatalog:
    """A catalog whose calls are timed (seconds and count, summed over every thread)."""

    totals: dict[str, list[float]] = {}
    lock = threading.Lock()

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                with TimedCatalog.lock:
                    total = TimedCatalog.totals.setdefault(name, [0.0, 0])
                    total[0] += spent
                    total[1] += 1

        return call

    @classmethod
    def take(cls) -> dict[str, list[float]]:
        with cls.lock:
            out, cls.totals = cls.totals, {}
        return out


def _cpu_seconds(pid: int | str) -> float:
    """utime + stime of a process (and its reaped children not included), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _postgres_pids() -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == "postgres":
                    out.append(int(entry.name))
    return out


def _cpu_snapshot(hms_pid: int) -> dict[str, float]:
    return {
        "bench": _cpu_seconds("self"),
        "hms_jvm": _cpu_seconds(hms_pid),
        "postgres": sum(_cpu_seconds(p) for p in _postgres_pids()),
        "machine": _machine_busy_seconds(),
    }


def _machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (every process and the kernel), from /proc/stat.

    The per-process figures miss the kernel's work for them and short-lived children (a metastore
    that shells out); this one misses nothing, so it bounds what more lanes can get.
    """
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


# --- catch-up ---------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_metastore(work: Path, threads: int, jvm_options: tuple[str, ...] = ()) -> Iterator[Any]:
    """The embedded metastore on a fresh PostgreSQL database (dropped afterwards)."""
    import psycopg

    from streamer.embedded_metastore.server import EmbeddedMetastore

    try:
        socket.create_connection((PG_HOST, PG_PORT), timeout=1).close()
    except OSError as exc:
        raise click.ClickException(f"no PostgreSQL at {PG_HOST}:{PG_PORT}: {exc}") from exc
    user = os.environ.get("STREAMER_TEST_PG_USER", "postgres")
    dbname = f"streamer_scale_{uuid.uuid4().hex[:10]}"
    admin = f"host={PG_HOST} port={PG_PORT} user={user} dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    server = EmbeddedMetastore(
        work_dir=work / "hms", warehouse_dir=work / "hms-warehouse",
        jdbc_url=f"jdbc:postgresql://{PG_HOST}:{PG_PORT}/{dbname}", jdbc_user=user,
        site_overrides={"hive.metastore.server.min.threads": str(threads),
                        "hive.metastore.server.max.threads": str(max(threads, 64))},
        jvm_options=jvm_options,
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def _backlog(work: Path, databases: int, rounds: int) -> tuple[list[tuple[int, bytes]], list[str]]:
    from streamer.events.model import Column
    from streamer.warehouse.warehouse import Warehouse
    from streamer.warehouse.workload import COLUMNS

    url = str(work / "source" / "metastore.sqlite")
    (work / "source").mkdir(parents=True, exist_ok=True)
    dbs = [f"scale{i}" for i in range(databases)]
    row = [{"id": 1, "name": "a", "amount": 1.5, "ok": True}]
    with Warehouse.open(url, root=work / "source" / "warehouse", cmroot=work / "source" / "cmroot",
                        source_id=SOURCE_ID) as wh:
        for db in dbs:
            wh.create_database(db)
        for r in range(rounds):
            for db in dbs:
                wh.create_table(db, f"t{r}", COLUMNS, [Column("dt", "string")])
                wh.add_partitions(db, f"t{r}", [{"dt": "d0"}])
                wh.alter_table_properties(db, f"t{r}", {"bench.round": str(r)})
                wh.insert(db, f"t{r}", row, {"dt": "d0"})
    events = prepared_events(url, str(work / "source" / "cmroot"))
    return encode_events(events), dbs


def _apply(work: Path, hms: Any, records: list[tuple[int, bytes]], dbs: list[str], mode: str,
           lanes: int, batch: int, tag: str | None = None) -> dict[str, Any]:
    from streamer.metastore.thrift import HmsCatalog
    from streamer.target.job.settings import (
        KafkaSettings,
        LayoutSettings,
        MetastoreSettings,
        ScaleSettings,
        TargetSettings,
    )
    from streamer.target.job.streaming import BatchApplier

    tag = tag or mode[0]
    settings = TargetSettings(
        source_id=SOURCE_ID,
        kafka=KafkaSettings(bootstrap_servers="unused:9092", topic="unused"),
        metastore=MetastoreSettings(uri=hms.uri),
        layout=LayoutSettings(
            warehouse_root=(work / f"target-{tag}").as_uri(), state_dir=str(work / f"state-{tag}"),
            checkpoint_dir=str(work / f"checkpoint-{tag}"), db_map={db: f"{tag}_{db}" for db in dbs},
        ),
        scale=ScaleSettings(consistency=mode, apply_lanes=lanes),
    )
    catalog = TimedCatalog(HmsCatalog(hms.uri))
    applier = BatchApplier(settings, catalog,  # type: ignore[arg-type]
                           catalogs=lambda: TimedCatalog(HmsCatalog(hms.uri)))  # type: ignore[arg-type,return-value]
    TimedCatalog.take()
    cpu0 = _cpu_snapshot(hms._proc.pid)
    started = time.perf_counter()
    applied = 0
    for i in range(0, len(records), batch):
        the_plan = applier.process(records[i : i + batch])
        applied += len(the_plan.event_ids)
    wall = time.perf_counter() - started
    cpu1 = _cpu_snapshot(hms._proc.pid)
    calls = TimedCatalog.take()
    halts = applier.state.halts()
    applier.runner.close()
    busy = sum(v[0] for v in calls.values())
    tables = sum(len(catalog.list_tables(f"{tag}_{db}")) for db in dbs)
    catalog.close()
    if halts:
        raise click.ClickException(f"{mode}: target halted: {halts}")
    return {
        "eps": applied / wall,
        "events": applied,
        "seconds": wall,
        "tables": tables,
        "catalog_calls": int(sum(v[1] for v in calls.values())),
        "catalog_busy_s": busy,
        "calls_in_flight": busy / wall,  # average metastore calls in flight
        "catalog_ms_per_call": 1000 * busy / max(1, sum(v[1] for v in calls.values())),
        "cpu_s": {k: cpu1[k] - cpu0[k] for k in cpu0},
        # cores busy on average during the run, whoever used them (1.0 = one core's worth)
        "machine_busy_cores": (cpu1["machine"] - cpu0["machine"]) / wall,
        "machine_cpu_ms_per_event": 1000 * (cpu1["machine"] - cpu0["machine"]) / max(1, applied),
        "top_calls_s": dict(
            sorted(((k, round(v[0], 2)) for k, v in calls.items()), key=lambda kv: -kv[1])[:5]
        ),
    }


def run_catchup(
    work: Path, databases: int, rounds: int, lanes: int, batch: int, threads: int, warmup: int,
    repeats: int, jvm_options: tuple[str, ...] = (), warmup_passes: int = 1,
) -> dict[str, Any]:
    """The backlog applied ``repeats`` times in each mode, alternating which goes first (the
    metastore's JVM keeps warming up: the mode that always ran first would pay for it)."""
    say(f"source: {databases} databases x {rounds} rounds x 4 events")
    records, dbs = _backlog(work, databases, rounds)
    runs: dict[str, list[dict[str, Any]]] = {"global": [], "database": []}
    with postgres_metastore(work, threads, jvm_options) as hms:
        warmup = len(records) if warmup < 0 else warmup
        say(f"warm-up (the metastore's JIT, connection pools): the first {warmup} events, both modes")
        for w in range(warmup_passes):
            _apply(work, hms, records[:warmup], dbs, "global", lanes, batch, tag=f"wg{w}")
            _apply(work, hms, records[:warmup], dbs, "database", lanes, batch, tag=f"wd{w}")
        for r in range(repeats):
            for mode in ("global", "database") if r % 2 == 0 else ("database", "global"):
                say(f"repeat {r + 1}: {len(records)} events, {mode} ({hms.uri}, PostgreSQL)")
                got = _apply(work, hms, records, dbs, mode, lanes, batch, tag=f"{mode[0]}{r}")
                say(f"repeat {r + 1}: {mode} {got['eps']:.1f} events/s")
                runs[mode].append(got)
    tables = {run["tables"] for mode_runs in runs.values() for run in mode_runs}
    if len(tables) != 1:
        raise click.ClickException(f"the targets differ: {tables} tables")
    one = median(run["eps"] for run in runs["global"])
    many = median(run["eps"] for run in runs["database"])
    busy_global = median(run["machine_busy_cores"] for run in runs["global"])
    cores = os.cpu_count() or 1
    return {
        "catchup_eps_global": one,
        "catchup_eps_database": many,
        "speedup_database": ratio(many, one),
        # the most any number of lanes could give on this machine: every core busy at global's CPU
        # cost per event (lanes add contention, never remove work)
        "cpu_ceiling_speedup": ratio(cores, busy_global),
        "cores": cores,
        "speedup_per_repeat": [ratio(d["eps"], g["eps"]) for g, d in zip(runs["global"], runs["database"],
                                                                          strict=True)],
        "catchup_events": len(records),
        "databases": databases,
        "lanes": lanes,
        "batch": batch,
        "repeats": repeats,
        "global": runs["global"][-1],
        "database": runs["database"][-1],
    }


# --- copies -----------------------------------------------------------------------------------


def _source_files(directory: Path, n: int, size: int) -> list[Any]:
    from streamer.events.model import FileRef

    directory.mkdir(parents=True, exist_ok=True)
    refs = []
    block = os.urandom(1 << 20)
    for i in range(n):
        path = directory / f"{i:05d}_0"
        digest = hashlib.sha256()
        with open(path, "wb") as fh:
            left = size
            while left > 0:
                chunk = block[: min(left, len(block))]
                chunk = i.to_bytes(4, "big") + chunk[4:]  # every file differs
                fh.write(chunk)
                digest.update(chunk)
                left -= len(chunk)
        refs.append(FileRef(uri=path.as_uri(), checksum=digest.hexdigest(), checksum_algorithm="sha256",
                            size=size))
    return refs


def run_copies(work: Path, files: int, mib: int, master: str, workers: int) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from streamer.target.apply.files import FileCopier
    from streamer.target.apply.paths import Root
    from streamer.target.job.executor_copy import ExecutorCopy, SparkFileCopier, executor_conf

    size = mib << 20
    say(f"copies: {files} files x {mib} MiB")
    refs = _source_files(work / "copy-src", files, size)
    total = files * size
    dst = work / "copy-dst"
    roots = [Root.parse(dst.as_uri())]
    driver = FileCopier(max_workers=workers, roots=roots)
    started = time.perf_counter()
    driver.stage_all(refs, lambda _: str(dst / "driver"), event_id=1).publish()
    driver_s = time.perf_counter() - started

    say(f"starting Spark ({master})")
    builder = SparkSession.builder.master(master).appName("streamer-bench-scale")
    for key, value in {"spark.ui.enabled": "false", **executor_conf(master)}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark_started = time.perf_counter()
        executors = SparkFileCopier(spark.sparkContext, ExecutorCopy(min_bytes=1, min_files=1),
                                    max_workers=workers, roots=roots)
        warm = _source_files(work / "copy-warm", 8, 1024)
        executors.stage_all(warm, lambda _: str(dst / "warm"), event_id=2).publish()  # starts the workers
        warm_s = time.perf_counter() - spark_started
        started = time.perf_counter()
        executors.stage_all(refs, lambda _: str(dst / "executors"), event_id=3).publish()
        executors_s = time.perf_counter() - started
        jvms = sorted({r.executor_pid or 0 for r in executors.last_run})
        tasks = executors._tasks(len(refs))
    finally:
        spark.stop()
    return {
        "copy_bps_driver": total / driver_s,
        "copy_bps_executors": total / executors_s,
        "copy_ratio_executors": ratio(driver_s, executors_s),
        "copy_bytes": total,
        "copy_files": files,
        "copy_driver_workers": workers,
        "copy_executor_tasks": tasks,
        "copy_executor_jvms": len(jvms),
        "spark_master": master,
        "spark_start_and_warmup_s": warm_s,
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--databases", default=4, show_default=True, help="Databases of the backlog (lanes to fill).")
@click.option("--rounds", default=50, show_default=True, help="Rounds of 4 events per database.")
@click.option("--lanes", default=4, show_default=True, help="Lanes (metastore connections) of database mode.")
@click.option("--batch", default=500, show_default=True, help="Records per micro-batch.")
@click.option(
    "--warmup",
    default=-1,
    show_default=True,
    help="Events applied first (each mode), not timed; -1 = the whole backlog (a production metastore "
    "has long compiled its hot paths; a cold one spends a core on its JIT compiler for a minute).",
)
@click.option("--warmup-passes", default=1, show_default=True, help="Warm-up runs (each mode).")
@click.option("--repeats", default=2, show_default=True, help="Runs per mode, alternating the order.")
@click.option("--hms-threads", default=8, show_default=True, help="The metastore's minimum handler threads.")
@click.option("--hms-jvm-option", multiple=True, help="A JVM option of the metastore (-XX:+UseSerialGC).")
@click.option("--copy-files", default=32, show_default=True, help="Files of the large copy.")
@click.option("--copy-file-mib", default=4, show_default=True, help="MiB per file of the large copy.")
@click.option("--copy-workers", default=8, show_default=True, help="The driver pool's threads.")
@click.option("--spark-master", default="local-cluster[2,1,768]", show_default=True)
@click.option("--skip-copies", is_flag=True, help="Catch-up only.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(as_json: bool, databases: int, rounds: int, lanes: int, batch: int, warmup: int, warmup_passes: int,
         repeats: int,
         hms_threads: int, hms_jvm_option: tuple[str, ...],
         copy_files: int, copy_file_mib: int, copy_workers: int, spark_master: str, skip_copies: bool,
         work_dir: Path | None) -> None:
    """Catch-up in global vs database consistency; large copies on the driver vs executors."""
    quiet_logs()
    exit_on_sigterm()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="bench-scale-", dir=work_dir) as tmp:
        work = Path(tmp)
        os.chdir(work)  # Spark's Python workers start here (bench/copy.py must not shadow copy)
        load_before = os.getloadavg()
        result = run_catchup(work, databases, rounds, lanes, batch, hms_threads, warmup, repeats,
                             hms_jvm_option, warmup_passes)
        result["hms_jvm_options"] = list(hms_jvm_option)
        if not skip_copies:
            result.update(run_copies(work, copy_files, copy_file_mib, spark_master, copy_workers))
        result["loadavg_before"] = [round(x, 2) for x in load_before]
        result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    emit("scaling out: lanes and executor copies", result, as_json)


if __name__ == "__main__":
    main()
