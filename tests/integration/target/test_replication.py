"""The target job end to end: bundled warehouse -> agent -> Tansu -> ``streamer target run`` (Spark,
in this process or a child one) -> target HMS + files, compared with the source through Spark SQL
on the target.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.naming import target_group
from streamer.kafka.settings import with_overrides
from streamer.kafka.topics import end_offsets
from tests.integration.target.helpers import (
    Source,
    SparkReader,
    TargetProcess,
    TargetStack,
    assert_target_equals_source,
    mixed_workload,
    wait_converged,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_mixed_workload_replicates_rows_partitions_and_files(
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
    mixed_workload(source.publishing(), prefix, 300, seed=11)  # waiting in the topic at start-up
    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    last = mixed_workload(source.publishing(), prefix, 220, seed=12)  # arrives while the job runs
    assert last >= 500
    kinds = {row.event_type for row in wh.notifications()}
    assert {"CREATE_DATABASE", "DROP_DATABASE", "CREATE_TABLE", "DROP_TABLE", "ADD_PARTITION",
            "DROP_PARTITION", "INSERT", "ALTER_TABLE"} <= kinds, kinds

    wait_converged(job, source)
    applied = target_stack.applied_ids(source.last_ids())
    assert max(applied.values()) == wh.current_event_id() == last  # the newest event is an INSERT
    seen = assert_target_equals_source(source, target_stack, spark_readers(target_stack.hms))
    assert seen.tables >= 5 and seen.partitions >= 5 and seen.files >= 20, seen
    print(f"\n{last} events, {seen}; {time.monotonic() - started:.1f} s")


@pytest.mark.ci  # two target jobs as child processes, ~85 s: the CI tier (docs/testing.md)
def test_hub_and_spoke_targets_are_independent(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    hms_spoke: EmbeddedMetastore,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark_readers: Callable[[EmbeddedMetastore], SparkReader],
    prefix: str,
) -> None:
    """Two targets, each with its own metastore, warehouse root and checkpoint, read one topic. The
    hub runs in this process; the spoke, which stops and restarts, is a process of its own (its
    ``/metrics`` counts its own events only)."""
    started = time.monotonic()
    hub = TargetInProcess(target_stack, broker.bootstrap_servers, source, name="hub", spark=spark).start()
    spoke_stack = TargetStack(hms_spoke, target_stack.base.parent / "spoke")
    spoke = TargetProcess(spoke_stack, broker.bootstrap_servers, source, name="spoke").start()
    target_jobs.extend([hub, spoke])
    mixed_workload(source.publishing(), prefix, 80, seed=21)
    wait_converged(hub, source)
    wait_converged(spoke, source)
    assert_target_equals_source(source, spoke_stack, None)

    # the spoke stops for a while; the hub keeps up alone and is the same as with a spoke running
    spoke.stop()
    stopped_at = spoke_stack.applied_ids(source.last_ids())
    mixed_workload(source.publishing(), prefix, 60, seed=22)
    wait_converged(hub, source)
    assert spoke_stack.applied_ids(stopped_at) == stopped_at  # nothing moved on the stopped target
    # Kafka lag tools see it too: the stopped spoke's consumer group is behind, the hub's at the end
    end = end_offsets(broker.client_settings(), source.topic)[0]
    assert _group_offset(broker, source, spoke_stack) < end
    _wait_group(broker, source, target_stack, end)
    assert_target_equals_source(source, target_stack, spark_readers(target_stack.hms))

    # restarted, the spoke resumes from its checkpoint: it applies only what it missed
    new_events = sum(1 for row in source.warehouse.notifications(after=max(stopped_at.values())))
    spoke.start()
    wait_converged(spoke, source)
    assert spoke.metric("streamer_target_events_applied_total") <= new_events
    assert_target_equals_source(source, spoke_stack, None)
    _wait_group(broker, source, spoke_stack, end_offsets(broker.client_settings(), source.topic)[0])
    assert spoke_stack.warehouse_root != target_stack.warehouse_root
    print(f"\nhub and spoke: {time.monotonic() - started:.1f} s")


def _group_offset(broker: EmbeddedBroker, source: Source, stack: TargetStack) -> int:
    """The offset a target job committed to its default consumer group (what Kafka lag tools read)."""
    group = target_group(source.source_id, stack.hms.uri, str(stack.state_dir.resolve()))
    consumer = Consumer(with_overrides(broker.client_settings(), group_id=group, enable_auto_commit=False))
    try:
        return int(consumer.committed([TopicPartition(source.topic, 0)], timeout=10)[0].offset)
    finally:
        consumer.close()


def _wait_group(broker: EmbeddedBroker, source: Source, stack: TargetStack, end: int) -> None:
    deadline = time.monotonic() + 30
    while (at := _group_offset(broker, source, stack)) != end:
        assert time.monotonic() < deadline, f"the consumer group of {stack.base.name} is at {at}, not {end}"
        time.sleep(0.5)
