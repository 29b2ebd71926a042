"""``streamer verify --against-source`` on the embedded stack: the replica against the live bundled
warehouse (its metastore and files), for divergences the events themselves carry.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamer import metrics
from streamer.kafka.broker import EmbeddedBroker
from streamer.target.dr.source_check import SourceConnection, check_against_source
from streamer.target.dr.verify import VerifySettings
from tests.integration.target.helpers import (
    Source,
    TargetStack,
    mixed_workload,
    wait_converged,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob
from tests.integration.target.test_verify import find_victim, local, make_victim

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TAMPER = b"tampered\n"


def _droppable(source: Source, db: str) -> str:
    """A table of ``db`` other than the victim with data files, neither a view nor transactional."""
    for name in sorted(source.warehouse.tables(db)):
        snap = source.warehouse.table(db, name)
        if name != "victim" and snap.sd.location and snap.table_type != "VIRTUAL_VIEW" and (
                snap.parameters.get("transactional", "").lower() != "true"):
            return name
    raise AssertionError(f"no plain table in {db}")


def gauge(db: str, kind: str) -> float:
    return float(metrics.VERIFY_SOURCE_DRIFT_OBJECTS.labels(db=db, kind=kind)._value.get())


def test_against_source_finds_what_the_events_carry_repairs_it_and_ignores_tables_the_source_moved(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    prefix: str,
) -> None:
    started = time.monotonic()
    stack = target_stack
    db = f"{prefix}a"
    mixed_workload(source.publishing(), prefix, 12, seed=41)
    make_victim(source, db)
    wh = source.publishing()
    wh.insert(db, "victim", [{"id": 9, "name": "m", "amount": 1.0, "ok": True}], {"dt": "2024-03-03"})
    job = TargetInProcess(stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    wait_converged(job, source)
    job.stop()

    settings = VerifySettings(
        hms_uri=stack.hms.uri, state_dir=str(stack.state_dir), bootstrap_servers=broker.bootstrap_servers,
        topic=source.topic, source_id=source.source_id, warehouse_root=stack.warehouse_root.as_uri(),
        external_base_dir=stack.external_base.as_uri(),
    )
    conn = SourceConnection(notification_db=source.agent.reader.url)  # type: ignore[attr-defined]

    in_sync = check_against_source(settings, conn)
    assert in_sync.ok, in_sync.render()
    assert db in {r.db for r in in_sync.databases}
    assert sum(r.counts.files for r in in_sync.databases) >= 10

    # behind streamer's back: a file written into a source partition without any event (as a
    # datasource write does), and a replica file altered
    parts = {tuple(p.values): p for p in source.warehouse.partition_snapshots(db, "victim")}
    src_dir = local(parts[("2024-03-02",)].sd.location or "/none")
    (src_dir / "part-eventless-0001.parquet").write_bytes(b"written without an event\n")
    with stack.catalog() as catalog:
        victim = find_victim(catalog, db)
    victim.files[1].write_bytes(victim.files[1].read_bytes() + TAMPER)
    stray = victim.files[0].parent / "stray-0003"
    stray.write_bytes(b"on the replica only\n")
    # and a table the source changed after the replica's position (the job is stopped): not drift
    moved = f"{prefix}b"
    mover = next(t for t in source.warehouse.tables(moved) if t.startswith("tail"))
    mover_dir = local(source.warehouse.table(moved, mover).sd.location or "/none")
    (mover_dir / "part-eventless-0002").write_bytes(b"also without an event\n")
    wh.drop_table(moved, mover)

    report = check_against_source(settings, conn)
    found = {(d.kind, d.obj, d.detail) for d in report.drifts}
    assert found == {
        ("file", f"{db}.victim/dt=2024-03-02/part-eventless-0001.parquet",
         "file part-eventless-0001.parquet missing on the replica"),
        ("size", f"{db}.victim/dt=2024-03-02/{victim.files[1].name}",
         f"size differs: replica {victim.files[1].stat().st_size} bytes, source "
         f"{victim.files[1].stat().st_size - len(TAMPER)}"),
        ("file", f"{db}.victim/dt=2024-03-02/stray-0003",
         "file stray-0003 on the replica, not on the source"),
    }, report.render()
    assert gauge(db, "file") == 2 and gauge(db, "size") == 1 and gauge(moved, "table") == 0

    repaired = check_against_source(settings, conn, repair=True)
    assert sorted(repaired.repaired) == sorted(o for _, o, _ in found), repaired.render()
    assert repaired.ok, repaired.render()
    assert (Path(victim.files[1].parent) / "part-eventless-0001.parquet").read_bytes() == (
        b"written without an event\n")
    assert not victim.files[1].read_bytes().endswith(TAMPER) and not stray.exists()
    assert gauge(db, "file") == 0 and gauge(db, "size") == 0

    # behind streamer's back: the replica loses a partition and a whole table (metadata and files);
    # the source has not changed them since the replica's position, so --repair creates them again
    # from the source's metastore, locations the target's, files copied verified
    lost = _droppable(source, db)
    with stack.catalog() as catalog:
        lost_dir = local(catalog.get_table(db, lost).sd.location or "/none")  # type: ignore[union-attr]
        gone_part = catalog.get_partition(db, "victim", ["2024-03-01"])
        assert gone_part is not None and gone_part.sd.location
        catalog.drop_partitions(db, "victim", [["2024-03-01"]], keys=["dt"])
        catalog.drop_table(db, lost)
        assert catalog.get_partition(db, "victim", ["2024-03-01"]) is None, "the partition was not dropped"
        assert catalog.get_table(db, lost) is None
    shutil.rmtree(local(gone_part.sd.location), ignore_errors=True)
    shutil.rmtree(lost_dir, ignore_errors=True)
    missing = check_against_source(settings, conn)
    assert {(d.kind, d.obj, d.detail) for d in missing.drifts} == {
        ("partition", f"{db}.victim/dt=2024-03-01", "partition missing on the replica"),
        ("table", f"{db}.{lost}", "table missing on the replica"),
    }, missing.render()
    created = check_against_source(settings, conn, repair=True)
    want = sorted([f"{db}.victim/dt=2024-03-01", f"{db}.{lost}"])
    assert sorted(created.repaired) == want, created.render()
    assert created.ok, created.render()
    with stack.catalog() as catalog:
        back = catalog.get_partition(db, "victim", ["2024-03-01"])
        table = catalog.get_table(db, lost)
    assert back is not None and back.sd.location == gone_part.sd.location
    assert table is not None and table.sd.location
    table_dir = local(table.sd.location)
    assert table_dir.is_relative_to(stack.warehouse_root) or table_dir.is_relative_to(stack.external_base)
    source_dir = local(source.warehouse.table(db, lost).sd.location or "/none")

    def visible(d: Path) -> list[str]:
        return sorted(str(p.relative_to(d)) for p in d.rglob("*")
                      if p.is_file() and not p.name.startswith((".", "_")))

    assert visible(table_dir) == visible(source_dir)
    assert sorted(p.name for p in local(back.sd.location or "/none").iterdir() if p.is_file()) == sorted(
        p.name for p in local(parts[("2024-03-01",)].sd.location or "/none").iterdir()
        if p.is_file() and not p.name.startswith((".", "_")))
    print(f"\nverify against the source end to end: {time.monotonic() - started:.1f} s")


@pytest.mark.ci  # ~45 s of a job verifying every second; docs/testing.md
def test_the_job_repairs_by_default_what_the_stream_never_carried_in_a_table_being_written(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    prefix: str,
) -> None:
    """``target run --verify-every 1 --verify-source-notification-db`` with its default
    ``--verify-repair``: a file written into a source partition without any event is copied to the
    replica while the same table keeps receiving INSERTs into another partition (judged per
    partition, repaired although the replica's position moves); coverage and repairs are exported."""
    started = time.monotonic()
    stack = target_stack
    db = f"{prefix}c"
    wh = source.publishing()
    wh.create_database(db)
    make_victim(source, db)
    notification_db = source.agent.reader.url  # type: ignore[attr-defined]
    job = TargetInProcess(stack, broker.bootstrap_servers, source, spark=spark,
                          extra=["--verify-every", "1", "--verify-source-notification-db", notification_db]
                          ).start()
    target_jobs.append(job)
    wait_converged(job, source)
    with stack.catalog() as catalog:
        victim = find_victim(catalog, db)
    parts = {tuple(p.values): p for p in source.warehouse.partition_snapshots(db, "victim")}
    src_dir = local(parts[("2024-03-02",)].sd.location or "/none")
    (src_dir / "part-eventless-0009.parquet").write_bytes(b"never in any event\n")
    repaired = victim.files[0].parent / "part-eventless-0009.parquet"
    rows = [{"id": 1, "name": "x", "amount": 1.0, "ok": True}]
    deadline = time.monotonic() + 180
    day = 0
    while not repaired.exists():  # the table stays busy: INSERTs into other partitions meanwhile
        assert time.monotonic() < deadline, "the eventless file was never repaired on the replica"
        day += 1
        wh.insert(db, "victim", rows, {"dt": f"2024-04-{day % 28 + 1:02d}"})
        time.sleep(0.5)
    assert repaired.read_bytes() == b"never in any event\n"
    assert metrics.VERIFY_SOURCE_REPAIRED.labels(db=db)._value.get() >= 1
    assert metrics.VERIFY_SOURCE_PARTITIONS.labels(db=db)._value.get() >= 3
    assert 0 < metrics.VERIFY_SOURCE_CHECKED.labels(db=db)._value.get() <= (
        metrics.VERIFY_SOURCE_PARTITIONS.labels(db=db)._value.get())
    wait_converged(job, source)
    job.stop()
    print(f"\nrepaired in a busy table after {day} inserts, {time.monotonic() - started:.1f} s")
