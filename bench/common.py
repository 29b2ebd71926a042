"""Shared set-up for the benchmarks: machine facts, percentiles, output, and the embedded pipeline.

Pure helpers (``percentile``, ``lag_stats``, ``parse_*``, ``file_refs``) are free of I/O so the smoke
test can check them. ``Pipeline`` wires the same services as ``streamer demo`` (embedded broker,
bundled source warehouse, source agent thread, embedded target HMS, Spark target job) and records,
per event id, the wall-clock time of each stage: source commit (taken by the bench around each
warehouse call), agent publish (the envelope's ``ts_ms``), micro-batch start, apply done.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("bench")

SOURCE_ID = "bench"


# --- pure helpers ----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in [0, 1]) of ``values``; None when empty."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"percentile q must be in [0, 1], got {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def lag_stats(values: Sequence[float], prefix: str = "") -> dict[str, float | int | None]:
    """p50/p99/p99.9/max (seconds) and the sample count, keyed ``{prefix}p50_s`` etc."""
    return {
        f"{prefix}p50_s": percentile(values, 0.50),
        f"{prefix}p99_s": percentile(values, 0.99),
        f"{prefix}p999_s": percentile(values, 0.999),
        f"{prefix}max_s": max(values) if values else None,
        f"{prefix}samples": len(values),
    }


def median(values: Iterable[float]) -> float:
    got = list(values)
    return statistics.median(got) if got else 0.0


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def parse_meminfo_total(text: str) -> int:
    """Bytes of ``MemTotal`` in a /proc/meminfo text."""
    return _kib_field(text, "MemTotal")


def parse_vmhwm(text: str) -> int:
    """Peak resident set size (bytes) from a /proc/<pid>/status text (``VmHWM``)."""
    return _kib_field(text, "VmHWM")


def parse_cpu_model(text: str) -> str:
    """The first ``model name`` in a /proc/cpuinfo text (``unknown`` when absent, e.g. on ARM)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model"):
            return value.strip()
    return "unknown"


def _kib_field(text: str, name: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            parts = value.split()
            unit = parts[1].lower() if len(parts) > 1 else "kb"
            return int(parts[0]) * (1024 if unit == "kb" else 1)
    raise ValueError(f"no {name} field")


def file_refs(value: object) -> list[Any]:
    """Every ``FileRef`` inside an event (or payload), found by walking its dataclass fields."""
    from streamer.events.model import FileRef

    out: list[Any] = []

    def walk(v: object) -> None:
        if isinstance(v, FileRef):
            out.append(v)
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            for f in dataclasses.fields(v):
                walk(getattr(v, f.name))
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)

    walk(value)
    return out


# --- machine and process facts ---------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine_info() -> dict[str, Any]:
    """Cores, memory and CPU model of this machine, to print next to every figure."""
    meminfo = _read("/proc/meminfo")
    return {
        "cores": os.cpu_count() or 0,
        "memory_bytes": parse_meminfo_total(meminfo) if meminfo else 0,
        "cpu_model": parse_cpu_model(_read("/proc/cpuinfo"))
        if _read("/proc/cpuinfo")
        else platform.machine(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def peak_rss_bytes(pid: int | str = "self") -> int:
    """Peak resident set size of a process (``VmHWM``), 0 when unreadable."""
    text = _read(f"/proc/{pid}/status")
    return parse_vmhwm(text) if "VmHWM" in text else 0


def rss_bytes(pid: int | str = "self") -> int:
    """Current resident set size of a process (``VmRSS``), 0 when unreadable."""
    text = _read(f"/proc/{pid}/status")
    return _kib_field(text, "VmRSS") if "VmRSS" in text else 0


def reset_peak_rss(pid: int | str = "self") -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux: write 5 to clear_refs); False when not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def io_write_bytes() -> int:
    """Bytes this process caused to be written to storage (``write_bytes`` of /proc/self/io)."""
    for line in _read("/proc/self/io").splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def metric_sum(name: str) -> float:
    """Sum of every sample called ``name`` in streamer's metrics registry."""
    from streamer import metrics

    return sum(s.value for fam in metrics.REGISTRY.collect() for s in fam.samples if s.name == name)


# --- output ----------------------------------------------------------------------------------


def emit(title: str, result: dict[str, Any], as_json: bool) -> None:
    """Print ``result`` (with the machine) as one JSON object, or as a two-column table."""
    result = {**result, "machine": machine_info()}
    if as_json:
        print(json.dumps(result, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in _flatten(result):
        table.add_row(key, _fmt(value))
    Console().print(table)


def _flatten(d: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in d.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def quiet_logs() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for name in ("py4j", "streamer"):
        logging.getLogger(name).setLevel(logging.ERROR)


# --- the pipeline ----------------------------------------------------------------------------


@dataclass
class Stages:
    """Wall-clock times (s since the epoch) per event id, for the lag split."""

    committed: dict[int, float] = field(default_factory=dict)
    published: dict[int, float] = field(default_factory=dict)
    batch_start: dict[int, float] = field(default_factory=dict)
    applied: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    newest: int = 0  # the highest id in ``applied`` (kept as they come: polled every 20 ms)

    def newest_applied(self) -> int:
        return self.newest

    def lags(self, ids: Iterable[int] | None = None) -> list[float]:
        with self.lock:
            keys = self.committed if ids is None else ids
            return [
                self.applied[i] - self.committed[i] for i in keys if i in self.applied and i in self.committed
            ]

    def tail(self, ids: Iterable[int], n: int = 10) -> list[dict[str, float | int]]:
        """The ``n`` events of ``ids`` with the longest commit->applied, slowest first, with their legs."""
        with self.lock:
            rows = []
            for i in ids:
                if i not in self.applied or i not in self.committed:
                    continue
                committed, applied = self.committed[i], self.applied[i]
                published, started = self.published.get(i, committed), self.batch_start.get(i, applied)
                rows.append({"event_id": i, "lag_s": applied - committed, "read_s": published - committed,
                             "to_batch_s": started - published, "apply_s": applied - started})
        return sorted(rows, key=lambda r: -r["lag_s"])[:n]

    def split(self, ids: Iterable[int] | None = None) -> dict[str, float | None]:
        """Median seconds of commit->publish, publish->batch start, batch start->applied."""
        with self.lock:
            keys = [i for i in (self.committed if ids is None else ids) if i in self.applied]
            read = [self.published[i] - self.committed[i] for i in keys if i in self.published]
            to_batch = [self.batch_start[i] - self.published[i] for i in keys if i in self.published]
            apply = [self.applied[i] - self.batch_start[i] for i in keys]
        return {
            "source_read_p50_s": percentile(read, 0.5),
            "publish_kafka_trigger_p50_s": percentile(to_batch, 0.5),
            "apply_p50_s": percentile(apply, 0.5),
        }


class Pipeline:
    """Broker + bundled source warehouse + agent thread + target HMS (+ Spark target job on demand)."""

    def __init__(
        self,
        work: Path,
        *,
        message_format: str = "gzip(json-2.0)",
        poll_interval: float = 0.05,
        jdbc_url: str | None = None,
        jdbc_user: str | None = None,
    ):
        self.work = work.resolve()
        self.jdbc_url = jdbc_url  # the target metastore's database (None: Derby in the work dir)
        self.jdbc_user = jdbc_user
        self.message_format = message_format
        self.poll_interval = poll_interval
        self.stages = Stages()
        self._stack = contextlib.ExitStack()
        self.source_url = str(work / "source" / "metastore.db")
        self.target_root = work / "target" / "warehouse"
        self.spark: Any = None
        self.query: Any = None
        self.applier: Any = None
        self.catalog: Any = None
        self.settings: Any = None
        self._target_catalog: Any = None
        self.on_applied_hooks: list[Callable[[Any, float], None]] = []

    # --- life cycle ---

    def __enter__(self) -> Pipeline:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_target()
        self._stack.close()

    def _start(self) -> None:
        from streamer.embedded_metastore.server import EmbeddedMetastore
        from streamer.kafka.broker import EmbeddedBroker
        from streamer.metastore.thrift import HmsCatalog
        from streamer.warehouse.warehouse import Warehouse

        (self.work / "source").mkdir(parents=True, exist_ok=True)
        self.target_root.mkdir(parents=True, exist_ok=True)
        say("starting the embedded broker and target metastore")
        self.broker = self._stack.enter_context(EmbeddedBroker(log_path=self.work / "broker.log"))
        self.hms = EmbeddedMetastore(
            work_dir=self.work / "target" / "hms",
            warehouse_dir=self.target_root,
            jdbc_url=self.jdbc_url,
            jdbc_user=self.jdbc_user,
        )
        started = threading.Thread(target=self.hms.start, name="hms-start", daemon=True)
        started.start()
        self._stack.callback(self.hms.stop)
        self.warehouse = Warehouse.open(
            self.source_url,
            root=self.work / "source" / "warehouse",
            cmroot=self.work / "source" / "cmroot",
            message_format=self.message_format,
            source_id=SOURCE_ID,
        )
        self._stack.callback(self.warehouse.close)
        self._start_agent()
        started.join()
        if not self.hms.running:
            raise RuntimeError(f"the target metastore did not start; see {self.hms.log_path}")
        self.catalog = HmsCatalog(self.hms.uri)  # for the bench's own calls (capacity, pollers)
        self._stack.callback(self.catalog.close)

    def _start_agent(self) -> None:
        from streamer.source.agent import AgentConfig, SourceAgent
        from streamer.source.enrich import EnrichSettings
        from streamer.source.reader import SqlNotificationReader
        from streamer.warehouse.files import CHECKSUM_ALGORITHM

        self.agent = SourceAgent(
            AgentConfig(
                source_id=SOURCE_ID,
                kafka=self.broker.client_settings(),
                poll_interval=self.poll_interval,
                gap_settle_seconds=2.0,
                enrich=EnrichSettings(
                    checksum_algorithm=CHECKSUM_ALGORITHM, cmroot=str(self.work / "source" / "cmroot")
                ),
            ),
            SqlNotificationReader(self.source_url),
        )
        self.agent.start()
        stop = threading.Event()
        self.agent_errors: list[BaseException] = []

        def run() -> None:
            try:
                self.agent.run(stop=stop)
            except BaseException as exc:
                self.agent_errors.append(exc)
                log.exception("source agent stopped")

        thread = threading.Thread(target=run, name="source-agent", daemon=True)
        thread.start()
        self._stack.callback(self.agent.close)
        self._stack.callback(thread.join, 10)
        self._stack.callback(stop.set)

    # --- the source ---

    def commit(self, op: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, list[int]]:
        """Run a warehouse operation; record the commit time of each event id it wrote."""
        before = self.warehouse.current_event_id()
        result = op(*args, **kwargs)
        after = self.warehouse.current_event_id()
        now = time.time()
        ids = list(range(before + 1, after + 1))
        with self.stages.lock:
            for event_id in ids:
                self.stages.committed[event_id] = now
        return result, ids

    # --- the target job ---

    def target_settings(
        self, trigger_seconds: float = 0.1, max_events_per_trigger: int = 5000, **more: Any
    ) -> Any:
        from streamer.target.job.settings import (
            KafkaSettings,
            LayoutSettings,
            MetastoreSettings,
            ScaleSettings,
            TargetSettings,
        )

        more.setdefault("markers_per_batch", True)  # a DR target's catch-up setting (issue 26)
        return TargetSettings(
            source_id=SOURCE_ID,
            kafka=KafkaSettings(bootstrap_servers=self.broker.bootstrap_servers,
                                topic=self.agent.config.topic_name),
            metastore=MetastoreSettings(uri=self.hms.uri),
            layout=LayoutSettings(
                warehouse_root=self.target_root.as_uri(),
                external_base_dir=(self.work / "target" / "external").as_uri(),
                state_dir=str(self.work / "target" / "state"),
                checkpoint_dir=str(self.work / "target" / "checkpoint"),
            ),
            # other ScaleSettings fields (e.g. kafka_reader), for A/B runs
            scale=ScaleSettings(trigger_seconds=trigger_seconds,
                                max_events_per_trigger=max_events_per_trigger, **more),
        )

    def start_target(
        self,
        trigger_seconds: float = 0.1,
        warm_timeout: float = 180.0,
        max_events_per_trigger: int = 5000,
        copier: str = "job",
        **more: Any,
    ) -> None:
        """Start (or restart, from its checkpoint) the Spark target job; waits for its first batch."""
        from streamer.metastore.thrift import HmsCatalog
        from streamer.target.apply.files import FileCopier
        from streamer.target.job.executor_copy import PooledFileCopier, executor_copier
        from streamer.target.job.streaming import spark_session, start_query

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        if os.sep in os.environ["PYSPARK_PYTHON"]:  # a relative path would break after the chdir below
            os.environ["PYSPARK_PYTHON"] = os.path.abspath(os.environ["PYSPARK_PYTHON"])
        # Spark's Python workers start in the current directory and put it first on their path:
        # from bench/ its copy.py would shadow the standard library's copy module
        os.chdir(self.work)
        self.settings = self.target_settings(trigger_seconds, max_events_per_trigger, **more)
        if self.spark is None:
            say("starting Spark")
            self.spark = spark_session(self.settings, app_name="streamer-bench")
            self.spark.sparkContext.setLogLevel("ERROR")
        self._target_catalog = HmsCatalog(self.hms.uri)
        hms_uri = self.hms.uri
        s = self.settings.scale
        job_copier = executor_copier(
            self.spark, s.executor_copy_min_bytes, s.executor_copy_min_files, s.copy_workers
        )
        if copier == "no-prestage" and isinstance(job_copier, PooledFileCopier):
            job_copier.prestage_max_bytes = 0  # the job's copier as before its prestaging (A/B runs)
        self.applier = TimedBatchApplier(
            self.settings,
            self._target_catalog,
            on_applied=self._on_applied,
            # the copier `streamer target run` gives its job ("no-prestage": without prestaging);
            # "per-copy": a thread pool per copy (before issue 41), for A/B runs
            copier=FileCopier(max_workers=s.copy_workers) if copier == "per-copy" else job_copier,
            catalogs=lambda: HmsCatalog(hms_uri),  # lanes' connections (--consistency database)
        )
        self.query = start_query(self.spark, self.settings, self.applier)
        deadline = time.monotonic() + warm_timeout
        while self.applier.batches == 0 and time.monotonic() < deadline and self.query.isActive:
            time.sleep(0.05)  # the first micro-batch starts Spark's Python workers: not replication lag

    def stop_target(self) -> None:
        if self.query is not None:
            if self.applier is not None:
                self.applier.stop_reading()
            self.query.stop()
            self.query = None
        if self.applier is not None:
            self.applier.close()
        if self._target_catalog is not None:
            self._target_catalog.close()
            self._target_catalog = None

    def _on_applied(self, event: Any, now: float) -> None:
        start = self.applier.batch_started if self.applier is not None else now
        with self.stages.lock:
            if event.event_id not in self.stages.applied:
                self.stages.applied[event.event_id] = now
                self.stages.newest = max(self.stages.newest, event.event_id)
                self.stages.batch_start[event.event_id] = start
                if event.ts_ms:
                    self.stages.published[event.event_id] = event.ts_ms / 1000
        for hook in self.on_applied_hooks:
            hook(event, now)

    def wait_applied(self, event_id: int, timeout: float) -> bool:
        """Wait until the target applied ``event_id``; False on timeout; raises if a part failed."""
        deadline = time.monotonic() + timeout
        checked = 0.0
        while self.stages.newest_applied() < event_id:
            now = time.monotonic()
            if now - checked >= 0.25:  # a JVM round trip and a state file read: not every poll, since
                checked = now  # the bench shares the target's process (its GIL) and would slow it
                self._check_parts()
            if now > deadline:
                return False
            time.sleep(0.02)
        return True

    def _check_parts(self) -> None:
        """Raise if the source agent or the target job failed, or the target halted."""
        if self.agent_errors:
            raise RuntimeError(f"source agent failed: {self.agent_errors[0]}")
        if self.query is not None and self.query.exception() is not None:
            raise RuntimeError(f"target job failed: {self.query.exception()}")
        if self.applier is not None and self.applier.state.halts():
            raise RuntimeError(f"target halted: {self.applier.state.halts()}")

    def jvm_peak_rss_bytes(self) -> int:
        proc = (
            getattr(getattr(self.spark.sparkContext, "_gateway", None), "proc", None) if self.spark else None
        )
        return peak_rss_bytes(proc.pid) if proc is not None else 0


def _timed_batch_applier() -> type:
    from streamer.target.job.streaming import BatchApplier

    class _Timed(BatchApplier):
        """Records when each micro-batch started, for the lag split."""

        batch_started = 0.0

        def process(self, records: Iterable[tuple[int, bytes]], **kwargs: Any) -> Any:
            self.batch_started = time.time()
            return super().process(records, **kwargs)

    return _Timed


def TimedBatchApplier(*args: Any, **kwargs: Any) -> Any:
    return _timed_batch_applier()(*args, **kwargs)


# --- the target metastore's database ---------------------------------------------------------

PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
METASTORES = ("derby", "postgres")


def jdbc_from_dsn(dsn: str, dbname: str) -> tuple[str, str | None]:
    """The JDBC URL (and user) of database ``dbname`` on the PostgreSQL server a libpq ``dsn`` names."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(dsn)
    host, port = parts.get("host") or "127.0.0.1", parts.get("port") or 5432
    user = parts.get("user")
    return f"jdbc:postgresql://{host}:{port}/{dbname}", str(user) if user else None


@contextlib.contextmanager
def metastore_database(kind: str, dsn: str = PG_DSN) -> Iterator[tuple[str | None, str | None]]:
    """``(jdbc_url, user)`` for a target metastore on ``kind``: ``derby`` is (None, None), the work
    dir's Derby; ``postgres`` is a fresh database with a unique name on the server ``dsn`` names
    (connected to as its admin database, trust auth), dropped afterwards."""
    if kind == "derby":
        yield None, None
        return
    if kind != "postgres":
        raise ValueError(f"unknown target metastore database {kind!r} (one of {', '.join(METASTORES)})")
    import uuid

    import psycopg

    dbname = f"streamer_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    try:
        yield jdbc_from_dsn(dsn, dbname)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


# --- target metastore capacity ---------------------------------------------------------------


def table_template(warehouse: Any, db: str = "bench_template") -> tuple[Any, Any]:
    """A database and an unpartitioned table snapshot from the source, to create copies of."""
    from streamer.warehouse.workload import COLUMNS, PARTITION_KEY_SETS

    if db not in warehouse.databases():
        warehouse.create_database(db)
        warehouse.create_table(db, "t", COLUMNS)
        warehouse.create_table(db, "p", COLUMNS, PARTITION_KEY_SETS[0])
    return warehouse.database(db), warehouse.table(db, "t")


def raw_create_rate(catalog: Any, warehouse: Any, target_root: Path, n: int, tag: str) -> float:
    """create_table calls/s on the target HMS, called directly over Thrift (its physical limit)."""
    db_snap, tbl = table_template(warehouse)
    db = f"raw_{tag}"
    catalog.create_database(
        dataclasses.replace(db_snap, name=db, location=(target_root / f"{db}.db").as_uri())
    )
    started = time.perf_counter()
    for i in range(n):
        sd = dataclasses.replace(tbl.sd, location=(target_root / f"{db}.db" / f"t{i}").as_uri())
        catalog.create_table(dataclasses.replace(tbl, db=db, name=f"t{i}", sd=sd))
    return n / (time.perf_counter() - started)


def raw_alter_rate(catalog: Any, db: str, table: str, n: int) -> float:
    """alter_table calls/s (a property bumped, as the canary does) on the target HMS, over Thrift."""
    snap = catalog.get_table(db, table)
    started = time.perf_counter()
    for i in range(n):
        bumped = dataclasses.replace(snap, parameters={**snap.parameters, "raw.seq": str(i)})
        catalog.alter_table(db, table, bumped)
    return n / (time.perf_counter() - started)


# --- events without Kafka (what the agent would publish) -------------------------------------


def prepared_events(source_url: str, cmroot: str, after: int = 0) -> list[Any]:
    """Decode and enrich the source's log after ``after`` as the agent does (same code, no Kafka)."""
    from streamer.hive.decode import decode_row
    from streamer.source.enrich import Enricher, EnrichSettings
    from streamer.source.reader import SqlNotificationReader
    from streamer.warehouse.files import CHECKSUM_ALGORITHM

    reader = SqlNotificationReader(source_url)
    try:
        enrich = Enricher(EnrichSettings(checksum_algorithm=CHECKSUM_ALGORITHM, cmroot=cmroot), reader)
        now_ms = int(time.time() * 1000)
        out = []
        while rows := reader.read_after(after, 1000):
            out += [enrich(dataclasses.replace(decode_row(r, SOURCE_ID), ts_ms=now_ms)) for r in rows]
            after = rows[-1].event_id
        return out
    finally:
        reader.close()


def encode_events(events: Iterable[Any]) -> list[tuple[int, bytes]]:
    """``(offset, Avro value)`` records as the target job's micro-batches hold them."""
    from streamer.events.codec import EventSerializer

    serialize = EventSerializer()
    return [(i, serialize(e)) for i, e in enumerate(events)]


def exit_on_sigterm() -> None:
    """Turn SIGTERM (e.g. from ``timeout``) into SystemExit so the services started are stopped."""
    import signal

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def ref_size(ref: Any) -> int:
    """A file reference's size: the event's, else the source file's (or its cmroot copy's), else 0."""
    if ref.size is not None:
        return int(ref.size)
    from urllib.parse import urlparse

    for uri in (ref.uri, ref.cm_uri):
        if uri:
            path = urlparse(uri).path if uri.startswith("file:") else uri
            with contextlib.suppress(OSError):
                return Path(path).stat().st_size
    return 0
