"""A real writer replicated end to end: Spark SQL with Hive support (Hive 2.3's client, conversions
off so Spark uses Hive's write path) writes Parquet and TEXTFILE Hive tables through an embedded
source metastore that logs its changes; the agent (``--hms-uri``) publishes, ``streamer target run``
applies. The scenario is the writer test's (``tests/integration/writers/scenario.py``): INSERT INTO,
INSERT OVERWRITE of a table, of a static partition, dynamic partitions created and overwritten,
INSERTs writing no rows, an overwrite published after a rename of its table and one after a drop of
its partition; paced, each statement published and applied before the next. Then, with Spark's
default conversion on, writes that log no INSERT: a datasource table (``USING parquet``, partitioned
and not) and a Hive Parquet table, which the target replicates by state (its directory sync every
``SYNC_SECONDS``); their steps last until the replica converged.

Prints per table whether both sides hold the same rows (the replica's read from its files),
partitions and files, and which of the replica's locations are not its own (``outside_target``), how
many tables the target replicates by state, which INSERT events the writer logged without files
(every overwrite: the agent lists those) and how each was published, and the seconds of each step.
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
from common import emit, exit_on_sigterm, lag_stats, quiet_logs, say

ROOT = str(Path(__file__).resolve().parents[1])


def measure(work: Path) -> dict[str, Any]:
    if ROOT not in sys.path:
        sys.path.append(ROOT)  # the scenario lives with the writer test
    from streamer.embedded_metastore.server import EmbeddedMetastore
    from streamer.events.model import InsertPayload
    from streamer.kafka.broker import EmbeddedBroker
    from tests.integration.writers.scenario import run

    began = time.monotonic()
    with EmbeddedBroker(log_path=work / "tansu.log") as broker, \
            EmbeddedMetastore(work_dir=work / "source", notifications=True) as source, \
            EmbeddedMetastore(work_dir=work / "target-hms") as target:
        say(f"services up after {time.monotonic() - began:.0f} s; writing")
        outcome = run(broker.client_settings(), broker.bootstrap_servers, source, target, work, check=False)
    file_less = []
    for event_id, table, with_files in outcome.inserts:
        if with_files:
            continue
        p = outcome.published.get(event_id)
        file_less.append({
            "event_id": event_id, "table": table,
            "published_as": "replace" if isinstance(p, InsertPayload) and p.replace else "as logged",
            "files": len(p.files) if isinstance(p, InsertPayload) else None,
        })
    return {
        "tables": outcome.tables,
        "equal": not outcome.diverged,
        "diverged": outcome.diverged,
        "tables_synced_by_state": outcome.by_state,
        "insert_events": len(outcome.inserts),
        "file_less_inserts": file_less,
        "steps": len(outcome.seconds),
        "step_seconds": lag_stats(outcome.seconds),
        "seconds": round(time.monotonic() - began, 1),
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the services' files here (default: a temporary directory).")
def main(as_json: bool, work_dir: Path | None) -> None:
    """Spark SQL writes replicated: per-table results (rows, partitions, files) on both sides."""
    exit_on_sigterm()
    quiet_logs()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="streamer-bench-writer-") as tmp:
        work = (work_dir or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        result = measure(work)
    emit("Spark SQL writes replicated", result, as_json)
    sys.exit(0 if result["equal"] else 1)


if __name__ == "__main__":
    main()
