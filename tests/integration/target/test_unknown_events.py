"""Event types this streamer does not know, and events of another metastore catalog, end to end.

Real rows in the bundled warehouse's ``NOTIFICATION_LOG`` (a Hive 4 ``CREATE_DATACONNECTOR``, which
names no database; a type no Hive has, naming a database; a ``CREATE_TABLE`` of HDP's ``spark``
catalog in a same-named database), through the real agent, broker and target job.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamer import metrics
from streamer.events.codec import decode_event
from streamer.events.model import EventType, UnknownPayload
from streamer.hive.message import GZIP_FORMAT, gzip_message
from streamer.hive.notification import NotificationRow
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.topics import read_tail
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import COLUMNS
from tests.integration.target.helpers import (
    Source,
    TargetStack,
    seed_databases,
    wait_converged,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def append_rows(wh: Warehouse, rows: list[dict[str, str | None]]) -> list[int]:
    """Raw ``NOTIFICATION_LOG`` rows in one change (as a newer metastore would write them); their ids."""
    ids = []
    with wh.store.change() as tx:
        for row in rows:
            event_id = tx.take_event_id()
            tx.append_notification(NotificationRow(
                event_id, int(time.time()), str(row["type"]), str(row["message"]), row.get("format"),
                row.get("db"), row.get("table"), row.get("cat", "hive"),
            ), event_id)
            ids.append(event_id)
    return ids


def _skipped() -> float:
    return metrics.REGISTRY.get_sample_value("streamer_source_events_skipped_total") or 0.0


def _other_catalog() -> float:
    return metrics.REGISTRY.get_sample_value("streamer_source_events_other_catalog_total") or 0.0


def test_unknown_types_halt_only_their_database_and_other_catalogs_never_reach_the_target(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    prefix: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    wh = source.warehouse
    a, b = seed_databases(wh, prefix, n=2)
    wh.create_table(a, "t", COLUMNS, [])
    wh.create_table(b, "t", COLUMNS, [])
    # HDP keeps Spark's tables in catalog "spark", with database names that clash with Hive's
    with Warehouse.open(str(tmp_path / "spark.sqlite"), root=tmp_path / "spark-wh",
                        cmroot=tmp_path / "spark-cm", source_id="spark") as other:
        other.create_database(a, {})
        other.create_table(a, "spark_only", COLUMNS, [])
        spark_row = other.notifications()[-1]
    assert spark_row.event_type == "CREATE_TABLE"
    connector = json.dumps({"server": "", "servicePrincipal": "", "connector": "mysql_conn",
                            "timestamp": int(time.time())})
    future = gzip_message(json.dumps({"server": "", "servicePrincipal": "", "db": a, "table": "t",
                                      "policy": "cold", "timestamp": int(time.time())}))
    spark_id, connector_id, unknown_id = append_rows(wh, [
        {"type": "CREATE_TABLE", "message": spark_row.message, "format": spark_row.message_format,
         "db": a, "table": "spark_only", "cat": "spark"},
        {"type": "CREATE_DATACONNECTOR", "message": connector, "format": "json-0.2", "db": None},
        {"type": "ALTER_STORAGE_POLICY", "message": future, "format": GZIP_FORMAT, "db": a, "table": "t"},
    ])
    wh.insert(a, "t", [{"id": 1, "name": "held", "amount": 1.0, "ok": True}])  # held behind the halt
    wh.insert(b, "t", [{"id": 2, "name": "b", "amount": 2.0, "ok": False}])  # goes on

    skipped, other_catalog = _skipped(), _other_catalog()
    with caplog.at_level(logging.WARNING, logger="streamer.source.agent"):
        source.publish()  # the agent does not stop at any of them
    assert _skipped() == skipped + 1
    assert _other_catalog() == other_catalog + 1
    assert f"event {connector_id}: unknown event type 'CREATE_DATACONNECTOR'" in caplog.text
    assert f"event {unknown_id}: unknown event type 'ALTER_STORAGE_POLICY'" in caplog.text

    on_topic = [decode_event(r.value) for r in read_tail(source.agent.config.kafka, source.topic, n=100)
                if r.value is not None]
    ids = [e.event_id for e in on_topic if e.event_type is not EventType.PROGRESS]
    assert spark_id not in ids and connector_id not in ids
    (opaque,) = [e for e in on_topic if e.event_type is EventType.UNKNOWN]
    assert isinstance(opaque.payload, UnknownPayload)
    assert (opaque.event_id, opaque.db, opaque.table) == (unknown_id, a, "t")
    assert opaque.payload.hive_event_type == "ALTER_STORAGE_POLICY"
    assert opaque.payload.message == future.encode() and opaque.payload.message_format == GZIP_FORMAT
    assert opaque.prev_event_id is not None and opaque.prev_event_id < unknown_id

    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    job.wait_for(lambda: target_stack.applied_ids([b]) == {b: source.last_ids()[b]}, f"{b} to go on")
    job.wait_for(lambda: a in target_stack.halts(), f"{a} to halt")
    halt = target_stack.halts()[a]
    assert (halt.event_id, halt.event_type, halt.object) == (unknown_id, "ALTER_STORAGE_POLICY", f"{a}.t")
    assert "unknown source event type 'ALTER_STORAGE_POLICY'" in halt.cause
    assert target_stack.applied_ids([a])[a] < unknown_id
    assert job.metric("streamer_target_halted", db=a) == 1

    target_stack.cli("target", "skip", "--state-dir", str(target_stack.state_dir), "--db", a,
                     "--event", str(unknown_id))
    wh.alter_database(b, {"poke": "1"})  # the next batch re-reads a's held events
    source.publish()
    wait_converged(job, source)
    with target_stack.catalog() as catalog:
        assert catalog.get_table(a, "spark_only") is None  # the spark catalog's table never arrived
        assert catalog.get_table(a, "t") is not None
