"""The long consistency campaign: seeded workloads, SIGKILLed agent and target, checked samples.

Starts an embedded broker and target metastore, then runs :mod:`streamer.testing.campaign`: every
workload writes ``--events`` events on its own databases while the agent and the target job are each
SIGKILLed ``--kills`` times (per workload) at random points and restarted, and readers sample the
target. Once the target caught up, every sample is judged against the source's history. Prints a
summary table (or one JSON object with ``--json``); exits 1 when the checker found violations.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import json
import logging
import shutil
import tempfile
from pathlib import Path

import click

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.kafka.broker import EmbeddedBroker
from streamer.testing.campaign import CampaignConfig, run_campaign


@click.command()
@click.option("--workloads", default=20, show_default=True, type=click.IntRange(1))
@click.option(
    "--events", default=2000, show_default=True, type=click.IntRange(1), help="Events per workload."
)
@click.option(
    "--kills",
    default=1,
    show_default=True,
    type=click.IntRange(0),
    help="SIGKILLs of the agent and of the target job, each, per workload.",
)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--readers", default=2, show_default=True, type=click.IntRange(1))
@click.option(
    "--rate",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Source events/s the workload is paced to.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep files (logs, warehouse, target) here instead of a temporary folder.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def main(
    workloads: int,
    events: int,
    kills: int,
    seed: int,
    readers: int,
    rate: float,
    work_dir: Path | None,
    as_json: bool,
) -> None:
    """Run the campaign and print workloads, events, kills, samples checked, violations, staleness."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    logging.basicConfig(
        level=logging.WARNING if as_json else logging.INFO,
        format="%(asctime)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    work = work_dir or Path(tempfile.mkdtemp(prefix="streamer-consistency-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        with (
            EmbeddedBroker(log_path=work / "broker.log") as broker,
            EmbeddedMetastore(work_dir=work / "hms", warehouse_dir=work / "hms" / "warehouse") as hms,
        ):
            result = run_campaign(
                CampaignConfig(
                    bootstrap_servers=broker.bootstrap_servers,
                    hms_uri=hms.uri,
                    work_dir=work / "campaign",
                    workloads=workloads,
                    events=events,
                    kills=kills,
                    seed=seed,
                    readers=readers,
                    rate=rate,
                    catch_up_timeout=max(600.0, workloads * events / 5),
                )
            )
    finally:
        if work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    summary = result.summary()
    if as_json:
        click.echo(json.dumps(summary))
    else:
        rows = [
            ("workloads", summary["workloads"]),
            ("events", summary["events"]),
            ("kills", f"{summary['kills']} (agent {result.agent_kills}, target {result.target_kills})"),
            ("samples checked", f"{summary['samples']} ({result.discarded} discarded: raced an apply)"),
            ("violations", f"{summary['violations']} {result.report.by_check() or ''}"),
            (
                "worst staleness",
                f"{summary['worst_staleness_s']:.1f} s ({result.report.worst_lag_events} events)",
            ),
            ("wall time", f"{result.seconds:.0f} s"),
        ]
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            click.echo(f"{key:<{width}}  {value}")
        for violation in result.report.violations[:20]:
            click.echo(str(violation))
    if summary["violations"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
