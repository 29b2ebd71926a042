"""Regrouping a backlog per table (``--coalesce-backlog``) on hot tables, against markers per batch alone.

The bundled source writes a backlog on ``--tables`` partitioned tables of one database: each round,
every table in turn gets a new partition (ADD_PARTITION) and a one-file INSERT into it, and every
tenth round an ALTER of its properties: the events of one table are always apart in the stream, so
contiguous merging finds nothing and regrouping finds everything. The events are decoded, enriched
and Avro-encoded as the agent does; ``BatchApplier.process`` applies the same backlog in
micro-batches of ``--batch`` records into fresh target databases (``--db-map``) of one embedded
target metastore, alternating without and with ``coalesce_backlog`` (both with markers per batch and
the batch's table prefetch), ``--repeats`` times each; no Kafka, no Spark (bench/catchup.py measures
the whole pipeline on the default mix). Figures: events/s and metastore round trips per event
(counted in the Thrift client), the median of the repeats, and their ratio.
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
from common import emit, encode_events, exit_on_sigterm, prepared_events, quiet_logs, ratio, say

SOURCE_ID = "bench"


def _backlog(work: Path, tables: int, rounds: int) -> tuple[list[tuple[int, bytes]], int]:
    """The encoded events, and how many of them (the database and its tables) come first."""
    from streamer.events.model import Column
    from streamer.warehouse.warehouse import Warehouse
    from streamer.warehouse.workload import COLUMNS

    url = str(work / "source" / "metastore.sqlite")
    (work / "source").mkdir(parents=True, exist_ok=True)
    row = [{"id": 1, "name": "a", "amount": 1.5, "ok": True}]
    with Warehouse.open(url, root=work / "source" / "warehouse", cmroot=work / "source" / "cmroot",
                        source_id=SOURCE_ID) as wh:
        wh.create_database("hot")
        for t in range(tables):
            wh.create_table("hot", f"t{t}", COLUMNS, [Column("dt", "string")])
        setup = wh.current_event_id()
        for r in range(rounds):
            for t in range(tables):
                wh.add_partitions("hot", f"t{t}", [{"dt": f"d{r}"}])
                wh.insert("hot", f"t{t}", row, {"dt": f"d{r}"})
                if r % 10 == 9:
                    wh.alter_table_properties("hot", f"t{t}", {"bench.round": str(r)})
    return encode_events(prepared_events(url, str(work / "source" / "cmroot"))), setup


def run_regroup(work: Path, *, tables: int, rounds: int, batch: int, repeats: int) -> dict[str, Any]:
    from streamer.embedded_metastore.server import EmbeddedMetastore
    from streamer.metastore.thrift import CALLS, HmsCatalog
    from streamer.target.job.settings import (
        KafkaSettings,
        LayoutSettings,
        MetastoreSettings,
        ScaleSettings,
        TargetSettings,
    )
    from streamer.target.job.streaming import BatchApplier

    records, setup_end = _backlog(work, tables, rounds)
    setup, backlog = records[:setup_end], records[setup_end:]
    say(f"{len(backlog)} backlog events on {tables} tables, batches of {batch}")
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with EmbeddedMetastore(work_dir=work / "hms", warehouse_dir=work / "target") as hms:
        for r in range(repeats):
            for coalesce in (False, True):
                tag = f"{'on' if coalesce else 'off'}{r}"
                settings = TargetSettings(
                    source_id=SOURCE_ID,
                    kafka=KafkaSettings(bootstrap_servers="-", topic="-"),
                    metastore=MetastoreSettings(uri=hms.uri),
                    layout=LayoutSettings(
                        warehouse_root=(work / f"target-{tag}").as_uri(),
                        state_dir=str(work / f"state-{tag}"), checkpoint_dir=str(work / f"checkpoint-{tag}"),
                        db_map={"hot": f"hot_{tag}"},
                    ),
                    scale=ScaleSettings(
                        max_events_per_trigger=batch, markers_per_batch=True, coalesce_backlog=coalesce,
                    ),
                )
                with HmsCatalog(hms.uri) as catalog:
                    applier = BatchApplier(settings, catalog)
                    for i in range(0, len(setup), batch):
                        applier.process(setup[i : i + batch])
                    CALLS.reset()
                    started = time.perf_counter()
                    for i in range(0, len(backlog), batch):
                        applier.process(backlog[i : i + batch])
                    seconds = time.perf_counter() - started
                runs[coalesce].append((len(backlog) / seconds, CALLS.reset() / len(backlog)))
                rate = runs[coalesce][-1][0]
                say(f"repeat {r + 1}/{repeats}, coalesce_backlog={coalesce}: {rate:.0f} events/s")
    eps = {c: statistics.median(e for e, _ in runs[c]) for c in runs}
    calls = {c: statistics.median(k for _, k in runs[c]) for c in runs}
    return {
        "events": len(backlog),
        "tables": tables,
        "batch": batch,
        "eps_markers_per_batch": eps[False],
        "eps_coalesce_backlog": eps[True],
        "speedup": ratio(eps[True], eps[False]),
        "metastore_calls_per_event_markers_per_batch": calls[False],
        "metastore_calls_per_event_coalesce_backlog": calls[True],
        "runs": {("coalesce_backlog" if c else "markers_per_batch"): v for c, v in runs.items()},
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--tables", default=8, show_default=True, help="Hot tables the backlog writes in turn.")
@click.option("--rounds", default=60, show_default=True, help="Rounds: each table a partition and an insert.")
@click.option("--batch", default=500, show_default=True, help="Records per micro-batch.")
@click.option("--repeats", default=2, show_default=True, help="Runs of each setting (alternating); medians.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(as_json: bool, tables: int, rounds: int, batch: int, repeats: int, work_dir: Path | None) -> None:
    """Hot tables' backlog applied with --coalesce-backlog vs markers per batch alone."""
    quiet_logs()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-regroup-", dir=work_dir) as tmp:
        result = run_regroup(Path(tmp), tables=tables, rounds=rounds, batch=batch, repeats=repeats)
    emit("a hot tables' backlog regrouped per table", result, as_json)


if __name__ == "__main__":
    main()
