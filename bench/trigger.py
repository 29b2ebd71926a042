"""Kafka -> micro-batch lag of the `streamer_kafka` source alone, per reader, in one Spark session.

A transactional producer commits one small record every ``--interval`` seconds; a streaming query
on the topic (``foreachBatch`` that only notes the time) runs with each reader in turn, in the
same session and the same minute, so the two readers are compared under the same load. Lag = the
record's first sight in ``foreachBatch`` - its producer commit. No metastore, no apply: this is the
Kafka read and Spark trigger part of ``lag.py``'s "publish + Kafka + trigger". Each reader gets a
warm-up record first (the first micro-batch starts Spark's Python workers).
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from common import emit, exit_on_sigterm, lag_stats, quiet_logs, say

PHASES = ("latestOffset", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def run_reader(spark: Any, config: dict[str, Any], work: Path, reader: str, n: int, interval: float,
               wait_s: float) -> dict[str, Any]:
    from confluent_kafka import Producer

    from streamer.kafka.topics import ensure_topic

    topic = f"bench-trigger-{reader}-{time.time_ns()}"
    ensure_topic(config, topic)
    seen: dict[bytes, float] = {}

    def sink(df: Any, batch_id: int) -> None:
        now = time.time()
        for row in df.select("value").collect():
            seen.setdefault(bytes(row.value), now)

    query = (
        spark.readStream.format("streamer_kafka")
        .option("bootstrap.servers", config["bootstrap.servers"])
        .option("topic", topic)
        .option("reader", reader)
        .option("waitMs", str(round(wait_s * 1000)))
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(work / topic))
        # as the target job does: the driver reader waits inside the trigger, the task reader polls
        .trigger(processingTime=f"{0 if reader == 'driver' else wait_s} seconds")
        .start()
    )
    producer = Producer({**config, "enable.idempotence": True, "transactional.id": topic})
    producer.init_transactions(10)
    committed: dict[bytes, float] = {}
    try:
        for i in range(n + 1):
            value = f"r{i}".encode()
            producer.begin_transaction()
            producer.produce(topic, value)
            producer.commit_transaction(10)
            committed[value] = time.time()
            if i == 0:  # warm-up: wait for the first micro-batch
                deadline = time.monotonic() + 180
                while value not in seen and time.monotonic() < deadline and query.isActive:
                    time.sleep(0.05)
                continue
            time.sleep(interval)
        deadline = time.monotonic() + 30
        while len(seen) < len(committed) and time.monotonic() < deadline and query.isActive:
            time.sleep(0.05)
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0][1:]  # not the warm-up
    finally:
        query.stop()
    lags = [seen[v] - t for v, t in committed.items() if v in seen and v != b"r0"]
    return {
        **lag_stats(lags),
        "records": n,
        "missing": n - len(lags),
        "spark_trigger_ms": {
            phase: statistics.median(p["durationMs"].get(phase, 0) for p in progress) for phase in PHASES
        }
        if progress
        else {},
        "load_average": os.getloadavg()[0],
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("-n", "--records", default=40, show_default=True, help="Records per reader (after a warm-up).")
@click.option("--interval", default=0.25, show_default=True, help="Seconds between records.")
@click.option(
    "--wait-seconds",
    default=0.1,
    show_default=True,
    help="Driver reader: longest wait of an idle micro-batch; task reader: trigger interval.",
)
@click.option(
    "--readers",
    default="task,driver,task,driver",
    show_default=True,
    help="Readers to run, in order (alternating spreads the machine's drift over both).",
)
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(as_json: bool, records: int, interval: float, wait_seconds: float, readers: str,
         work_dir: Path | None) -> None:
    """Kafka -> foreachBatch lag of the streamer_kafka source, per reader (task vs driver)."""
    quiet_logs()
    exit_on_sigterm()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if os.sep in os.environ["PYSPARK_PYTHON"]:
        os.environ["PYSPARK_PYTHON"] = os.path.abspath(os.environ["PYSPARK_PYTHON"])
    from pyspark.sql import SparkSession

    from streamer.kafka.broker import EmbeddedBroker
    from streamer.kafka.spark_source import register

    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-trigger-", dir=work_dir) as tmp:
        work = Path(tmp)
        os.chdir(work)  # Spark's Python workers put their working directory first on sys.path
        with EmbeddedBroker(log_path=work / "broker.log") as broker:
            spark = (
                SparkSession.builder.master("local[2]")
                .appName("streamer-bench-trigger")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            register(spark)
            try:
                for reader in readers.split(","):
                    say(f"reader {reader}: {records} records, one every {interval}s")
                    config = broker.client_settings()
                    runs.setdefault(reader, []).append(
                        run_reader(spark, config, work, reader, records, interval, wait_seconds)
                    )
            finally:
                spark.stop()
    result: dict[str, Any] = {
        reader: {"p50_s": statistics.median(r["p50_s"] for r in rs if r["p50_s"] is not None), "runs": rs}
        for reader, rs in runs.items()
    }
    emit("trigger: Kafka commit -> foreachBatch, per reader", result, as_json)


if __name__ == "__main__":
    main()
