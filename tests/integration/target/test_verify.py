"""``streamer verify`` and ``--verify-every`` on the embedded stack: bundled warehouse -> agent ->
Tansu -> ``streamer target run`` -> target HMS + files, then drift made behind streamer's back.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from pyspark.sql import SparkSession

from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.thrift import HmsCatalog
from tests.integration.target.helpers import (
    STREAMER,
    Source,
    TargetStack,
    mixed_workload,
    wait_converged,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def run_verify(stack: TargetStack, broker: EmbeddedBroker, source: Source, *extra: str) -> tuple[int, Any]:
    """``streamer verify --output json``: (exit code, parsed report)."""
    done = subprocess.run(
        [STREAMER, "verify", "--hms-uri", stack.hms.uri, "--state-dir", str(stack.state_dir),
         "--bootstrap-servers", broker.bootstrap_servers, "--source-id", source.source_id,
         "--topic", source.topic, "--warehouse-root", stack.warehouse_root.as_uri(),
         "--external-base-dir", stack.external_base.as_uri(), "--output", "json", *extra],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode in (0, 1), f"exit {done.returncode}: {done.stderr[-3000:]}"
    return done.returncode, json.loads(done.stdout)


def kinds(report: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for d in report["drifts"]:
        out.setdefault(d["kind"], set()).add(d["object"])
    return out


def local(location: str) -> Path:
    return Path(unquote(urlsplit(location).path))


@dataclasses.dataclass
class Victim:
    """A partitioned managed table of the replica with files in two partitions."""

    db: str
    table: str
    dropped: list[str]  # values of the partition to drop
    files: list[Path]  # data files of the other partition


def make_victim(source: Source, db: str) -> None:
    from streamer.events.model import Column
    from streamer.warehouse.workload import COLUMNS

    wh = source.publishing()
    wh.create_table(db, "victim", COLUMNS, [Column("dt", "string")])
    rows = [{"id": i, "name": f"n{i}", "amount": i * 1.5, "ok": i % 2 == 0} for i in range(6)]
    wh.insert(db, "victim", rows, {"dt": "2024-03-01"}, n_files=2)
    wh.insert(db, "victim", rows, {"dt": "2024-03-02"}, n_files=2)


def find_victim(catalog: HmsCatalog, db: str) -> Victim:
    parts = {tuple(p.values): p for p in catalog.list_partitions(db, "victim")}
    files = sorted(p for p in local(parts[("2024-03-02",)].sd.location or "/none").glob("*")
                   if p.is_file() and not p.name.startswith((".", "_")))
    assert len(files) == 2, files
    return Victim(db, "victim", ["2024-03-01"], files)


def test_verify_finds_each_kind_of_drift_repairs_files_and_ignores_a_source_that_moved_on(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    prefix: str,
) -> None:
    started = time.monotonic()
    stack = target_stack
    mixed_workload(source.publishing(), prefix, 40, seed=31)
    make_victim(source, f"{prefix}a")
    job = TargetInProcess(stack, broker.bootstrap_servers, source, extra=["--verify-every", "1"],
                          spark=spark).start()
    target_jobs.append(job)
    wait_converged(job, source)
    converged = time.time()
    dbs = sorted(source.last_ids())

    # continuous: the job verifies itself between micro-batches; a file deleted behind its back
    # shows in the metrics, and disappears from them once the file is back
    job.wait_for(lambda: job.metric("streamer_verify_last_run_timestamp_seconds") > converged,
                 "a verification after convergence", 120)
    assert job.metric("streamer_verify_drift_objects") == 0
    with stack.catalog() as catalog:
        victim = find_victim(catalog, f"{prefix}a")
    saved = victim.files[0].read_bytes()
    victim.files[0].unlink()
    job.wait_for(lambda: job.metric("streamer_verify_drift_objects", db=victim.db, kind="file") == 1,
                 "the deleted file in streamer_verify_drift_objects", 120)
    victim.files[0].write_bytes(saved)
    job.wait_for(lambda: job.metric("streamer_verify_drift_objects") == 0, "no drift once restored", 120)
    job.stop()

    # the source moves on while the target is stopped: not drift, the replica is judged at its own id
    stopped_at = stack.applied_ids(dbs)
    mixed_workload(source.publishing(), prefix, 20, seed=32)
    assert stack.applied_ids(dbs) == stopped_at
    code, report = run_verify(stack, broker, source)
    assert code == 0 and report["ok"], report["drifts"][:10]
    assert {r["db"] for r in report["databases"]} >= set(dbs)
    assert sum(r["later_source_events"] for r in report["databases"]) > 0
    assert sum(r["compared"]["files"] for r in report["databases"]) >= 10

    # drift behind streamer's back: a file deleted, one corrupted, a table parameter, a partition
    deleted, corrupted = victim.files[0], victim.files[1]
    deleted.unlink()
    corrupted.write_bytes(corrupted.read_bytes() + b"tampered\n")
    with stack.catalog() as catalog:
        table = catalog.get_table(victim.db, victim.table)
        assert table is not None
        changed = dataclasses.replace(table, parameters={**table.parameters, "owner.note": "by hand"})
        catalog.alter_table(victim.db, victim.table, changed)
        catalog.drop_partitions(victim.db, victim.table, [victim.dropped])
    code, report = run_verify(stack, broker, source)
    found = kinds(report)
    assert code == 1
    assert set(found) == {"file", "checksum", "parameters", "partition"}, report["drifts"]
    assert any(o.endswith(deleted.name) for o in found["file"])
    assert any(o.endswith(corrupted.name) for o in found["checksum"])
    assert found["parameters"] == {f"{victim.db}.{victim.table}"}
    assert len(found["partition"]) == 1

    # --repair re-copies the two files (verified), and reports the metadata drift it leaves alone
    code, repaired = run_verify(stack, broker, source, "--repair")
    assert code == 1 and len(repaired["repaired"]) == 2, repaired
    assert deleted.exists() and not corrupted.read_bytes().endswith(b"tampered\n")
    code, after = run_verify(stack, broker, source)
    assert code == 1 and set(kinds(after)) == {"parameters", "partition"}, after["drifts"]
    text = subprocess.run(
        [STREAMER, "verify", "--hms-uri", stack.hms.uri, "--state-dir", str(stack.state_dir),
         "--bootstrap-servers", broker.bootstrap_servers, "--source-id", source.source_id,
         "--topic", source.topic, "--db", victim.db],
        capture_output=True, text=True, timeout=180,
    )
    assert text.returncode == 1 and "parameters" in text.stdout and "drifted object(s)" in text.stdout
    print(f"\nverify end to end: {time.monotonic() - started:.1f} s")
