"""A real topic archived and loaded with no broker: ``streamer archive run`` reads what a real agent
published to real Tansu, ``streamer load`` (a child process given no broker address at all) applies
the archive to the session's metastore through the target's apply code, and the replica equals the
source. A tampered file halts the load naming the file and its events, with nothing of it applied;
Apache Avro's Java reader (from pyspark's jars) reads an archive file streamer did not read back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamer.archive.manifest import MANIFEST_NAME, Entry, Manifest, from_json
from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.kafka.broker import EmbeddedBroker
from streamer.warehouse.workload import COLUMNS
from tests.integration.archive.helpers import converge, load
from tests.integration.target.helpers import (
    Source,
    TargetError,
    TargetStack,
    assert_target_equals_source,
    mixed_workload,
)
from tests.integration.target.in_process import TargetInProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _archive(stack: TargetStack, broker: EmbeddedBroker, source: Source, archive: Path) -> str:
    return stack.cli(
        "archive", "run", "--bootstrap-servers", broker.bootstrap_servers, "--topic", source.topic,
        "--source-id", source.source_id, "--dir", str(archive), "--once", "--max-records-per-file", "15",
        "--metrics-port", "0",
    ).stdout


def _manifest(archive: Path) -> Manifest:
    return from_json((archive / MANIFEST_NAME).read_bytes())


def test_an_archived_topic_loads_with_no_broker_and_equals_the_source(
    broker: EmbeddedBroker, hms: EmbeddedMetastore, source: Source, prefix: str, tmp_path: Path,
    spark: SparkSession,
) -> None:
    wh = source.warehouse
    mixed_workload(wh, prefix, 30, seed=42)
    source.publish()
    stack = TargetStack(hms, tmp_path / "target")
    archive = tmp_path / "archive"
    _archive(stack, broker, source, archive)
    first = _manifest(archive)
    assert len(first.files) >= 2 and first.topic == source.topic
    assert _archive(stack, broker, source, archive).strip().endswith(f"through event {first.last_event_id}")
    assert _manifest(archive) == first  # nothing new: nothing written
    wh.create_table(f"{prefix}a", "later", COLUMNS, [])  # more events: the next run continues the chain
    last = source.publish()
    _archive(stack, broker, source, archive)
    manifest = _manifest(archive)
    assert manifest.files[: len(first.files)] == first.files and manifest.last_event_id == last
    assert manifest.files[len(first.files)].first_prev_event_id == first.last_event_id

    # a tampered copy: its first file altered, so nothing at all may be applied from it
    tampered = tmp_path / "tampered"
    shutil.copytree(archive, tampered)
    victim = tampered / manifest.files[0].file
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    other = TargetStack(hms, tmp_path / "other")
    out = load(other, tampered, ok=(1,))
    e = manifest.files[0]
    assert (f"archive file {e.file} (events {e.first_event_id}..{e.last_event_id}, offsets "
            f"{e.first_offset}..{e.last_offset}) was altered") in out
    with other.catalog() as catalog:
        assert not [db for db in catalog.list_databases() if db.startswith(prefix)]
    with pytest.raises(TargetError, match=f"archive file {e.file}"):
        other.cli("archive", "verify", "--dir", str(tampered))

    # a bounded load stops inside a file; the next one goes on from the bound, in the same file
    middle = manifest.files[1]
    bound = middle.first_event_id + 1
    assert bound < middle.last_event_id
    out = load(stack, archive, "--until-event", str(bound))
    assert f"stopped at --until-event {bound}" in out, out
    assert max(stack.applied_ids(source.last_ids()).values()) <= bound
    out = load(stack, archive)
    end = manifest.files[-1]
    assert f"the target is at offset {end.last_offset}, event {end.last_event_id}" in out, out
    assert_target_equals_source(source, stack, None)
    assert "loaded 0 files (0 records)" in load(stack, archive)  # resumable: nothing twice
    status = json.loads(stack.cli("archive", "status", "--dir", str(archive), "--state-dir",
                                  str(stack.state_dir), "--json").stdout)
    assert status["target"]["files_left"] == 0 and status["target"]["event_id"] == last

    _read_with_apache_avro(spark, archive / manifest.files[0].file, manifest.files[0], source)

    # the loaded target goes on from Kafka: target run on the same state dir, the chain continued
    wh.create_table(f"{prefix}b", "after_load", COLUMNS, [])
    wh.insert(f"{prefix}b", "after_load", [{"id": 1, "name": "n", "amount": 1.0, "ok": True}])
    source.publish()
    expected = source.last_ids()
    assert stack.applied_ids(expected) != expected  # the new events are on the topic only
    converge(TargetInProcess(stack, broker.bootstrap_servers, source, spark=spark).start(), stack, source)
    assert_target_equals_source(source, stack, None)


def _read_with_apache_avro(spark: SparkSession, path: Path, entry: Entry, source: Source) -> None:
    """Spark's avro reader when pyspark ships spark-avro (it does not: 4.x keeps it an external
    package), else Apache Avro's Java DataFileReader from pyspark's jars."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        rows = spark.read.format("avro").load(str(path)).orderBy("offset").collect()
        ids = [int(r["event_id"]) for r in rows]
        offsets = [int(r["offset"]) for r in rows]
    except Exception as exc:
        assert "avro" in str(exc).lower(), exc  # the data source is missing, nothing else
        reader = jvm.org.apache.avro.file.DataFileReader(
            jvm.java.io.File(str(path)), jvm.org.apache.avro.generic.GenericDatumReader()
        )
        try:
            assert reader.getMetaString("avro.codec") == "deflate"
            assert reader.getMetaString("streamer.topic") == source.topic
            assert reader.getMetaString("streamer.source_id") == source.source_id
            ids, offsets = [], []
            while reader.hasNext():
                record = reader.next()
                ids.append(int(record.get("event_id")))
                offsets.append(int(record.get("offset")))
        finally:
            reader.close()
    assert len(ids) == entry.records
    assert (ids[0], ids[-1], offsets[0], offsets[-1]) == (
        entry.first_event_id, entry.last_event_id, entry.first_offset, entry.last_offset)
