"""A topic deleted, recreated and refilled past the target's checkpoint offset: the event chain
breaks at the first record the target reads, and the job stops with ``EventChainError``.

The job runs in this process (the session's Spark), so the typed error and the metric are seen as
they are; the agent is the real one, the broker real Tansu, the catalog the session's metastore.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from streamer import metrics
from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.errors import EventChainError
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.client_log import with_client_log
from streamer.kafka.topics import ensure_topic, watermarks
from streamer.source.agent import SourceAgent
from streamer.source.reader import SqlNotificationReader
from streamer.target.job import streaming as job
from streamer.target.job.settings import KafkaSettings, LayoutSettings, MetastoreSettings, ScaleSettings
from streamer.target.state.chain import read_anchor
from streamer.warehouse.workload import COLUMNS
from tests.integration.target.helpers import Source, TargetStack, seed_databases

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _settings(broker: EmbeddedBroker, source: Source, stack: TargetStack, hms: EmbeddedMetastore,
              checkpoint: Path) -> job.TargetSettings:
    return job.TargetSettings(
        source_id=source.source_id,
        kafka=KafkaSettings(bootstrap_servers=broker.bootstrap_servers, topic=source.topic),
        metastore=MetastoreSettings(uri=hms.uri),
        layout=LayoutSettings(
            warehouse_root=stack.warehouse_root.as_uri(), state_dir=str(stack.state_dir),
            checkpoint_dir=str(checkpoint), external_base_dir=stack.external_base.as_uri(),
        ),
        scale=ScaleSettings(trigger_seconds=0.1),
    )


def _high(kafka: dict[str, object], topic: str) -> int:
    consumer = Consumer(with_client_log({**kafka, "group.id": "chain-test"}))
    try:
        marks = watermarks(consumer, topic, 0)
        return 0 if marks is None else marks[1]
    finally:
        consumer.close()


def test_recreated_topic_refilled_past_the_checkpoint_stops_the_target(
    broker: EmbeddedBroker,
    spark: SparkSession,
    hms: EmbeddedMetastore,
    source: Source,
    target_stack: TargetStack,
    prefix: str,
    tmp_path: Path,
) -> None:
    wh = source.warehouse
    (a,) = seed_databases(wh, prefix, n=1)
    wh.create_table(a, "t", COLUMNS, [])
    for i in range(4):  # several transactions, so the checkpoint is well past offset 0
        wh.alter_table_properties(a, "t", {"n": str(i)})
        source.publish()
    last = source.publish()
    settings = _settings(broker, source, target_stack, hms, tmp_path / "checkpoint")
    metrics.TARGET_DATA_LOSS.set(0)

    def consumed() -> bool:
        anchor = read_anchor(target_stack.state_dir)
        return anchor is not None and anchor.event_id == last and target_stack.applied_ids([a])[a] == last

    job.run(settings, until=consumed)
    anchor = read_anchor(target_stack.state_dir)
    assert anchor is not None and anchor.event_id == last and anchor.topic == source.topic

    # the topic is deleted and recreated; an agent continues after `last` (as an operator's
    # --start-after would) and refills it past the offset the target's checkpoint resumes from
    kafka = source.agent.config.kafka
    source.agent.close()
    source.agent.reader.close()
    admin = AdminClient(kafka)  # held: a collected client cancels its futures
    admin.delete_topics([source.topic], operation_timeout=10)[source.topic].result(10)
    time.sleep(0.5)
    ensure_topic(kafka, source.topic)
    agent = SourceAgent(dataclasses.replace(source.agent.config, start_after=last),
                        SqlNotificationReader(str(tmp_path / "source" / "metastore.sqlite")))
    source.agent = agent  # closed by the fixture
    agent.start()
    n = 0
    while _high(kafka, source.topic) <= anchor.offset + 4:
        n += 1
        wh.alter_table_properties(a, "t", {"after": str(n)})
        agent.run_once()
    newest = wh.current_event_id()
    assert agent.last_id == newest

    deadline = time.monotonic() + 120

    def seen() -> bool:  # the job halts on the loss, serving the metric, until it is stopped
        loss = metrics.REGISTRY.get_sample_value("streamer_target_data_loss")
        return loss == 1 or time.monotonic() > deadline

    with pytest.raises(EventChainError) as broken:
        job.run(settings, until=seen)
    error = broken.value
    assert error.expected_prev == last and error.found_prev > last
    # found at the first record past the anchor, or (Spark's checkpoint trails what was applied:
    # --batch-follow) at the anchor's own offset, which the refilled topic holds another record at
    assert error.offset >= anchor.offset and error.last_offset == anchor.offset
    assert "event chain broken" in str(error) and str(error.event_id) in str(error)
    assert metrics.REGISTRY.get_sample_value("streamer_target_data_loss") == 1
    assert target_stack.applied_ids([a])[a] == last  # none of the refilled events was applied
    assert read_anchor(target_stack.state_dir) == anchor
