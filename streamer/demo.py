"""``streamer demo``: the whole pipeline on embedded services, a scripted workload, and a comparison.

Starts an embedded Kafka-protocol broker (Tansu), a bundled source warehouse (sqlite in a temp
folder), an embedded target Hive Metastore, the source agent (a thread) and the target job (Spark,
in this process); runs a short scripted workload paced so a person can follow it; waits until the
target has applied every event; then reads every table on both sides (the target through Spark
SQL) and prints row counts and the measured lag. Exits 0 only if the target equals the source.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import click

from streamer import metrics
from streamer.kafka.naming import default_topic

log = logging.getLogger(__name__)

SOURCE_ID = "demo"


@dataclass
class Timeline:
    """Wall-clock commit time of each source event and the time the target applied it."""

    committed: dict[int, float] = field(default_factory=dict)
    applied: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_applied(self, event: Any, now: float) -> None:
        with self.lock:
            self.applied.setdefault(event.event_id, now)

    def lags(self) -> list[float]:
        with self.lock:
            return [self.applied[i] - t for i, t in self.committed.items() if i in self.applied]

    def newest_applied(self) -> int:
        with self.lock:
            return max(self.applied, default=0)


class PacedWarehouse:
    """Wraps the source warehouse: narrates each change, records its event ids' commit time, paces."""

    def __init__(self, warehouse: Any, timeline: Timeline, pause: float, say: Callable[[str], None]) -> None:
        self._wh = warehouse
        self._timeline = timeline
        self._pause = pause
        self._say = say

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._wh, name)
        if not callable(target) or name.startswith("_") or name in _READ_ONLY:
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            before = self._wh.current_event_id()
            result = target(*args, **kwargs)
            after = self._wh.current_event_id()
            now = time.time()
            for event_id in range(before + 1, after + 1):
                self._timeline.committed[event_id] = now
            shown = ", ".join(str(a) for a in args[:3] if isinstance(a, str | int))
            published = int(_sample_sum("streamer_source_events_published_total"))
            self._say(
                f"source: {name}({shown})  -> events {before + 1}..{after}   "
                f"[published {published}, target at {self._timeline.newest_applied()}]"
            )
            time.sleep(self._pause)
            return result

        return call


_READ_ONLY = frozenset(
    {"current_event_id", "rows", "tables", "databases", "database", "table", "partitions",
     "partition_snapshots", "functions", "files", "notifications", "root", "cmroot", "close"}
)


@dataclass
class TableComparison:
    name: str
    source_rows: int
    target_rows: int
    equal: bool


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[min(999, int(q * 1000)) - 1]


def _normalize(rows: list[dict[str, Any]]) -> Counter[tuple[tuple[str, str], ...]]:
    return Counter(tuple(sorted((k, repr(v)) for k, v in row.items())) for row in rows)


def compare_tables(warehouse: Any, spark: Any, target_root: str) -> list[TableComparison]:
    """Every source table's rows vs the target's: Spark SQL on the target HMS, ACID tables through
    ``read_table`` (committed write ids only), all ACID tables against one visibility snapshot."""
    from streamer.target import read_table
    from streamer.target.state.visibility import VisibilitySnapshot

    visibility = VisibilitySnapshot(target_root)
    out: list[TableComparison] = []
    for db in sorted(warehouse.databases()):
        for table in sorted(warehouse.tables(db)):
            snapshot = warehouse.table(db, table)
            if snapshot.table_type == "VIRTUAL_VIEW":
                continue
            source_rows = warehouse.rows(db, table)
            try:
                if snapshot.is_transactional:
                    name = f"{db}.{table}"
                    frame = read_table(spark, name, warehouse_root=target_root, visibility=visibility)
                else:
                    frame = spark.sql(f"SELECT * FROM `{db}`.`{table}`")
                target_rows = [r.asDict() for r in frame.collect()]
            except Exception as exc:  # the table is missing or unreadable on the target: a failure
                log.error("reading %s.%s on the target: %s", db, table, exc)
                target_rows = []
                equal = False
            else:
                equal = _normalize(source_rows) == _normalize(target_rows)
            out.append(TableComparison(f"{db}.{table}", len(source_rows), len(target_rows), equal))
    return out


@contextlib.contextmanager
def _work_dir(path: Path | None, keep: bool) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix="streamer-demo-"))
    try:
        yield tmp
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def run_demo(
    work: Path,
    *,
    pause: float,
    timeout: float,
    message_format: str,
    say: Callable[[str], None],
    keep: bool = False,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run the whole pipeline once and return the summary (see ``--output json``)."""
    from streamer.embedded_metastore.server import EmbeddedMetastore
    from streamer.kafka.broker import EmbeddedBroker
    from streamer.logs import spark_log_level
    from streamer.metastore.thrift import HmsCatalog
    from streamer.source.agent import AgentConfig, SourceAgent
    from streamer.source.enrich import EnrichSettings
    from streamer.source.reader import SqlNotificationReader
    from streamer.target.job.preflight import claim
    from streamer.target.job.settings import (
        KafkaSettings,
        LayoutSettings,
        MetastoreSettings,
        ScaleSettings,
        TargetSettings,
    )
    from streamer.target.job.streaming import BatchApplier, replay_held, spark_session, start_query
    from streamer.warehouse.files import CHECKSUM_ALGORITHM
    from streamer.warehouse.warehouse import Warehouse
    from streamer.warehouse.workload import scripted_scenario

    timeline = Timeline()
    cmroot = work / "source" / "cmroot"
    source_db_url = str(work / "source" / "metastore.db")
    (work / "source").mkdir(parents=True, exist_ok=True)
    target_root = work / "target" / "warehouse"
    target_root.mkdir(parents=True, exist_ok=True)

    with contextlib.ExitStack() as stack:
        say("starting the embedded broker (Tansu) and the target metastore (Hive 2.3 from PySpark's jars)")
        broker = stack.enter_context(EmbeddedBroker(log_path=work / "broker.log"))
        metrics_urls = serve_metrics(stack) if keep else {}
        hms = EmbeddedMetastore(work_dir=work / "target" / "hms", warehouse_dir=target_root)
        hms_thread = threading.Thread(target=hms.start, name="hms-start", daemon=True)
        hms_thread.start()
        stack.callback(hms.stop)

        warehouse = Warehouse.open(
            source_db_url, root=work / "source" / "warehouse", cmroot=work / "source" / "cmroot",
            message_format=message_format, source_id=SOURCE_ID,
        )
        stack.callback(warehouse.close)

        agent = SourceAgent(
            AgentConfig(
                source_id=SOURCE_ID,
                kafka=broker.client_settings(),
                poll_interval=0.05,
                gap_settle_seconds=2.0,
                enrich=EnrichSettings(checksum_algorithm=CHECKSUM_ALGORITHM, cmroot=str(cmroot)),
            ),
            SqlNotificationReader(source_db_url),
        )
        agent.start()
        stop_agent = threading.Event()
        agent_errors: list[BaseException] = []

        def run_agent() -> None:
            try:
                agent.run(stop=stop_agent)
            except BaseException as exc:
                agent_errors.append(exc)
                log.exception("source agent stopped")

        agent_thread = threading.Thread(target=run_agent, name="source-agent", daemon=True)
        agent_thread.start()
        stack.callback(agent.close)
        stack.callback(agent_thread.join, 10)
        stack.callback(stop_agent.set)

        hms_thread.join()
        if not hms.running:
            raise click.ClickException(f"the target metastore did not start; see {hms.log_path}")
        settings = TargetSettings(
            source_id=SOURCE_ID,
            kafka=KafkaSettings(bootstrap_servers=broker.bootstrap_servers, topic=agent.config.topic_name),
            metastore=MetastoreSettings(uri=hms.uri),
            layout=LayoutSettings(
                warehouse_root=target_root.as_uri(),
                external_base_dir=(work / "target" / "external").as_uri(),
                state_dir=str(work / "target" / "state"), checkpoint_dir=str(work / "target" / "checkpoint"),
            ),
            scale=ScaleSettings(trigger_seconds=0.1),
        )
        say("starting Spark and the target job")
        # Spark's own lines only when they are errors (all of its detail under --log-level DEBUG)
        spark = spark_session(settings, app_name="streamer-demo", log_level=spark_log_level(default="ERROR"))
        stack.callback(spark.stop)  # after the query: the session goes when nothing runs on it
        catalog = HmsCatalog(hms.uri)
        stack.callback(catalog.close)
        stack.enter_context(claim(settings, catalog))  # its state dir as a job's: locked and bound
        batch_applier = BatchApplier(settings, catalog, on_applied=timeline.on_applied)
        stack.callback(batch_applier.close)  # after the query has stopped
        query = start_query(spark, settings, batch_applier)
        stack.callback(query.stop)  # stop() returns once the query and its source have stopped
        stack.callback(batch_applier.stop_reading)  # first: the running micro-batch's reading on ends
        warm_until = time.monotonic() + 120
        while batch_applier.batches == 0 and time.monotonic() < warm_until and query.isActive:
            time.sleep(0.1)  # the first micro-batch starts Spark's Python workers: not replication lag

        say("running the scripted workload on the source")
        last_id = scripted_scenario(cast(Any, PacedWarehouse(warehouse, timeline, pause, say)))

        deadline = time.monotonic() + timeout
        shown = -1
        while timeline.newest_applied() < last_id:
            if timeline.newest_applied() != shown:
                shown = timeline.newest_applied()
                say(f"waiting for the target: applied up to event {shown} of {last_id}")
            if agent_errors:
                raise click.ClickException(f"source agent failed: {agent_errors[0]}")
            if query.exception() is not None:
                raise click.ClickException(f"target job failed: {query.exception()}")
            if batch_applier.state.halts():
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        def current() -> dict[str, Any]:
            """The comparison and figures as things stand now (again after Ctrl-C under ``--keep``:
            whatever was written meanwhile counts)."""
            applied, head = timeline.newest_applied(), max(last_id, warehouse.current_event_id())
            tables = compare_tables(warehouse, spark, settings.layout.warehouse_root)
            lags = timeline.lags()
            halts = batch_applier.state.halts()
            return {
                "events_published": int(_sample_sum("streamer_source_events_published_total")),
                "events_applied": len(timeline.applied),
                "source_last_event_id": head,
                "target_last_event_id": applied,
                "tables": [
                    {"name": t.name, "source_rows": t.source_rows, "target_rows": t.target_rows,
                     "equal": t.equal}
                    for t in tables
                ],
                "equal": applied >= head and not halts and all(t.equal for t in tables),
                "lag_p50_s": _percentile(lags, 0.50),
                "lag_p99_s": _percentile(lags, 0.99),
                "bytes_copied": int(_sample_sum("streamer_target_bytes_copied_total")),
                "aborted_bytes_copied": aborted_bytes_on_target(target_root),
                "halted": {db: h.cause for db, h in halts.items()},
            }

        say(f"target applied up to event {timeline.newest_applied()} of {last_id}")
        summary = current()
        if keep:
            if not quiet:
                render(summary)
            _print_connection(broker.bootstrap_servers, hms.uri, str(target_root), settings.layout.state_dir,
                              metrics_urls, source_db_url, str(work / "source" / "warehouse"), err=quiet)
            # what `target run` does between micro-batches: a `streamer target retry` on the idle stream
            _wait_for_interrupt(tick=lambda: replay_held(batch_applier))
            say("stopping; the summary as of now:")
            summary = current()
        return summary


def aborted_bytes_on_target(root: Path) -> int:
    """Bytes in ACID directories on the target whose write ids are not committed (should be 0)."""
    from streamer.target.state.visibility import load_visibility
    from streamer.warehouse.acid import parse_dir

    visibility = load_visibility(root.as_uri(), SOURCE_ID)  # the demo's one source
    total = 0
    for directory in root.rglob("*"):
        acid_dir = parse_dir(directory.name) if directory.is_dir() else None
        if acid_dir is None:
            continue
        rel = directory.relative_to(root).parts
        if len(rel) < 3 or not rel[0].endswith(".db"):
            continue
        committed = set(visibility.write_ids(f"{rel[0][:-3]}.{rel[1]}"))
        ids = range(acid_dir.min_write_id, acid_dir.max_write_id + 1)
        if not any(i in committed for i in ids):
            total += sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())
    return total


def _sample_sum(name: str) -> float:
    total = 0.0
    for family in metrics.REGISTRY.collect():
        for sample in family.samples:
            if sample.name == name:
                total += sample.value
    return total


def serve_metrics(stack: contextlib.ExitStack) -> dict[str, str]:
    """``/metrics`` of the agent and of the target job, which run in this process: each serves its
    own role's families (as ``source run`` and ``target run`` do), on a free loopback port; stopped
    when ``stack`` closes. Returns "agent"/"target" -> URL."""
    urls: dict[str, str] = {}
    for name, role in (("agent", metrics.Role.SOURCE), ("target", metrics.Role.TARGET)):
        server = metrics.serve(metrics.MetricsEndpoint(metrics.ANY_PORT), role=role)
        assert server is not None
        stack.callback(server.server_close)
        stack.callback(server.shutdown)
        urls[name] = f"http://127.0.0.1:{server.server_port}/metrics"
    return urls


def _print_connection(
    bootstrap: str, hms_uri: str, warehouse: str, state_dir: str, metrics_urls: dict[str, str],
    source_url: str, source_root: str, *, err: bool = False,
) -> None:
    """Where everything is (on stderr under ``--output json``, whose stdout is the summary alone)."""
    click.echo(
        f"""
Everything is still running. Connect with:
  Kafka bootstrap      {bootstrap}   (topic {default_topic(SOURCE_ID)})
  agent /metrics       {metrics_urls.get("agent", "-")}
  target /metrics      {metrics_urls.get("target", "-")}
  source warehouse     {source_url}   (data under {source_root})
  write to the source  streamer warehouse --url {source_url} insert sales orders --partition dt=2024-01-04 \\
                         --rows '[{{"id": 99, "name": "new", "amount": 5.0, "ok": true}}]'
  target metastore     {hms_uri}
  target warehouse     {warehouse}
  status               streamer status --hms-uri {hms_uri} --state-dir {state_dir} \\
                         --bootstrap-servers {bootstrap} --source-id {SOURCE_ID}
  pyspark              from pyspark.sql import SparkSession
                       spark = (SparkSession.builder.enableHiveSupport()
                                .config("spark.hadoop.hive.metastore.uris", "{hms_uri}").getOrCreate())
                       spark.sql("SELECT * FROM sales.orders").show()
Press Ctrl-C to stop everything and print the comparison as of then.""",
        err=err,
    )


def _wait_for_interrupt(tick: Callable[[], object] = lambda: None) -> None:
    """Until Ctrl-C or SIGTERM, calling ``tick`` about once a second."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            try:
                tick()
            except Exception:  # a failed re-read is the job's to report; the demo keeps running
                log.exception("re-reading released events failed")
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary under the table: short lines (< 80 columns), so that none wraps."""

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f} s"

    return [
        f"events published {summary['events_published']}, applied {summary['events_applied']} "
        f"(source head {summary['source_last_event_id']}, target at {summary['target_last_event_id']})",
        f"bytes copied {summary['bytes_copied']}",
        f"lag (source commit -> visible on target): p50 {fmt(summary['lag_p50_s'])}, "
        f"p99 {fmt(summary['lag_p99_s'])}",
    ]


def render(summary: dict[str, Any], console: Any = None) -> None:
    """The table of source vs target and the summary lines (``console``: a rich Console, else stdout)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title="source vs target")
    table.add_column("table")
    table.add_column("source rows", justify="right")
    table.add_column("target rows", justify="right")
    table.add_column("equal")
    for t in summary["tables"]:
        table.add_row(t["name"], str(t["source_rows"]), str(t["target_rows"]), "yes" if t["equal"] else "NO")
    console.print(table)
    for line in summary_lines(summary):
        console.print(line, soft_wrap=True)  # one line each, however narrow the terminal
    for db, cause in summary["halted"].items():
        console.print(f"[red]database {db} halted: {cause}[/red]")
    console.print("[green]target equals source[/green]" if summary["equal"] else "[red]target differs[/red]")


@click.command("demo")
@click.option("--keep", is_flag=True, help="Leave everything running and print how to connect.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep files here instead of a temporary folder.")
@click.option("--pause", default=0.2, show_default=True, type=click.FloatRange(min=0),
              help="Seconds between workload steps, so a person can follow.")
@click.option("--timeout", default=90.0, show_default=True, type=click.FloatRange(min=1),
              help="Seconds to wait for the target to catch up.")
@click.option("--message-format", default="gzip(json-2.0)", show_default=True,
              type=click.Choice(["json-0.2", "gzip(json-2.0)"]),
              help="Hive message format the source writes.")
def demo(
    keep: bool, output: str, work_dir: Path | None, pause: float, timeout: float, message_format: str
) -> None:
    """Run broker, source warehouse, agent, target metastore and target job; compare source and target."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    quiet = output == "json"

    def say(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    with _work_dir(work_dir, keep) as work:
        summary = run_demo(
            work, pause=pause, timeout=timeout, message_format=message_format, say=say, keep=keep,
            quiet=quiet,
        )
    if output == "json":
        click.echo(json.dumps(summary))
    else:
        render(summary)
    if not summary["equal"]:
        sys.exit(1)
