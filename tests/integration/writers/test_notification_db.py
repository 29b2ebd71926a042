"""Spark SQL's INSERT OVERWRITE replicated by an agent on ``--notification-db``: the README's first
way to run ``source run``, reading the log straight from the metastore's PostgreSQL database.

Spark's Hive 2.3 client logs every INSERT OVERWRITE as an INSERT without files and without a table
snapshot, so the agent must find the object in the metastore's own tables
(``streamer.source.sql_locator``) and publish a listing of its directory as a replace. Before it
did, such an INSERT went out as an empty append and the replica kept the rows the overwrite had
replaced. Paced as ``scenario.py``: after each statement the agent publishes, the target applies,
and the table is compared on both sides (rows from the target's files, partitions, files, no halt).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import EventType, InsertPayload
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.thrift import HmsCatalog
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.policy import PolicySet
from streamer.source.reader import SqlNotificationReader
from tests.integration.source.test_agent import topic_events
from tests.integration.source.test_sql_locator import pg_url
from tests.integration.target.helpers import TargetProcess, TargetStack
from tests.integration.writers.scenario import LogCursor, Scenario, Stream, close_all, declared
from tests.integration.writers.spark_writer import SparkWriter

# the CI tier: a Spark writer
pytestmark = [pytest.mark.integration, pytest.mark.ci, pytest.mark.timeout(900)]


def test_an_agent_on_the_metastore_database_replicates_spark_sql_overwrites(
    broker: EmbeddedBroker, hms_postgres_notifying: EmbeddedMetastore, hms: EmbeddedMetastore, tmp_path: Path,
) -> None:
    source_hms = hms_postgres_notifying
    url = pg_url(source_hms)
    db = f"ndb{int(time.time() * 1000) % 10**8}"
    head = SqlNotificationReader(url)
    start = head.head_event_id()
    head.close()
    kafka = broker.client_settings()
    stream = Stream(f"ndb-{db}", f"streamer.{db}.events")
    agent = SourceAgent(
        AgentConfig(stream.source_id, kafka, topic=stream.topic, start_after=start, gap_settle_seconds=0.5),
        SqlNotificationReader(url), PolicySet.parse([db]),
    )
    writer = SparkWriter(source_hms.uri, source_hms.warehouse_dir, tmp_path / "writer.log")
    job = TargetProcess(TargetStack(hms, tmp_path / "target"), broker.bootstrap_servers, stream,
                        extra=declared(source_hms))
    source, target = HmsCatalog(source_hms.uri), HmsCatalog(hms.uri)
    try:
        agent.start()
        job.start()
        writer.wait_ready()
        cursor = LogCursor(source_hms.uri, start)
        scenario = Scenario(writer, agent, cursor, job, source, target, db)
        writer.sql(f"CREATE DATABASE {db}")
        steps = [
            (f"CREATE TABLE {db}.t (id bigint, s string) STORED AS textfile", "t"),
            (f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')", "t"),
            (f"INSERT OVERWRITE TABLE {db}.t VALUES (3, 'c')", "t"),
            (f"CREATE TABLE {db}.p (id bigint, s string) PARTITIONED BY (dt string) STORED AS textfile", "p"),
            (f"INSERT INTO {db}.p PARTITION (dt='1') VALUES (1, 'a')", "p"),
            (f"INSERT INTO {db}.p PARTITION (dt='1') VALUES (2, 'b')", "p"),
            (f"INSERT OVERWRITE TABLE {db}.p PARTITION (dt='1') VALUES (3, 'c')", "p"),
        ]
        for statement, table in steps:
            scenario.step(statement, table, "textfile")  # raises at the first difference or halt
        file_less = [e for e, _, with_files in cursor.inserts if not with_files]
        assert len(file_less) == 2, cursor.inserts  # both overwrites, as Hive 2.3 logs them
        published = {e.event_id: e.payload for e in topic_events(kafka, stream.topic)
                     if e.event_type is EventType.INSERT}
        for event_id in file_less:
            payload = published[event_id]
            assert isinstance(payload, InsertPayload) and payload.replace and not payload.unlocated, payload
            assert payload.table is not None and payload.files and all(f.checksum for f in payload.files)
    finally:
        close_all(writer, job, agent, source, target)
