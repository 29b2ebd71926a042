"""Apply rate: events/s the target applier sustains vs raw Thrift calls on the same metastore.

The source warehouse writes, per repeat, N CREATE_TABLE, N ALTER_TABLE and N one-partition
ADD_PARTITION events (single-object), and B ADD_PARTITION events of K partitions each (bursts).
They are decoded and enriched as the agent does and Avro-encoded once; then ``BatchApplier.process``
applies them in micro-batches of ``--batch`` records against the embedded target HMS, interleaved
with the same operations made directly through ``HmsCatalog`` (the metastore's physical limit).
Kafka and Spark are left out on purpose: this isolates the apply path (see lag.py for end to end).
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from common import emit, encode_events, exit_on_sigterm, median, prepared_events, quiet_logs, ratio, say


def _source_phase(wh: Any, r: int, n: int, bursts: int, k: int) -> tuple[range, range]:
    """Write one repeat's events on the source; returns the event-id ranges (single, burst)."""
    from streamer.warehouse.workload import COLUMNS, PARTITION_KEY_SETS

    wh.create_table("app", f"p{r}", COLUMNS, PARTITION_KEY_SETS[0])
    wh.create_table("app", f"b{r}", COLUMNS, PARTITION_KEY_SETS[0])
    first = wh.current_event_id() + 1
    for i in range(n):
        wh.create_table("app", f"t{r}_{i}", COLUMNS)
    for i in range(n):
        wh.alter_table_properties("app", f"t{r}_{i}", {"bench": str(i)})
    for i in range(n):
        wh.add_partitions("app", f"p{r}", [{"dt": f"d{i}"}])
    single = range(first, wh.current_event_id() + 1)
    first = wh.current_event_id() + 1
    for b in range(bursts):
        wh.add_partitions("app", f"b{r}", [{"dt": f"d{b}_{j}"} for j in range(k)])
    return single, range(first, wh.current_event_id() + 1)


_applier_calls = {"calls": 0, "events": 0}  # metastore calls the applier made, over the measured phases


def _apply(applier: Any, records: list[tuple[int, bytes]], batch: int, *, measured: bool = True) -> float:
    from streamer.metastore.thrift import CALLS

    CALLS.reset()
    started = time.perf_counter()
    for i in range(0, len(records), batch):
        applier.process(records[i : i + batch])
    elapsed = time.perf_counter() - started
    if measured:
        _applier_calls["calls"] += CALLS.reset()
        _applier_calls["events"] += len(records)
    return elapsed


def _raw_single(catalog: Any, tbl: Any, ptbl: Any, root: Path, r: int, n: int) -> float:
    started = time.perf_counter()
    base = root / "raw.db"
    for i in range(n):
        sd = dataclasses.replace(tbl.sd, location=(base / f"t{r}_{i}").as_uri())
        catalog.create_table(dataclasses.replace(tbl, db="raw", name=f"t{r}_{i}", sd=sd))
    for i in range(n):
        current = catalog.get_table("raw", f"t{r}_{i}")
        catalog.alter_table(
            "raw",
            f"t{r}_{i}",
            dataclasses.replace(current, parameters={**current.parameters, "bench": str(i)}),
        )
    for i in range(n):
        catalog.add_partitions("raw", ptbl.name, [_partition(ptbl, base, f"d{i}")])
    return time.perf_counter() - started


def _raw_burst(catalog: Any, btbl: Any, root: Path, bursts: int, k: int) -> float:
    started = time.perf_counter()
    for b in range(bursts):
        catalog.add_partitions(
            "raw", btbl.name, [_partition(btbl, root / "raw.db", f"d{b}_{j}") for j in range(k)]
        )
    return time.perf_counter() - started


def _partition(tbl: Any, base: Path, value: str) -> Any:
    from streamer.events.model import PartitionSnapshot

    sd = dataclasses.replace(tbl.sd, location=(base / tbl.name / f"dt={value}").as_uri())
    return PartitionSnapshot(values=[value], db="raw", table=tbl.name, sd=sd)


def _raw_table(catalog: Any, tbl: Any, name: str, root: Path) -> Any:
    sd = dataclasses.replace(tbl.sd, location=(root / "raw.db" / name).as_uri())
    out = dataclasses.replace(tbl, db="raw", name=name, sd=sd)
    catalog.create_table(out)
    return out


def run_apply_rate(work: Path, *, n: int, bursts: int, k: int, repeats: int, batch: int) -> dict[str, Any]:
    from streamer.embedded_metastore.server import EmbeddedMetastore
    from streamer.metastore.thrift import HmsCatalog
    from streamer.target.job.settings import (
        KafkaSettings,
        LayoutSettings,
        MetastoreSettings,
        ScaleSettings,
        TargetSettings,
    )
    from streamer.target.job.streaming import BatchApplier
    from streamer.warehouse.warehouse import Warehouse

    root = work / "target" / "warehouse"
    cmroot = work / "source" / "cmroot"
    (work / "source").mkdir(parents=True)
    say("starting the target metastore")
    with (
        EmbeddedMetastore(work_dir=work / "hms", warehouse_dir=root) as hms,
        Warehouse.open(
            str(work / "source" / "m.db"),
            root=work / "source" / "wh",
            cmroot=cmroot,
            message_format="gzip(json-2.0)",
            source_id="bench",
        ) as wh,
        HmsCatalog(hms.uri) as raw,
        HmsCatalog(hms.uri) as target,
    ):
        wh.create_database("app")
        phases = [_source_phase(wh, r, n, bursts, k) for r in range(repeats)]
        records = dict(
            zip(
                range(1, wh.current_event_id() + 1),
                encode_events(prepared_events(str(work / "source" / "m.db"), str(cmroot))),
                strict=True,
            )
        )
        settings = TargetSettings(
            source_id="bench",
            kafka=KafkaSettings(bootstrap_servers="-", topic="-"),
            metastore=MetastoreSettings(uri=hms.uri),
            layout=LayoutSettings(
                warehouse_root=root.as_uri(), state_dir=str(work / "state"),
                checkpoint_dir=str(work / "ckpt"),
            ),
            scale=ScaleSettings(max_events_per_trigger=batch, markers_per_batch=True),
        )
        applier = BatchApplier(settings, target)
        setup = [records[i] for i in range(1, phases[0][0].start)]
        _apply(applier, setup, batch, measured=False)
        db = wh.database("app")
        raw.create_database(dataclasses.replace(db, name="raw", location=(root / "raw.db").as_uri()))
        tbl = wh.table("app", "t0_0")
        single, raw_single, burst, raw_burst = [], [], [], []
        for r, (single_ids, burst_ids) in enumerate(phases):
            say(f"repeat {r + 1}/{repeats}: {len(single_ids)} single-object events, {bursts} bursts of {k}")
            if r > 0:  # the tables of this repeat (created between the phases' ranges)
                setup_ids = range(phases[r - 1][1].stop, single_ids.start)
                _apply(applier, [records[i] for i in setup_ids], batch, measured=False)
            ptbl = _raw_table(raw, wh.table("app", f"p{r}"), f"p{r}", root)
            btbl = _raw_table(raw, wh.table("app", f"b{r}"), f"b{r}", root)
            single.append(len(single_ids) / _apply(applier, [records[i] for i in single_ids], batch))
            raw_single.append(3 * n / _raw_single(raw, tbl, ptbl, root, r, n))
            burst.append(len(burst_ids) / _apply(applier, [records[i] for i in burst_ids], batch))
            raw_burst.append(bursts / _raw_burst(raw, btbl, root, bursts, k))
        halts = applier.state.halts()
    single_eps, raw_single_eps = median(single), median(raw_single)
    burst_eps, raw_burst_eps = median(burst), median(raw_burst)
    return {
        "single_eps": single_eps,
        "raw_single_eps": raw_single_eps,
        "ratio_single": ratio(single_eps, raw_single_eps),
        "burst_eps": burst_eps,
        "raw_burst_eps": raw_burst_eps,
        "ratio_burst": ratio(burst_eps, raw_burst_eps),
        "metastore_calls_per_event": _applier_calls["calls"] / max(1, _applier_calls["events"]),
        # each repeat's applier run next to its raw run: the machine's drift between repeats cancels
        "ratio_single_paired": median(a / b for a, b in zip(single, raw_single, strict=True)),
        "ratio_burst_paired": median(a / b for a, b in zip(burst, raw_burst, strict=True)),
        "burst_partitions_per_event": k,
        "burst_partitions_per_s": burst_eps * k,
        "raw_burst_partitions_per_s": raw_burst_eps * k,
        "repeats": repeats,
        "single_events_per_repeat": 3 * n,
        "per_repeat": {
            "single_eps": single,
            "raw_single_eps": raw_single,
            "burst_eps": burst,
            "raw_burst_eps": raw_burst,
        },
        "halted": {d: h.cause for d, h in halts.items()},
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option(
    "-n",
    "--objects",
    "n",
    default=30,
    show_default=True,
    help="Per repeat: tables created, tables altered, single partitions added.",
)
@click.option("--bursts", default=3, show_default=True, help="Burst events (ADD_PARTITION) per repeat.")
@click.option("--burst-size", "k", default=50, show_default=True, help="Partitions per burst event.")
@click.option("--repeats", default=3, show_default=True, help="Repeats; medians are reported.")
@click.option("--batch", default=500, show_default=True, help="Records per micro-batch.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(as_json: bool, n: int, bursts: int, k: int, repeats: int, batch: int, work_dir: Path | None) -> None:
    """Target apply rate (BatchApplier on pre-encoded events) vs raw HMS Thrift calls, same run."""
    quiet_logs()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-apply-", dir=work_dir) as tmp:
        result = run_apply_rate(Path(tmp), n=n, bursts=bursts, k=k, repeats=repeats, batch=batch)
    emit("apply rate: applier vs raw metastore calls", result, as_json)


if __name__ == "__main__":
    main()
