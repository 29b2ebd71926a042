"""`streamer_kafka`: a PySpark Python streaming data source over confluent-kafka.

Spark's built-in Kafka source needs jars no registry here serves, so the target job reads the
topic through this source instead. Offsets live in Spark's checkpoint (a restarted query continues
exactly after the last committed batch); records are read with read_committed and explicit
assignment; each micro-batch is one offset range of one partition, so event order is kept.

Use: `register(spark)`, then `spark.readStream.format("streamer_kafka").option("topic", ...)`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from streamer.kafka.settings import with_overrides
from streamer.kafka.source_options import (
    SourceOptions,
    batch_end,
    check_start,
    offset_dict,
    offset_of,
    parse_options,
)
from streamer.kafka.topics import iter_range, probe_end, to_record, watermarks

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

SHORT_NAME = "streamer_kafka"
SCHEMA = "offset long, key string, value binary, timestamp timestamp"


def _consumer(opts: SourceOptions, **overrides: Any) -> Consumer:
    return Consumer(
        with_overrides(
            opts.config,
            group_id=f"streamer-spark-{uuid.uuid4().hex}",
            enable_auto_commit=False,
            enable_auto_offset_store=False,
            **overrides,
        )
    )


def checked_watermarks(consumer: Consumer, topic: str, partition: int, start: int) -> tuple[int, int] | None:
    """Watermarks for the data-loss check; a start past the reported high mark is double-checked.

    Tansu can under-report the high watermark (see `probe_end`); a false "topic recreated" would
    halt the target, so the rare suspicious case pays for a real fetch.
    """
    marks = watermarks(consumer, topic, partition)
    for attempt in range(_RECHECKS):
        if marks is None or start <= marks[1]:
            break
        # Tansu has been seen answering (0, 0) for a moment under load: ask again before
        # calling it data loss, which halts the target until an operator steps in
        marks = (marks[0], probe_end(consumer, topic, partition, marks[1], wait=1.0))
        if start > marks[1] and attempt + 1 < _RECHECKS:
            time.sleep(0.5)
            again = watermarks(consumer, topic, partition)
            if again is not None:
                marks = (again[0], max(again[1], marks[1]))
    return marks


_RECHECKS = 3


class OffsetRange(InputPartition):
    """One micro-batch's slice of one partition: offsets start <= o < end."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from partition watermarks and reads each range on an executor."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._target: int | None = None
        # Driver-side consumers, created on first use: "all" sees every record (data-loss checks),
        # "committed" sees what read_committed readers will (batch ends).
        self._clients: dict[str, Consumer] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Consumers stay on the driver; executors build their own in read().
        return {**self.__dict__, "_clients": {}}

    def _client(self, role: str) -> Consumer:
        if role not in self._clients:
            overrides: dict[str, Any] = {}
            if role == "committed":
                overrides = {"isolation_level": "read_committed", "queued_max_messages_kbytes": 1024}
            self._clients[role] = _consumer(self.opts, **overrides)
        return self._clients[role]

    def _committed_end(self) -> int:
        """Offset up to which every record is committed (or aborted) and readable now."""
        consumer = self._client("committed")
        marks = watermarks(consumer, self.opts.topic, self.opts.partition)
        if marks is None:
            return 0
        return probe_end(consumer, self.opts.topic, self.opts.partition, marks[1])

    def initialOffset(self) -> dict[str, Any]:
        if self.opts.starting == "latest":
            return offset_dict(self.opts, self._committed_end())
        marks = watermarks(self._client("all"), self.opts.topic, self.opts.partition)
        return offset_dict(self.opts, 0 if marks is None else marks[0])

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_events is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_events)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._committed_end()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        first = offset_of(self.opts, start)
        marks = checked_watermarks(self._client("all"), self.opts.topic, self.opts.partition, first)
        begin = check_start(self.opts.topic, self.opts.partition, first, marks, self.opts.fail_on_data_loss)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offset_dict(self.opts, batch_end(begin, self._committed_end(), max_rows, self._target))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = offset_of(self.opts, start), offset_of(self.opts, end)
        if first == last:
            return []
        return [OffsetRange(self.opts.topic, self.opts.partition, first, last)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, OffsetRange)
        consumer = _consumer(self.opts, isolation_level="read_committed", auto_offset_reset="error")
        try:
            probe = _consumer(self.opts)
            try:
                marks = checked_watermarks(probe, partition.topic, partition.partition, partition.start)
            finally:
                probe.close()
            start = check_start(
                partition.topic, partition.partition, partition.start, marks, self.opts.fail_on_data_loss
            )
            for msg in iter_range(
                consumer,
                partition.topic,
                partition.partition,
                start,
                partition.end,
                idle_timeout=self.opts.poll_timeout_s,
            ):
                record = to_record(msg)
                key = None if record.key is None else record.key.decode("utf-8", errors="replace")
                yield (record.offset, key, record.value, record.timestamp)
        finally:
            consumer.close()

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        clients, self._clients = self._clients, {}
        for consumer in clients.values():
            consumer.close()


class KafkaDataSource(DataSource):
    """Spark data source `streamer_kafka` (streaming read only)."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(parse_options(self.options))


def register(spark: SparkSession) -> None:
    """Make `format("streamer_kafka")` available in this session."""
    spark.dataSource.register(KafkaDataSource)
