"""Baseline: streamer vs state transfer (what Hive's first replication did), same workload, same HMS.

The state-transfer replicator wakes every ``--interval`` seconds, finds the tables the source
changed since its last round (from the notification log's table names), and for each one exports
its current files to a staging directory (copy 1), copies them to a fresh target directory (copy
2) and imports: drop the old target table, create it on the new directory, add its partitions.
It writes into databases ``st_<db>`` of the same target HMS that streamer writes ``<db>`` into.

For both: amplification = bytes written into the target warehouse / bytes of the data files the
source's events added (state transfer also reports it with its staging copy); lag =
replicated (streamer: applied; state transfer: round done) - source commit, per event.

Violations: each target is sampled while the workload runs by ``streamer.testing.sampler.Sampler``
readers (the crash campaign's protocol: ``repl.last.id`` of the sampled databases read before and
after two collects of a few tables; a sample whose readings differ raced an apply and is discarded,
never judged) and judged offline by ``streamer.testing.checker.check`` against the source's history.
Streamer is judged on every check (phantom, prefix, cut, monotonic, watermark). The state transfer
advertises no progress (its databases carry no ``repl.last.id``), so its samples have no watermark
and only bracket by the double collect; they are renamed to source names (``st_db.t`` -> ``db.t``)
and judged on what it can promise per table: phantom, prefix and monotonic (its ``cut`` findings,
tables of different rounds side by side, are counted under ``not_judged``).
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import dataclasses
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import click
from common import (
    Pipeline,
    emit,
    exit_on_sigterm,
    file_refs,
    metric_sum,
    percentile,
    quiet_logs,
    ratio,
    ref_size,
    say,
)

ST = "st_"
OWN_DBS = ("raw_", ST, "bench_template", "default")


def _path(uri: str) -> Path:
    """A local path from ``file:/x``, ``file:///x`` or a bare path."""
    return Path(urlparse(uri).path if uri.startswith("file:") else uri)


def renamed_sample(sample: Any, prefix: str) -> Any:
    """A state-transfer sample in source names: ``st_db.t`` -> ``db.t``, and no watermark (it has
    none: its databases carry no ``repl.last.id``), so the checker judges the tables alone."""
    from streamer.testing import Sample

    tables = {k.removeprefix(prefix): v for k, v in sample.tables.items()}
    return Sample(sample.reader, sample.wall_time, {}, tables, sample.source_head_event_id)


def judged(report: Any, checks: tuple[str, ...]) -> tuple[list[Any], dict[str, int]]:
    """The violations of ``checks`` and, by check, the count of those left out."""
    kept = [v for v in report.violations if v.check in checks]
    left: dict[str, int] = {}
    for v in report.violations:
        if v.check not in checks:
            left[v.check] = left.get(v.check, 0) + 1
    return kept, left


class StateTransfer:
    """Export changed tables to staging, copy, import: Hive's bootstrap-style replication in a loop."""

    def __init__(self, p: Pipeline, interval: float) -> None:
        from streamer.metastore.thrift import HmsCatalog

        self.p = p
        self.interval = interval
        self.catalog = HmsCatalog(p.hms.uri)
        self.root = p.work / "st" / "warehouse"
        self.staging = p.work / "st" / "staging"
        self.bytes_copied = 0  # written into the target's warehouse (import)
        self.export_bytes = 0  # written into the staging directory (export)
        self.last_id = p.warehouse.current_event_id()
        self.done: dict[int, float] = {}  # event id -> round finished
        self.rounds = 0
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.wh: Any = None  # opened in the replicator's thread: sqlite objects stay in one thread

    def run(self) -> None:
        from streamer.warehouse.warehouse import Warehouse

        self.wh = Warehouse.open(self.p.source_url)
        try:
            while not self.stop.wait(self.interval):
                self._round_logged()
            self._round_logged()
        finally:
            self.wh.close()

    def _round_logged(self) -> None:
        try:
            self.round()
        except Exception as exc:  # a bug here must show in the figures, not kill the replicator
            self.errors.append(f"round {self.rounds}: {exc!r}")

    def round(self) -> None:
        rows = self.wh.notifications(after=self.last_id)
        if not rows:
            return
        changed = sorted({(r.db_name, r.table_name or "") for r in rows if r.db_name})
        for db, table in changed:
            try:
                self._replicate(db, table)
            except Exception as exc:  # a table changed under the export: the next round retries it
                self.errors.append(f"{db}.{table}: {exc}")
        now = time.time()
        for r in rows:
            self.done[r.event_id] = now
        self.last_id = rows[-1].event_id
        self.rounds += 1

    def _replicate(self, db: str, table: str | None) -> None:
        from streamer.warehouse.errors import WarehouseError

        target_db = ST + db
        dbs = self.wh.databases()
        snap = files = parts = None
        if db in dbs and table and table in self.wh.tables(db):
            snap = self.wh.table(db, table)
            files = self.wh.files(db, table) if snap.table_type != "VIRTUAL_VIEW" else []
            parts = self.wh.partition_snapshots(db, table) if snap.partition_keys else []
        if self.catalog.get_database(target_db) is None and db in dbs:
            try:
                source_db = self.wh.database(db)
            except WarehouseError:
                return
            self.catalog.create_database(
                dataclasses.replace(
                    source_db, name=target_db, location=(self.root / f"{target_db}.db").as_uri()
                )
            )
        if db not in dbs:  # the database was dropped: drop its copy
            if self.catalog.get_database(target_db) is not None:
                for name in self.catalog.list_tables(target_db):
                    self.catalog.drop_table(target_db, name)
                self.catalog.drop_database(target_db)
            return
        for name in self.catalog.list_tables(target_db):  # dropped or renamed away
            if name not in self.wh.tables(db):
                self.catalog.drop_table(target_db, name)
        if not table or snap is None:
            return
        stamp = f"{self.rounds:05d}"
        stage = self.staging / stamp / db / table
        new_dir = self.root / f"{target_db}.db" / table / f"v{stamp}"
        for ref in files or []:
            src = _path(ref.uri)
            rel = Path(ref.partition or "") / (ref.subdir or "") / src.name
            for dst_root in (stage, new_dir):  # export, then import
                dst = dst_root / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src if dst_root == stage else stage / rel, dst)
                if dst_root == stage:
                    self.export_bytes += dst.stat().st_size
                else:
                    self.bytes_copied += dst.stat().st_size
        shutil.rmtree(self.staging / stamp, ignore_errors=True)
        if self.catalog.get_table(target_db, table) is not None:
            self.catalog.drop_table(target_db, table)
        location = new_dir.as_uri() if snap.table_type != "VIRTUAL_VIEW" else None
        new_dir.mkdir(parents=True, exist_ok=True)
        sd = dataclasses.replace(snap.sd, location=location)
        self.catalog.create_table(dataclasses.replace(snap, db=target_db, sd=sd))
        if parts:
            keys = [c.name for c in snap.partition_keys]
            from streamer.hive.files import partition_name

            self.catalog.add_partitions(
                target_db,
                table,
                [
                    dataclasses.replace(
                        part,
                        db=target_db,
                        sd=dataclasses.replace(
                            part.sd, location=(new_dir / partition_name(keys, part.values)).as_uri()
                        ),
                    )
                    for part in parts
                ],
            )


def run_baseline(
    work: Path, *, events: int, rate: float, interval: float, sample_every: float, readers: int
) -> dict[str, Any]:
    from streamer.metastore.thrift import HmsCatalog
    from streamer.testing import History, check
    from streamer.testing.checker import CHECKS, MONOTONIC, PHANTOM, PREFIX
    from streamer.testing.sampler import Sampler
    from streamer.warehouse.workload import Workload

    with Pipeline(work) as p:
        p.start_target()
        changed: dict[tuple[str, str | None], int] = {}
        p.on_applied_hooks.append(
            lambda event, now: changed.update(
                {(r.uri, r.checksum): ref_size(r) for r in file_refs(event.payload)}
            )
        )
        st = StateTransfer(p, interval)
        st_thread = threading.Thread(target=st.run, name="state-transfer", daemon=True)
        scope: list[str] = []  # the workload's databases, refreshed by this thread (sqlite stays here)
        samplers = {
            "streamer": Sampler(
                lambda: HmsCatalog(p.hms.uri), lambda: list(scope), readers=readers,
                interval=sample_every, seed=1, warehouse_root=p.target_root.as_uri(),
            ),
            "state_transfer": Sampler(
                lambda: HmsCatalog(p.hms.uri), lambda: [ST + db for db in scope], readers=readers,
                interval=sample_every, seed=2,
            ),
        }
        st_thread.start()
        for sampler in samplers.values():
            sampler.start()
        bytes0 = metric_sum("streamer_target_bytes_copied_total")
        workload = Workload(p.warehouse, seed=5)
        say(f"workload: {events} events at {rate} events/s; state transfer every {interval}s")
        start = p.warehouse.current_event_id()
        first = start + 1
        t0 = time.time()
        while p.warehouse.current_event_id() - start < events:
            p.commit(workload.run, 1)
            scope[:] = [d.lower() for d in p.warehouse.databases() if not d.startswith(OWN_DBS)]
            time.sleep(max(0.0, t0 + (p.warehouse.current_event_id() - start) / rate - time.time()))
        last = p.warehouse.current_event_id()
        say(f"workload done ({last - start} events); waiting for both targets")
        caught_up = p.wait_applied(last, 180)
        st.stop.set()
        st_thread.join(120)
        time.sleep(4 * sample_every)  # a few samples of the final states
        taken = {name: s.stop() for name, s in samplers.items()}
        rows = p.warehouse.notifications()
        history = History.from_rows(rows, "bench", txn_writes=p.warehouse.txn_write_rows)
        ids = range(first, last + 1)
        changed_bytes = sum(changed.values())
        st_lags = [
            st.done[i] - p.stages.committed[i] for i in ids if i in st.done and i in p.stages.committed
        ]
        out: dict[str, Any] = {}
        for name, lags, copied, samples, checks in (
            ("streamer", p.stages.lags(ids), metric_sum("streamer_target_bytes_copied_total") - bytes0,
             taken["streamer"], CHECKS),
            ("state_transfer", st_lags, st.bytes_copied,
             [renamed_sample(s, ST) for s in taken["state_transfer"]], (PHANTOM, PREFIX, MONOTONIC)),
        ):
            report = check(history, samples)
            violations, not_judged = judged(report, checks)
            out[name] = {
                "amplification": ratio(copied, changed_bytes),
                "lag_p50_s": percentile(lags, 0.5),
                "lag_p99_s": percentile(lags, 0.99),
                "violations": len(violations),
                "violations_by_check": {c: n for c, n in report.by_check().items() if c in checks},
                "checks": ",".join(checks),
                "samples": len(samples),
                "samples_discarded": samplers[name].discarded,
                "sampler_errors": len(samplers[name].errors),
                "first_sampler_errors": samplers[name].errors[:3],
                "bytes_copied": copied,
                "worst_staleness_s": report.worst_staleness_s,
                "first_violations": [_evidence(v, samples[v.sample]) for v in violations[:5]],
            }
            if not_judged:
                out[name]["not_judged"] = not_judged
        out["state_transfer"]["export_bytes"] = st.export_bytes
        both = st.bytes_copied + st.export_bytes
        out["state_transfer"]["amplification_with_export"] = ratio(both, changed_bytes)
        out["state_transfer"]["rounds"] = st.rounds
        out["state_transfer"]["round_errors"] = len(st.errors)
        out["state_transfer"]["first_errors"] = st.errors[:3]
        out["streamer"]["caught_up"] = caught_up
        out["streamer"]["events_coalesced"] = metric_sum("streamer_target_events_coalesced_total")
        out["events"] = last - first + 1
        out["changed_bytes"] = changed_bytes
        st.catalog.close()
        return out


def _evidence(violation: Any, sample: Any) -> str:
    """A violation with what a reader needs to dig: when, and the watermarks the sample was taken at."""
    return (
        f"{violation} (wall {sample.wall_time:.3f}, repl.last.id {dict(sample.applied_event_ids)}, "
        f"tables {sorted(sample.tables)})"
    )


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--events", default=200, show_default=True, help="Workload events.")
@click.option("--rate", default=2.5, show_default=True, help="Workload events/s.")
@click.option("--interval", default=5.0, show_default=True, help="Seconds between state-transfer rounds.")
@click.option("--sample-every", default=0.25, show_default=True, help="Seconds between a reader's samples.")
@click.option("--readers", default=1, show_default=True, help="Sampler readers per target.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(
    as_json: bool,
    events: int,
    rate: float,
    interval: float,
    sample_every: float,
    readers: int,
    work_dir: Path | None,
) -> None:
    """Streamer vs an in-bench state-transfer replicator: amplification, lag, checker violations."""
    quiet_logs()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-baseline-", dir=work_dir) as tmp:
        result = run_baseline(
            Path(tmp), events=events, rate=rate, interval=interval, sample_every=sample_every,
            readers=readers,
        )
    emit("baseline: streamer vs state transfer", result, as_json)


if __name__ == "__main__":
    main()
