"""Tables whose writers log nothing, replicated through the stream by the agent's watch on its default
flags (``streamer.source.watch``), with a target that has no ``--external-sync-seconds``.

Spark SQL (Hive support, its own writers: ``spark.sql.hive.convertMetastoreParquet=true``, its
default) writes a datasource table ``USING parquet`` (appends, an overwrite), a partitioned one (new
partitions, an append into one, a static partition's overwrite) and a Hive Parquet table it created
(converted: no INSERT logged). Before the watch, a target on its default flags ended with 3 rows
against 0, 3 against 2, 2 against 0 on such tables. Paced as ``scenario.py`` (each statement
written, published by ``run(once=True)``, which ends with one watch cycle, applied, compared), then
unpaced: a burst of writes published and applied at once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import EventType, InsertPayload
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.thrift import HmsCatalog
from streamer.source.watch import WATCH_SECONDS
from tests.integration.source.test_agent import topic_events
from tests.integration.target.helpers import TargetProcess, TargetStack
from tests.integration.writers.scenario import (
    CONVERSION,
    LogCursor,
    Scenario,
    _equal,
    by_state_statements,
    close_all,
    declared,
    thrift_agent,
)
from tests.integration.writers.spark_writer import SparkWriter

# the CI tier: a Spark writer process of its own
pytestmark = [pytest.mark.integration, pytest.mark.ci, pytest.mark.timeout(900)]

TABLES = ("ds", "ds_part", "hp_converted")


def unpaced(db: str) -> list[str]:
    return [
        f"INSERT INTO {db}.ds VALUES (5, 'e')",
        f"INSERT OVERWRITE TABLE {db}.ds_part PARTITION (dt='1') VALUES (6, 'f')",
        f"INSERT INTO {db}.ds_part VALUES (7, 'g', '3')",  # a new partition
        f"INSERT INTO {db}.hp_converted VALUES (8, 'h')",
        f"INSERT INTO {db}.ds VALUES (9, 'i')",
    ]


def test_spark_tables_that_log_no_insert_replicate_through_the_stream(
    broker: EmbeddedBroker, hms_notifying: EmbeddedMetastore, hms: EmbeddedMetastore, tmp_path: Path,
) -> None:
    kafka = broker.client_settings()
    db = f"watch{int(time.time() * 1000) % 10**8}"
    agent, stream, start = thrift_agent(hms_notifying, kafka, db)
    assert agent.config.watch_seconds == WATCH_SECONDS > 0 and agent.watcher is not None  # the default
    writer = SparkWriter(hms_notifying.uri, hms_notifying.warehouse_dir, tmp_path / "writer.log")
    job = TargetProcess(TargetStack(hms, tmp_path / "target"), broker.bootstrap_servers, stream,
                        extra=declared(hms_notifying))  # no --external-sync-seconds: the target's default
    source, target = HmsCatalog(hms_notifying.uri), HmsCatalog(hms.uri)
    try:
        agent.start()
        job.start()
        writer.wait_ready()
        scenario = Scenario(writer, agent, LogCursor(hms_notifying.uri, start), job, source, target, db)
        writer.sql(f"CREATE DATABASE {db}")
        writer.sql(f"SET {CONVERSION}=true")  # Spark's default: its own writer, no INSERT logged
        for statement, table in by_state_statements(db):
            scenario.step(statement, table, "parquet", by_state=True)  # raises at a difference or halt
        for statement in unpaced(db):
            writer.sql(statement)
        agent.run(once=True)
        deadline = time.monotonic() + 120
        while not all(_equal(scenario.compare(t, "parquet")) for t in TABLES) and time.monotonic() < deadline:
            time.sleep(0.5)
        final = {t: scenario.verdict(t, "parquet", "the unpaced writes") for t in TABLES}
        assert all(r["rows_source"] > 0 for r in final.values()), final
        # the rows came through the stream: replaces the agent listed, with checksums, one per change
        watched = [e for e in topic_events(kafka, stream.topic)
                   if e.event_type is EventType.INSERT and isinstance(e.payload, InsertPayload)
                   and e.payload.watch]
        tables = {(e.table or "").lower() for e in watched}
        assert tables == set(TABLES), tables
        for event in watched:
            payload = event.payload
            assert isinstance(payload, InsertPayload) and payload.replace and payload.table is not None
            assert all(f.checksum and f.size is not None for f in payload.files), payload
        numbers = [e.payload.watch for e in watched if isinstance(e.payload, InsertPayload)]
        assert numbers == sorted(set(numbers)), numbers
        parts = {tuple(e.payload.partition_values) for e in watched
                 if isinstance(e.payload, InsertPayload) and e.table == "ds_part"}
        assert parts >= {("1",), ("2",), ("3",)}, parts
        print(f"\n{len(watched)} watch records; {len(scenario.seconds)} paced steps in "
              f"{sum(scenario.seconds):.0f} s")
    finally:
        close_all(writer, job, agent, source, target)
