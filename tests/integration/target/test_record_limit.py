"""A record over the target's --max-record-bytes stops the target at its offset, never decoded.

A crafted ALTER_TABLE, a valid event a target without a limit decodes and applies, made large by a
comment of repeated bytes: a few KB of zstd on the topic. Real broker, agent and target job.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from confluent_kafka import Message, Producer
from pyspark.sql import SparkSession

from streamer.events.codec import EventSerializer
from streamer.events.model import AlterTablePayload, Event, EventType
from streamer.events.model import Source as EventSource
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.client_log import with_client_log
from streamer.kafka.record_limit import OversizedRecordError, batch_bytes
from streamer.kafka.record_size import producer_settings
from streamer.warehouse.workload import COLUMNS
from tests.integration.target.helpers import Source, TargetStack, seed_databases
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

LIMIT = 2 << 20  # the job's --max-record-bytes here


def _publish_large_alter(source: Source, db: str, comment_bytes: int) -> tuple[int, int, bytes]:
    """A crafted ALTER_TABLE of ``db.t`` whose comment is ``comment_bytes`` long, zstd-compressed as
    the agent publishes; its offset, its size (key and value) and its value."""
    wh = source.warehouse
    before = wh.table(db, "t")
    after = dataclasses.replace(before, parameters={**before.parameters, "comment": "x" * comment_bytes})
    event = Event(EventSource(source.source_id, wh.current_event_id() + 1, int(time.time())),
                  EventType.ALTER_TABLE, AlterTablePayload(before, after), db=db, table="t")
    value, key = EventSerializer()(event), db.encode()
    offsets: list[int] = []

    def delivered(err: Any, msg: Message) -> None:
        assert err is None, err
        offsets.append(int(msg.offset() or 0))

    producer = Producer(with_client_log({**source.agent.config.kafka, **producer_settings(64 << 20, "zstd")}))
    producer.produce(source.topic, value=value, key=key, partition=0, on_delivery=delivered)
    assert producer.flush(60) == 0
    return offsets[0], len(value) + len(key), value


@pytest.mark.parametrize("comment_bytes", [LIMIT, 24_000_000], ids=["just-over", "zstd-bomb"])
def test_an_oversized_record_stops_the_target_at_its_offset_naming_its_size(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    prefix: str,
    comment_bytes: int,
) -> None:
    wh = source.warehouse
    (db,) = seed_databases(wh, prefix, n=1)
    wh.create_table(db, "t", COLUMNS, [])
    applied_before = source.publish()
    offset, size, value = _publish_large_alter(source, db, comment_bytes)
    assert size > LIMIT
    wh.insert(db, "t", [{"id": 1, "name": "after", "amount": 1.0, "ok": True}])  # behind the record
    source.publish()

    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark,
                          extra=["--max-record-bytes", str(LIMIT)]).start()
    target_jobs.append(job)
    assert job.wait(300) == 1, job.tail()
    error = job.error
    assert isinstance(error, OversizedRecordError), repr(error)
    assert (error.topic, error.partition, error.offset, error.limit) == (source.topic, 0, offset, LIMIT)
    text = str(error)
    assert f"offset {offset}:" in text and "--max-record-bytes 2,097,152" in text
    if size <= batch_bytes(LIMIT):  # librdkafka decompressed it: the source refused it by its size
        assert error.size == size and f"{size:,} bytes" in text
    else:  # librdkafka stopped decompressing it at the limit: its size is over that, a few KB of zstd
        assert error.size is None and error.compressed is not None and error.compressed < len(value) // 100
        assert f"more than {batch_bytes(LIMIT):,} bytes" in text
    # the events before it are applied; it and everything after it are not
    assert target_stack.applied_ids([db]) == {db: applied_before}
    with target_stack.catalog() as catalog:
        table = catalog.get_table(db, "t")
    assert table is not None and "comment" not in table.parameters
    assert not target_stack.halts()  # a stop of the stream, not a database's halt
