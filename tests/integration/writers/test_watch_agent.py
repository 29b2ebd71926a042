"""The agent's watch against a real metastore that logs its changes and a real broker, without Spark:
tables made through the metastore's Thrift API with the parameters Spark gives them, files written
beside them as Spark's writer does (logging nothing). What goes into the topic: a replace per changed
directory after the last published event, with its id, in the event chain, after the ADD_PARTITION of
a partition its listing saw; checksums that are the files' sha256; nothing for unchanged directories
or for tables Hive writes (their INSERTs are logged)."""

from __future__ import annotations

import hashlib
import itertools
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import (
    Column,
    DatabaseSnapshot,
    Event,
    EventType,
    InsertPayload,
    PartitionSnapshot,
    SerDe,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.thrift import HmsCatalog
from tests.integration.source.test_agent import topic_events
from tests.integration.writers.scenario import thrift_agent

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARQUET = SerDe(serialization_lib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe")


def _table(db: str, name: str, root: Path, params: dict[str, str],
           keys: tuple[str, ...] = ()) -> TableSnapshot:
    return TableSnapshot(name, db, "MANAGED_TABLE", StorageDescriptor(
        location=f"file://{root / name}", columns=[Column("id", "bigint")], serde=PARQUET,
        input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"),
        [Column(k, "string") for k in keys], params)


def _write(directory: Path, name: str, data: bytes) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(data)


def _watched(events: list[Event]) -> list[tuple[str, tuple[str, ...], list[str]]]:
    out = []
    for e in events:
        if isinstance(e.payload, InsertPayload) and e.payload.watch:
            names = [unquote(urlsplit(f.uri).path).rsplit("/", 1)[1] for f in e.payload.files]
            out.append((str(e.table), tuple(e.payload.partition_values), names))
    return out


def test_the_agent_publishes_changed_directories_of_tables_whose_writers_log_nothing(
    broker: EmbeddedBroker, hms_notifying: EmbeddedMetastore,
) -> None:
    kafka = broker.client_settings()
    db = f"wa{int(time.time() * 1000) % 10**8}"
    root = Path(hms_notifying.warehouse_dir) / f"{db}.db"
    agent, stream, _ = thrift_agent(hms_notifying, kafka, db)
    catalog = HmsCatalog(hms_notifying.uri)
    try:
        catalog.create_database(DatabaseSnapshot(db, location=f"file://{root}"))
        catalog.create_table(_table(db, "ds", root, {"spark.sql.sources.provider": "parquet"}))
        catalog.create_table(_table(db, "dp", root, {"spark.sql.create.version": "4.0.0"}, ("dt",)))
        catalog.create_table(_table(db, "hive_made", root, {}))  # Hive's writer logs its INSERTs
        _write(root / "ds", "a.parquet", b"a")
        _write(root / "hive_made", "h.parquet", b"h")
        _write(root / "dp" / "dt=1", "b.parquet", b"b")
        catalog.add_partitions(db, "dp", [PartitionSnapshot(["1"], sd=StorageDescriptor(
            location=f"file://{root / 'dp' / 'dt=1'}"))])
        agent.run(once=True)
        first = topic_events(kafka, stream.topic)
        assert sorted(_watched(first)) == [("dp", ("1",), ["b.parquet"]), ("ds", (), ["a.parquet"])]
        # a write logging nothing, and a new partition (logged) whose files are there before it
        _write(root / "ds", "c.parquet", b"cc")
        _write(root / "dp" / "dt=2", "d.parquet", b"ddd")
        catalog.add_partitions(db, "dp", [PartitionSnapshot(["2"], sd=StorageDescriptor(
            location=f"file://{root / 'dp' / 'dt=2'}"))])
        agent.run(once=True)
        events = topic_events(kafka, stream.topic)
        later = events[len(first):]
        assert sorted(_watched(later)) == [("dp", ("2",), ["d.parquet"]),
                                           ("ds", (), ["a.parquet", "c.parquet"])]
        added = next(i for i, e in enumerate(later) if e.event_type is EventType.ADD_PARTITION)
        watch_at = [i for i, e in enumerate(later)
                    if isinstance(e.payload, InsertPayload) and e.payload.watch]
        assert all(i > added for i in watch_at), [(e.event_id, e.event_type) for e in later]
        last_event = max(e.event_id for e in later if e.event_type is not EventType.PROGRESS)
        assert all(later[i].event_id == last_event for i in watch_at)
        for before, record in itertools.pairwise(events):  # the event chain holds
            assert record.prev_event_id == before.event_id, (before, record)
        for e in later:
            if isinstance(e.payload, InsertPayload) and e.payload.watch:
                assert e.payload.replace and e.payload.table is not None
                for f in e.payload.files:
                    data = Path(unquote(urlsplit(f.uri).path)).read_bytes()
                    assert f.checksum == hashlib.sha256(data).hexdigest() and f.size == len(data)
        agent.run(once=True)  # nothing changed: nothing more
        assert _watched(topic_events(kafka, stream.topic)[len(events):]) == []
    finally:
        agent.close()
        agent.reader.close()
        catalog.close()
