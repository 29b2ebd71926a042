"""A broker that stalls is not a lost topic: the Spark source waits it out, never reports data loss.

The broker is stopped with SIGSTOP (`EmbeddedBroker.pause`): its connections stay open and nothing
answers, as under a long GC pause or a frozen VM. The source's watermark requests time out after
10 s each (`streamer.kafka.topics.watermarks`; no setting or variable shortens that, nor its one-minute
retry window). librdkafka drops the connection after the first timeout, and when its reconnect's
ApiVersion request times out too (10 s more) it re-bootstraps: it forgets the broker, and with it the
partition's leader, and answers `_UNKNOWN_PARTITION` at once until the broker answers again. The
source once took that for "the topic was deleted" and failed the query with DataLossError.

The stall is 40 s, not 30: the source asks again 0.5 s and then 1 s after a timeout, so its third
request (~21.5 s in) races the re-bootstrap (~20.5-21.5 s in) and a 30 s stall showed the false data
loss in only about half the runs; the fourth request (~33.5 s in) always comes after it. 40 s is
still well inside the retry window, so the query must go on once the broker runs again, with nothing
lost and nothing twice. A job whose query failed saying DataLossError reports data loss only once a
reachable broker confirms it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streamer import metrics
from streamer.errors import DataLossError
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.client_log import with_client_log
from streamer.kafka.errors import KafkaClientError
from streamer.kafka.topics import ensure_topic
from streamer.target.job import streaming
from streamer.target.job.settings import (
    KafkaSettings,
    LayoutSettings,
    MetastoreSettings,
    TargetSettings,
)

# the CI tier: a stall must outlast librdkafka's timeouts (40 s per reader), too long for make test
pytestmark = [pytest.mark.integration, pytest.mark.ci, pytest.mark.timeout(300)]

STALL_S = 40.0  # past librdkafka's re-bootstrap (~21 s) and the next request (~33.5 s); < the 60 s window
TOPIC = "stalled"


class Collector:
    """foreachBatch sink: every micro-batch's values, in offset order, on the driver."""

    def __init__(self) -> None:
        self.values: list[bytes] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.values += [bytes(row.value) for row in df.orderBy("offset").collect()]


def _produce(config: dict[str, Any], values: list[bytes]) -> None:
    producer = Producer(with_client_log(config))
    for value in values:
        producer.produce(TOPIC, value, key=b"db")
        producer.flush(10)  # one record per batch: Tansu's high mark counts batches, not records


def _healthy(query: StreamingQuery) -> None:
    """Fail the test at once, naming what the query failed with; a data-loss verdict is the bug."""
    failure = query.exception()
    if failure is None:
        return
    text = str(failure)
    assert "DataLossError" not in text, f"a stalled broker was reported as data loss: {text[:2000]}"
    raise AssertionError(f"the query failed although the stall was inside the retry window: {text[:2000]}")


def _wait_for(sink: Collector, expected: list[bytes], query: StreamingQuery, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while sink.values != expected:
        _healthy(query)
        assert time.monotonic() < deadline, f"got {sink.values}, wanted {expected}"
        time.sleep(0.2)


@pytest.mark.parametrize("reader", ["driver", "task"])
def test_a_stalled_broker_is_waited_out_not_reported_as_data_loss(
    spark: SparkSession, tmp_path: Path, reader: str
) -> None:
    with EmbeddedBroker(log_path=tmp_path / "broker.log") as own:
        config = own.client_settings()
        ensure_topic(config, TOPIC)
        before, after = [b"b1", b"b2", b"b3"], [b"a1", b"a2"]
        _produce(config, before)
        sink = Collector()
        query = (
            spark.readStream.format("streamer_kafka")
            .option("bootstrap.servers", config["bootstrap.servers"])
            .option("topic", TOPIC)
            .option("reader", reader)
            .option("waitMs", "200")
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        try:
            _wait_for(sink, before, query, timeout=120)
            own.pause()
            try:
                resume_at = time.monotonic() + STALL_S
                while time.monotonic() < resume_at:
                    _healthy(query)
                    time.sleep(0.5)
            finally:
                own.resume()
            _produce(config, after)
            _wait_for(sink, before + after, query, timeout=150)  # nothing lost, nothing twice
            assert query.isActive
        finally:
            query.stop()


def _committed(checkpoint: Path, offset: int) -> None:
    """A Spark checkpoint whose last committed batch ends at ``offset`` of the topic."""
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    source = json.dumps({"topic": TOPIC, "partition": 0, "offset": offset})
    (checkpoint / "offsets" / "0").write_text("\n".join(["v1", json.dumps({"batchWatermarkMs": 0}), source]))
    (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')


# what the SRE's job failed with (the source's false verdict during a stall), for this topic
SAYS_LOSS = (
    "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform "
    "latestOffset: Traceback (most recent call last):\nstreamer.errors.DataLossError: data loss on topic "
    f"'{TOPIC}' partition 0: the query needs offset 3 but the partition does not exist; the topic was "
    "deleted or recreated (e.g. the broker restarted without storage). Rebuild the target from a bootstrap"
)


def _data_loss_metric() -> float | None:
    return metrics.REGISTRY.get_sample_value("streamer_target_data_loss")


def test_a_query_failure_saying_data_loss_needs_a_reachable_broker_to_confirm_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "RECHECK_UNREACHABLE_S", 5.0)  # one 10 s watermark request, no retry
    with EmbeddedBroker(log_path=tmp_path / "broker.log") as own:
        ensure_topic(own.client_settings(), TOPIC)
        _produce(own.client_settings(), [b"1", b"2", b"3"])
        _committed(tmp_path / "ckpt", 3)
        settings = TargetSettings(
            kafka=KafkaSettings(bootstrap_servers=own.bootstrap_servers, topic=TOPIC),
            metastore=MetastoreSettings(uri="thrift://127.0.0.1:1"),
            layout=LayoutSettings(
                warehouse_root=tmp_path.as_uri(), state_dir=str(tmp_path / "state"),
                checkpoint_dir=str(tmp_path / "ckpt"),
            ),
        )
        metrics.TARGET_DATA_LOSS.set(0)
        try:
            own.pause()
            try:
                stalled = streaming.query_failure(settings, SAYS_LOSS)
            finally:
                own.resume()
            assert type(stalled) is KafkaClientError, stalled
            assert "broker is unreachable" in str(stalled)
            assert "restarting the job resumes from its checkpoint" in str(stalled)
            assert _data_loss_metric() == 0

            # the broker answers and holds offset 3: the query's word alone is no loss
            held = streaming.query_failure(settings, SAYS_LOSS)
            assert not isinstance(held, DataLossError) and "does not confirm" in str(held), held
            assert _data_loss_metric() == 0

            own.restart()  # memory storage: now the topic is really gone
            lost = streaming.query_failure(settings, SAYS_LOSS)
            assert isinstance(lost, DataLossError), lost
            assert "partition does not exist" in str(lost)
            assert _data_loss_metric() == 1
        finally:
            metrics.TARGET_DATA_LOSS.set(0)
