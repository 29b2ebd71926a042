"""Faults on the target path: files that changed or vanished at the source (cmroot fallback, halt,
operator retry and skip) and SIGKILLs of the target job mid-batch."""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import Column
from streamer.kafka.broker import EmbeddedBroker
from streamer.read import Verdict, decide_marks, read_marks
from streamer.warehouse.files import path_of
from streamer.warehouse.workload import COLUMNS
from tests.integration.target.helpers import (
    Source,
    SparkReader,
    TargetProcess,
    TargetStack,
    assert_target_equals_source,
    leftovers,
    mixed_workload,
    seed_databases,
    source_files,
    target_files,
    wait_converged,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DAY = [Column("dt", "string")]


def _rows(n: int, tag: str) -> list[dict[str, object]]:
    return [{"id": i, "name": f"{tag}{i}", "amount": i * 2.5, "ok": i % 3 == 0} for i in range(n)]


def _status(stack: TargetStack, broker: EmbeddedBroker, source: Source) -> dict[str, dict[str, object]]:
    out = stack.cli("status", "--hms-uri", stack.hms.uri, "--state-dir", str(stack.state_dir),
                    "--bootstrap-servers", broker.bootstrap_servers, "--topic", source.topic,
                    "--output", "json", ok=(0, 1))
    rows = {row["db"]: row for row in json.loads(out.stdout)["databases"]}
    assert out.returncode == (1 if any(r["halted"] for r in rows.values()) else 0), out.returncode
    return rows


def _watermark(stack: TargetStack, *dbs: str) -> Any:
    """The databases' marks and the target's published watermark, as a reader reads them."""
    with stack.catalog() as catalog:
        marks = read_marks(catalog, sorted(dbs))
    assert marks.watermark is not None, "no watermark published"
    return marks


def test_changed_or_vanished_files_come_from_cmroot_else_the_database_halts(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark_readers: Callable[[EmbeddedMetastore], SparkReader],
    prefix: str,
) -> None:
    started = time.monotonic()
    wh = source.warehouse
    a, b, _ = seed_databases(wh, prefix)
    wh.create_table(a, "t", COLUMNS, [])
    wh.create_table(a, "p", COLUMNS, DAY)
    wh.insert(a, "t", _rows(6, "t"), n_files=2)
    wh.insert(a, "p", _rows(4, "p"), {"dt": "d1"}, n_files=2)
    originals = source_files(wh, a, "t") + source_files(wh, a, "p")
    published = source.publish()
    # after their events were published, before the target runs: one file rewritten in place
    # (same name, new content), the others deleted; the change manager keeps the old contents
    wh.insert(a, "t", _rows(3, "new"), overwrite=True, n_files=1)
    wh.drop_partitions(a, "p", [{"dt": "d1"}])
    assert not (source_files(wh, a, "t") & originals)

    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    job.wait_for(lambda: target_stack.applied_ids([a])[a] == published, f"{a} at event {published}")
    with target_stack.catalog() as catalog:
        copied = target_files(catalog, a, "t") + target_files(catalog, a, "p")
    assert copied == originals  # the point-in-time contents, not the source's current files
    assert job.metric("streamer_target_cm_fallbacks_total") >= 4

    source.publish()
    wait_converged(job, source)

    # the source file is lost and the cmroot holds no copy, with no later event replacing it (which
    # would void it: streamer.target.apply.voiding): database a halts at that event, b goes on
    wh.create_table(a, "h", COLUMNS, DAY)
    before = wh.current_event_id()
    wh.insert(a, "h", _rows(5, "h"), {"dt": "d1"})  # ADD_PARTITION listing the file
    halted_at = wh.current_event_id()
    assert halted_at == before + 1
    (lost,) = wh.files(a, "h")
    kept = path_of(lost.cm_uri or "")
    assert not kept.exists()  # nothing recycled it
    saved = Path(shutil.move(path_of(lost.uri), target_stack.base / "saved-lost-file"))
    wh.insert(a, "t", _rows(2, "held"))  # a later event of a: held, not lost
    wh.create_table(b, "t", COLUMNS, [])
    wh.insert(b, "t", _rows(3, "b"))
    source.publish()
    job.wait_for(lambda: target_stack.applied_ids([b]) == {b: source.last_ids()[b]}, f"{b} to go on")
    job.wait_for(lambda: a in target_stack.halts(), f"{a} to halt")
    halt = target_stack.halts()[a]
    assert halt.event_id == halted_at and halt.event_type == "ADD_PARTITION", halt
    assert "no copy matches" in halt.cause and lost.uri in (halt.object or "") + halt.cause
    assert target_stack.applied_ids([a]) == {a: halted_at - 1}
    with target_stack.catalog() as catalog:
        assert catalog.list_partitions(a, "h") == []
    assert not [p for p in (target_stack.warehouse_root / f"{a}.db" / "h").rglob("*") if p.is_file()]
    reader = spark_readers(target_stack.hms)
    assert reader.ask("rows", db=a, table="h") == []
    status = _status(target_stack, broker, source)
    assert status[a]["halted"]["event_id"] == halted_at  # type: ignore[index]
    assert status[b]["halted"] is None
    assert job.metric("streamer_target_halted", db=a) == 1
    # the watermark: a pins itself and the global id at its halt; a reader may read a alone only
    job.wait_for(lambda: a in _watermark(target_stack, a, b).watermark.halted, "the halt in the watermark")
    marks = _watermark(target_stack, a, b)
    assert marks.watermark.of(a) == marks.watermark.event_id == halted_at - 1
    assert marks.watermark.of(b) >= source.last_ids()[b] > halted_at
    assert decide_marks(marks, [a, b]).verdict is Verdict.FAIL
    assert decide_marks(marks, [a]).event_id == halted_at - 1
    assert job.metric("streamer_target_watermark_event_id") == halted_at - 1

    # the operator restores the file and retries: the halted event and the held ones are applied
    shutil.copy(saved, path_of(lost.uri))
    target_stack.cli("target", "retry", "--state-dir", str(target_stack.state_dir), "--db", a)
    wait_converged(job, source)  # the source is idle: the job's loop re-reads the held range by itself
    assert job.metric("streamer_target_halted", db=a) == 0
    job.wait_for(lambda: not _watermark(target_stack, a, b).watermark.halted, "the watermark without halts")
    marks = _watermark(target_stack, a, b)
    assert marks.watermark.of(a) == marks.watermark.of(b) == marks.watermark.event_id
    assert decide_marks(marks, [a, b]).event_id == marks.watermark.event_id >= max(source.last_ids().values())

    # skip: the operator passes exactly the halted event; later events of the database apply
    wh.create_table(b, "s", COLUMNS, [])
    wh.insert(b, "s", _rows(4, "s"))
    skipped = wh.current_event_id()
    (gone,) = wh.files(b, "s")
    path_of(gone.uri).unlink()  # lost, logged by no event: no run voids it
    wh.alter_table_properties(b, "s", {"comment": "after the skip"})
    source.publish()
    job.wait_for(lambda: b in target_stack.halts(), f"{b} to halt")
    assert target_stack.halts()[b].event_id == skipped
    target_stack.cli("target", "skip", "--state-dir", str(target_stack.state_dir), "--db", b,
                     "--event", str(skipped))
    wh.alter_database(a, {"poke": "2"})
    source.publish()
    wait_converged(job, source)
    assert _status(target_stack, broker, source)[b]["halted"] is None
    # caught up: no lag for either, though b's last event is behind the head (a's poke came after)
    def caught_up() -> bool:
        return all(row["lag_events"] == 0 for row in _status(target_stack, broker, source).values())

    job.wait_for(caught_up, "status to show both databases caught up")
    # equal: the skipped event's file is lost on both sides
    assert_target_equals_source(source, target_stack, reader)
    print(f"\ncmroot/halt/retry/skip: {time.monotonic() - started:.1f} s")


@pytest.mark.parametrize("kills", [pytest.param(2, id="2-kills", marks=pytest.mark.ci),  # ~150 s: CI tier
                                   pytest.param(5, id="5-kills", marks=pytest.mark.slow)])
def test_sigkill_mid_batch_then_restart_converges(
    broker: EmbeddedBroker,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark_readers: Callable[[EmbeddedMetastore], SparkReader],
    prefix: str,
    kills: int,
) -> None:
    started = time.monotonic()
    rng = random.Random(kills)
    job = TargetProcess(target_stack, broker.bootstrap_servers, source)
    target_jobs.append(job)
    for round_ in range(kills):
        mixed_workload(source.publishing(), prefix, 50, seed=100 + round_)
        head = source.warehouse.current_event_id()
        before = max(target_stack.applied_ids(source.last_ids()).values(), default=0)
        job.start()
        # mid-batch: the round's events are in one micro-batch; kill once some of it is applied
        def advanced(floor: int = before) -> bool:
            return max(target_stack.applied_ids(source.last_ids()).values()) > floor

        job.wait_for(advanced, "progress before the kill")
        time.sleep(rng.uniform(0.0, 1.0))
        job.kill()
        applied = max(target_stack.applied_ids(source.last_ids()).values())
        print(f"kill {round_ + 1}: applied {applied} of {head}")
    job.start()
    wait_converged(job, source)
    assert job.starts == kills + 1
    assert not leftovers(target_stack.warehouse_root, target_stack.external_base)
    assert_target_equals_source(source, target_stack, spark_readers(target_stack.hms))
    events = source.warehouse.current_event_id()
    print(f"\n{kills} kills, {events} events: {time.monotonic() - started:.1f} s")
