"""Baseline: streamer vs state transfer (what Hive's first replication did), same workload, same HMS.

The state-transfer replicator wakes every ``--interval`` seconds, finds the tables the source
changed since its last round (from the notification log's table names), and for each one exports
its current files to a staging directory (copy 1), copies them to a fresh target directory (copy
2) and imports: drop the old target table, create it on the new directory, add its partitions.
It writes into databases ``st_<db>`` of the same target HMS that streamer writes ``<db>`` into.

For both: amplification = bytes written into the target warehouse / bytes of the data files the
source's events added (state transfer also reports it with its staging copy); lag =
replicated (streamer: applied; state transfer: round done) - source commit, per event; violations
= what ``streamer.testing.checker`` finds in samples a reader thread takes of each target while
the workload runs (order, prefix and cut checks; no ``repl.last.id`` is given, so the watermark
check is not exercised; the workload has no ACID transactions).
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import dataclasses
import hashlib
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


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _path(uri: str) -> Path:
    """A local path from ``file:/x``, ``file:///x`` or a bare path."""
    return Path(urlparse(uri).path if uri.startswith("file:") else uri)


def _visible_files(location: str | None) -> list[tuple[str, str]]:
    if not location:
        return []
    base = _path(location)
    if not base.is_dir():
        return []
    out = []
    for path in base.rglob("*"):
        rel = path.relative_to(base).as_posix()
        if path.is_file() and not any(s.startswith((".", "_")) for s in rel.split("/")):
            out.append((rel, _sha(path)))
    return out


def sample(catalog: Any, reader: str, prefix: str) -> Any:
    """One reader's view of a target: every replicated table's metadata and visible files."""
    from streamer.hive.files import partition_name
    from streamer.testing import Sample, observe, table_key

    tables: dict[str, Any] = {}
    for db in catalog.list_databases():
        if (prefix and not db.startswith(prefix)) or (not prefix and db.startswith(OWN_DBS)):
            continue
        source_db = db.removeprefix(prefix)
        for name in catalog.list_tables(db):
            snap = catalog.get_table(db, name)
            if snap is None:
                continue
            files: dict[str, list[tuple[str, str]]] = {}
            if snap.table_type != "VIRTUAL_VIEW":
                if snap.partition_keys:
                    keys = [c.name for c in snap.partition_keys]
                    for part in catalog.list_partitions(db, name):
                        files[partition_name(keys, part.values)] = _visible_files(part.sd.location)
                else:
                    files[""] = _visible_files(snap.sd.location)
            tables[table_key(source_db, name)] = observe(snap, files)
    return Sample(reader=reader, wall_time=time.time(), applied_event_ids={}, tables=tables)


class StateTransfer:
    """Export changed tables to staging, copy, import: Hive's bootstrap-style replication in a loop."""

    def __init__(self, p: Pipeline, interval: float) -> None:
        from streamer.target.hms_catalog import HmsCatalog

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
    work: Path, *, events: int, rate: float, interval: float, sample_every: float
) -> dict[str, Any]:
    from streamer.testing import History, check
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
        samples: dict[str, list[Any]] = {"streamer": [], "state_transfer": []}
        stop_sampling = threading.Event()

        def sampler(name: str, prefix: str) -> None:
            from streamer.target.hms_catalog import HmsCatalog

            with HmsCatalog(p.hms.uri) as cat:
                while not stop_sampling.wait(sample_every):
                    try:
                        samples[name].append(sample(cat, name, prefix))
                    except Exception as exc:  # a table vanished between list and read: not a sample
                        say(f"{name} sample skipped: {exc}")

        threads = [
            threading.Thread(target=sampler, args=a, daemon=True)
            for a in (("streamer", ""), ("state_transfer", ST))
        ]
        for t in [st_thread, *threads]:
            t.start()
        bytes0 = metric_sum("streamer_target_bytes_copied_total")
        workload = Workload(p.warehouse, seed=5)
        say(f"workload: {events} events at {rate} events/s; state transfer every {interval}s")
        start = p.warehouse.current_event_id()
        first = start + 1
        t0 = time.time()
        while p.warehouse.current_event_id() - start < events:
            p.commit(workload.run, 1)
            time.sleep(max(0.0, t0 + (p.warehouse.current_event_id() - start) / rate - time.time()))
        last = p.warehouse.current_event_id()
        caught_up = p.wait_applied(last, 180)
        st.stop.set()
        st_thread.join(120)
        time.sleep(2 * sample_every)
        stop_sampling.set()
        for t in threads:
            t.join(30)
        rows = p.warehouse.notifications()
        history = History.from_rows(rows, "bench")
        ids = range(first, last + 1)
        changed_bytes = sum(changed.values())
        st_lags = [
            st.done[i] - p.stages.committed[i] for i in ids if i in st.done and i in p.stages.committed
        ]
        out: dict[str, Any] = {}
        for name, lags, copied in (
            ("streamer", p.stages.lags(ids), metric_sum("streamer_target_bytes_copied_total") - bytes0),
            ("state_transfer", st_lags, st.bytes_copied),
        ):
            report = check(history, samples[name])
            out[name] = {
                "amplification": ratio(copied, changed_bytes),
                "lag_p50_s": percentile(lags, 0.5),
                "lag_p99_s": percentile(lags, 0.99),
                "violations": len(report.violations),
                "violations_by_check": report.by_check(),
                "samples": len(samples[name]),
                "bytes_copied": copied,
                "worst_staleness_s": report.worst_staleness_s,
                "first_violations": [str(v) for v in report.violations[:3]],
            }
        out["state_transfer"]["export_bytes"] = st.export_bytes
        both = st.bytes_copied + st.export_bytes
        out["state_transfer"]["amplification_with_export"] = ratio(both, changed_bytes)
        out["state_transfer"]["rounds"] = st.rounds
        out["state_transfer"]["round_errors"] = len(st.errors)
        out["state_transfer"]["first_errors"] = st.errors[:3]
        out["streamer"]["caught_up"] = caught_up
        out["events"] = last - first + 1
        out["changed_bytes"] = changed_bytes
        st.catalog.close()
        return out


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--events", default=200, show_default=True, help="Workload events.")
@click.option("--rate", default=4.0, show_default=True, help="Workload events/s.")
@click.option("--interval", default=5.0, show_default=True, help="Seconds between state-transfer rounds.")
@click.option("--sample-every", default=0.5, show_default=True, help="Seconds between reader samples.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def main(
    as_json: bool, events: int, rate: float, interval: float, sample_every: float, work_dir: Path | None
) -> None:
    """Streamer vs an in-bench state-transfer replicator: amplification, lag, checker violations."""
    quiet_logs()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-baseline-", dir=work_dir) as tmp:
        result = run_baseline(
            Path(tmp), events=events, rate=rate, interval=interval, sample_every=sample_every
        )
    emit("baseline: streamer vs state transfer", result, as_json)


if __name__ == "__main__":
    main()
