"""A target whose warehouse is an S3 bucket (``s3a://``, as Hive spells it), end to end: bundled
warehouse -> agent -> Tansu -> ``streamer target run`` (Spark, a child process) -> a real metastore
and a real S3 API server (moto, 127.0.0.1). See tests/fixtures/s3.py for what the metastore needs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.codec import EventSerializer
from streamer.events.model import Column, Event, EventType, InsertPayload
from streamer.events.model import Source as EventSource
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.client_log import with_client_log
from streamer.metastore.thrift import HmsCatalog
from streamer.target.apply import writes
from streamer.target.apply.files import TMP_PREFIX
from streamer.warehouse.files import path_of
from streamer.warehouse.workload import COLUMNS
from tests.fixtures.s3 import S3Server
from tests.integration.target.helpers import (
    Source,
    TargetStack,
    seed_databases,
    source_files,
    wait_converged,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DAY = [Column("dt", "string")]


def _rows(n: int, tag: str) -> list[dict[str, object]]:
    return [{"id": i, "name": f"{tag}{i}", "amount": i * 1.5, "ok": i % 2 == 0} for i in range(n)]


def _objects(fs: Any, prefix: str) -> list[str]:
    """Every object key below ``prefix`` (bucket/path), hidden ones included."""
    return sorted(str(p) for p in fs.find(prefix)) if fs.exists(prefix) else []


def _s3_target_files(
    fs: Any, catalog: HmsCatalog, db: str, table: str
) -> Counter[tuple[str | None, str, str]]:
    """(partition, file name, sha256) of each visible object of a target table, read back from S3."""
    snap = catalog.get_table(db, table)
    assert snap is not None and snap.sd.location, f"{db}.{table} missing on the target"
    dirs: list[tuple[str | None, str]] = []
    if snap.partition_keys:
        keys = [k.name for k in snap.partition_keys]
        for part in catalog.list_partitions(db, table):
            assert part.sd.location
            name = "/".join(f"{k}={v}" for k, v in zip(keys, part.values, strict=True))
            dirs.append((name, part.sd.location))
    else:
        dirs.append((None, snap.sd.location))
    out: Counter[tuple[str | None, str, str]] = Counter()
    for name, location in dirs:
        assert location.startswith("s3a://"), location
        prefix = location[len("s3a://"):]
        for info in fs.ls(prefix, detail=True) if fs.exists(prefix) else []:
            base = str(info["name"]).rsplit("/", 1)[-1]
            if info["type"] == "file" and not base.startswith((".", "_")):
                out[(name, base, hashlib.sha256(fs.cat_file(info["name"])).hexdigest())] += 1
    return out


def test_target_replicates_into_s3_verified_and_refuses_a_mismatch(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    hms_s3a: EmbeddedMetastore,
    s3_env: S3Server,
    s3_replica_bucket: str,
    target_jobs: list[TargetJob],
    tmp_path: Path,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = time.monotonic()
    bucket = s3_replica_bucket
    fs = s3_env.filesystem()
    wh = source.warehouse
    a, b, _ = seed_databases(wh, prefix)
    wh.create_table(a, "t", COLUMNS, [])
    wh.create_table(a, "p", COLUMNS, DAY)
    wh.insert(a, "t", _rows(6, "t"), n_files=2)
    wh.insert(a, "t", _rows(4, "t2"), n_files=2)  # into a directory readers list: file by file
    wh.insert(a, "p", _rows(4, "p1"), {"dt": "d1"}, n_files=2)
    wh.insert(a, "p", _rows(3, "p2"), {"dt": "d2"})
    wh.insert(a, "t", _rows(3, "ov"), overwrite=True, n_files=1)
    wh.insert(a, "p", _rows(2, "ov"), {"dt": "d1"}, overwrite=True, n_files=2)
    source.publish()

    # the endpoint through the flag, the credentials through the standard AWS variables
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.setattr(writes, "_warned_nonatomic", set())  # the job warns once per process: as a new one
    stack = TargetStack(hms_s3a, tmp_path / "target")
    roots = (f"s3a://{bucket}/warehouse", f"s3a://{bucket}/external")
    job = TargetInProcess(stack, broker.bootstrap_servers, source, roots=roots,
                          extra=["--fs-option", f"s3.endpoint_url={s3_env.endpoint}"], spark=spark).start()
    target_jobs.append(job)
    wait_converged(job, source)

    with stack.catalog() as catalog:
        for table in ("t", "p"):
            snap = catalog.get_table(a, table)
            assert snap is not None and snap.sd.location == f"{roots[0]}/{a}.db/{table}", snap
            for part in catalog.list_partitions(a, table):
                assert (part.sd.location or "").startswith(f"{roots[0]}/{a}.db/{table}/dt="), part
            got = _s3_target_files(fs, catalog, a, table)
            want = source_files(wh, a, table)
            assert got == want, f"{a}.{table}: only source {want - got}, only target {got - want}"
    objects = _objects(fs, f"{bucket}/warehouse/{a}.db")
    assert objects and not [o for o in objects if TMP_PREFIX in o], objects
    assert job.metric("streamer_target_nonatomic_publishes_total", db=a) >= 3
    assert job.log_path.read_text(errors="replace").count("publishing on s3a is not atomic") == 1

    # a file lost at the source with no cmroot copy and no later event replacing it (an overwrite
    # would void it: streamer.target.apply.voiding): a halts at that event, nothing of it shows
    wh.create_table(a, "h", COLUMNS, DAY)
    wh.insert(a, "h", _rows(5, "h"), {"dt": "d1"})  # ADD_PARTITION naming the file
    halted_at = wh.current_event_id()
    (lost,) = wh.files(a, "h")
    path_of(lost.uri).unlink()  # logged by no event; nothing recycled it
    wh.create_table(b, "t", COLUMNS, [])
    wh.insert(b, "t", _rows(3, "b"))
    source.publish()
    job.wait_for(lambda: stack.applied_ids([b]) == {b: source.last_ids()[b]}, f"{b} to go on")
    job.wait_for(lambda: a in stack.halts(), f"{a} to halt")
    halt = stack.halts()[a]
    assert halt.event_id == halted_at and "no copy matches" in halt.cause, halt
    assert lost.uri in (halt.object or "") + halt.cause, halt
    with stack.catalog() as catalog:
        assert catalog.list_partitions(a, "h") == []
        assert _s3_target_files(fs, catalog, b, "t") == source_files(wh, b, "t")
    assert _objects(fs, f"{bucket}/warehouse/{a}.db/h") == []  # not even a hidden staging object

    # an event whose file would land outside the table (``..``): b halts at it, naming event,
    # object and cause, and nothing is written anywhere but under the roots
    crafted = _escaping_insert(source, b, "t", wh.current_event_id() + 1)
    job.wait_for(lambda: b in stack.halts(), f"{b} to halt on the escaping event")
    halt = stack.halts()[b]
    assert halt.event_id == crafted.event_id and halt.event_type == "INSERT", halt
    assert "escape" in (halt.object or "") and "'..' segment" in halt.cause, halt
    keys = _objects(fs, bucket)
    assert all(k.startswith((f"{bucket}/warehouse/", f"{bucket}/external/")) for k in keys), keys
    assert not [k for k in keys if "escape" in k]
    print(f"\ns3 target: {len(objects)} objects, {time.monotonic() - started:.1f} s")


def _escaping_insert(source: Source, db: str, table: str, event_id: int) -> Event:
    """An INSERT into ``db.table`` naming a real file by a path that climbs out of the table
    directory, produced straight onto the topic (no real source writes such an event)."""
    wh = source.warehouse
    (real,) = wh.files(db, table)
    snap = wh.table(db, table)
    uri = f"{snap.sd.location}/../../../../escape/{real.uri.rsplit('/', 1)[-1]}"
    ref = dataclasses.replace(real, uri=uri)
    event = Event(EventSource(source.source_id, event_id, int(time.time())), EventType.INSERT,
                  InsertPayload(snap, None, [], False, [ref]), db=db, table=table)
    producer = Producer(with_client_log(source.agent.config.kafka))
    producer.produce(source.topic, value=EventSerializer()(event), key=db.encode(), partition=0)
    assert producer.flush(30) == 0
    return event
