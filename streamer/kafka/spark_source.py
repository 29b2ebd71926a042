"""`streamer_kafka`: a PySpark Python streaming data source over confluent-kafka.

Spark's built-in Kafka source needs jars no registry here serves, so the target job reads the
topic through this source instead. Offsets live in Spark's checkpoint (a restarted query continues
exactly after the last committed batch); records are read with read_committed and explicit
assignment; each micro-batch is one offset range of one partition, so event order is kept.

Two readers (option `reader`):
- `task` (the option's default; the target job chooses with `--kafka-reader`, default `driver`):
  the driver plans each micro-batch's offset range from the partition's watermarks and a Spark
  task reads it, opening new consumers per batch (~0.2 s a batch).
- `driver`: PySpark's simple stream reader. One long-lived read_committed consumer in the driver's
  source process reads what is available while Spark asks for the latest offset, and the records
  travel with the plan (no read task, no new consumers). A trigger with nothing to read waits up to
  `waitMs` for records, returning as soon as one arrives. The end offset is the consumer's position,
  and the same data-loss checks run on every read. After a restart, a batch that was planned but
  not committed is re-read from its offset range by a task, exactly as the `task` reader reads.

Use: `register(spark)`, then `spark.readStream.format("streamer_kafka").option("topic", ...)`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_INVALID, Consumer, Message, TopicPartition
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from streamer.kafka.client_log import with_client_log
from streamer.kafka.errors import KafkaClientError
from streamer.kafka.group_commit import GroupCommitter
from streamer.kafka.record_limit import check_message, consumer_settings, message_refusal
from streamer.kafka.settings import with_overrides
from streamer.kafka.spark_source_options import (
    SourceOptions,
    batch_end,
    check_start,
    offset_dict,
    offset_of,
    parse_options,
    read_cap,
)
from streamer.kafka.topics import is_data, iter_range, probe_end, to_record, watermarks

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

SHORT_NAME = "streamer_kafka"
SCHEMA = "offset long, key string, value binary, timestamp timestamp"


def consumer_for(opts: SourceOptions, **overrides: Any) -> Consumer:
    """A consumer of the source; none decompresses a zstd batch past the record limit."""
    config = with_overrides(
        opts.config,
        group_id=f"streamer-spark-{uuid.uuid4().hex}",
        enable_auto_commit=False,
        enable_auto_offset_store=False,
        **overrides,
    )
    config.update(consumer_settings(opts.max_record_bytes, config))
    return Consumer(with_client_log(config))


def checked_watermarks(
    consumer: Consumer, topic: str, partition: int, start: int, unreachable_for: float = 60.0
) -> tuple[int, int] | None:
    """Watermarks for the data-loss check; a start past the reported high mark is double-checked.

    Tansu can under-report the high watermark (see `probe_end`); a false "topic recreated" would
    halt the target, so the rare suspicious case pays for a real fetch. None only when a reachable
    broker says the partition does not exist; a broker that stays unreachable or stalled for
    ``unreachable_for`` seconds raises KafkaClientError (`watermarks`), never a missing topic.
    """
    marks = watermarks(consumer, topic, partition, unreachable_for=unreachable_for)
    for attempt in range(_RECHECKS):
        if marks is None or start <= marks[1]:
            break
        # Tansu has been seen answering (0, 0) for a moment under load: ask again before
        # calling it data loss, which halts the target until an operator steps in
        marks = (marks[0], probe_end(consumer, topic, partition, marks[1], wait=1.0))
        if start > marks[1] and attempt + 1 < _RECHECKS:
            time.sleep(0.5)
            again = watermarks(consumer, topic, partition, unreachable_for=unreachable_for)
            if again is not None:
                marks = (again[0], max(again[1], marks[1]))
    return marks


_RECHECKS = 3


def _row(msg: Message) -> tuple[Any, ...]:
    record = to_record(msg)
    key = None if record.key is None else record.key.decode("utf-8", errors="replace")
    return (record.offset, key, record.value, record.timestamp)


def checked_start(consumer: Consumer, opts: SourceOptions, first: int) -> int:
    """`first`, or where failOnDataLoss=false moves it; raises DataLossError otherwise."""
    marks = checked_watermarks(consumer, opts.topic, opts.partition, first)
    return check_start(opts.topic, opts.partition, first, marks, opts.fail_on_data_loss)


def read_offset_range(opts: SourceOptions, first: int, end: int) -> Iterator[tuple[Any, ...]]:
    """Rows of offsets first <= o < end, with new consumers (a Spark task's read; replays)."""
    topic, partition = opts.topic, opts.partition
    consumer = consumer_for(opts, isolation_level="read_committed", auto_offset_reset="error")
    try:
        probe = consumer_for(opts)
        try:
            start = checked_start(probe, opts, first)
        finally:
            probe.close()
        for msg in iter_range(consumer, topic, partition, start, end, idle_timeout=opts.poll_timeout_s,
                              check=lambda msg: check_message(msg, opts.max_record_bytes)):
            yield _row(msg)
    finally:
        consumer.close()


class OffsetRange(InputPartition):
    """One micro-batch's slice of one partition: offsets start <= o < end."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


class _DriverClients:
    """What both readers do on the driver: long-lived consumers for offsets and data-loss checks."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._target: int | None = None
        # Driver-side consumers, created on first use: "all" sees every record (data-loss checks),
        # "committed" sees what read_committed readers will (batch ends).
        self._clients: dict[str, Consumer] = {}
        # the consumed offset told to a consumer group, for Kafka lag tools (streamer.kafka.group_commit)
        self._group = GroupCommitter(opts.config, opts.commit_group, opts.topic, opts.partition)

    def __getstate__(self) -> dict[str, Any]:
        # Consumers stay on the driver; executors build their own in read().
        return {**self.__dict__, "_clients": {}}

    def _client(self, role: str) -> Consumer:
        if role not in self._clients:
            overrides: dict[str, Any] = {}
            if role == "committed":
                overrides = {"isolation_level": "read_committed", "queued_max_messages_kbytes": 1024}
            self._clients[role] = consumer_for(self.opts, **overrides)
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

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._committed_end()

    def _checked_start(self, first: int) -> int:
        return checked_start(self._client("all"), self.opts, first)

    def stop(self) -> None:
        """Close the driver-side consumers. Spark calls this in its source-runner process only when
        the runner's loop ends by an exception; see :func:`_exit_if_spark_hung_up` for the common one."""
        clients, self._clients = self._clients, {}
        for consumer in clients.values():
            consumer.close()
        self._group.close()
        _exit_if_spark_hung_up()


class KafkaStreamReader(_DriverClients, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from partition watermarks and reads each range on an executor."""

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_events is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_events)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        self._group.consumed(offset_of(self.opts, start))  # the batch ending there is done
        begin = self._checked_start(offset_of(self.opts, start))
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offset_dict(self.opts, batch_end(begin, self._committed_end(), max_rows, self._target))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = offset_of(self.opts, start), offset_of(self.opts, end)
        if first == last:
            return []
        return [OffsetRange(self.opts.topic, self.opts.partition, first, last)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, OffsetRange)
        return read_offset_range(self.opts, partition.start, partition.end)

    def commit(self, end: dict[str, Any]) -> None:
        """Offsets live in Spark's checkpoint; a consumer group only hears of them (option commitGroup)."""
        self._group.consumed(offset_of(self.opts, end))


class KafkaDriverReader(_DriverClients, SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads on the driver while Spark plans: one long-lived read_committed consumer, no read task.

    The consumer stays assigned at the end of the last read, with what it fetched past a read's
    bound kept in `_ahead`; a read from any other offset (a restart, a replayed batch) assigns it
    again there. Offsets are positions in the partition, as for the task reader, so a checkpoint
    written by either reader resumes with the other.
    """

    def __init__(self, opts: SourceOptions) -> None:
        super().__init__(opts)
        self._next: int | None = None  # where the reading consumer continues (None: not assigned)
        self._suspect_since: float | None = None  # first idle read whose watermarks did not hold it
        self._ahead: list[Message] = []  # fetched records at or past `_next`

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_next": None, "_ahead": [], "_suspect_since": None}

    def _reading(self, begin: int) -> Consumer:
        if "read" not in self._clients:
            opts = dataclasses.replace(self.opts, config={**LOW_LATENCY, **self.opts.config})
            reading = consumer_for(opts, isolation_level="read_committed", auto_offset_reset="error")
            self._clients["read"] = reading
        consumer = self._clients["read"]
        if self._next != begin:
            consumer.assign([TopicPartition(self.opts.topic, self.opts.partition, begin)])
            self._next, self._ahead = begin, []
        return consumer

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        begin = offset_of(self.opts, start)
        self._group.consumed(begin)  # the batch ending there is done
        reading_on = begin == self._next
        if not reading_on:
            # a start, restart or replanned batch: the topic may have changed under the checkpoint
            begin = self._checked_start(begin)
        cap = read_cap(begin, self.opts.max_events, self._target)
        if cap is not None and cap <= begin:
            return iter(()), offset_dict(self.opts, begin)
        rows, end = self._read_available(self._reading(begin), begin, cap)
        if reading_on and end == begin:
            # Records read on from the consumer's own position prove the topic is there; a read that
            # found nothing is checked (a broker that lost the topic answers an empty fetch, not an
            # error), so the check stays off every trigger that has records to deliver.
            moved = self._idle_check(begin)
            if moved != begin:  # failOnDataLoss=false: go on where the topic now starts
                self._next = None
                return iter(()), offset_dict(self.opts, moved)
        return iter(rows), offset_dict(self.opts, end)

    def _idle_check(self, begin: int) -> int:
        """The data-loss check of a read on that found nothing, without stalling the stream.

        Watermarks that hold ``begin`` settle it in one round trip. Ones that do not may be Tansu
        under-reporting the high mark for a moment (the full check then probes and pauses, ~1 s):
        that is only suspected, and the full check runs once the suspicion outlasts
        ``_SUSPECT_SECONDS`` of idle reads, raising DataLossError if the records are really gone.
        """
        marks = watermarks(self._client("all"), self.opts.topic, self.opts.partition)
        now = time.monotonic()
        if marks is not None and marks[0] <= begin <= marks[1]:
            self._suspect_since = None
            return begin
        if self._suspect_since is None:
            self._suspect_since = now
        if now - self._suspect_since < _SUSPECT_SECONDS:
            return begin
        self._suspect_since = None
        return self._checked_start(begin)

    def _read_available(self, consumer: Consumer, begin: int, cap: int | None) -> tuple[list[Any], int]:
        """Rows from `begin` up to what is readable now (or `cap`), and the offset after them.

        With nothing readable, waits up to `wait_s` for the first record; then takes only what
        the consumer already holds, so a busy partition still gives bounded batches. Under
        Trigger.AvailableNow it reads on until `cap`: everything committed when the trigger began.
        A record over the record limit ends the read before it, and raises OversizedRecordError
        when the read begins at it: the records before it are applied, it and those after it never.
        """
        topic, partition = self.opts.topic, self.opts.partition
        must_reach = cap if self._target is not None else None
        rows: list[tuple[Any, ...]] = []
        end = begin
        held, self._ahead = self._ahead, []
        now = time.monotonic()
        deadline, progressed = now + self.opts.wait_s, now
        while True:
            if held:
                fetched, held = held, []
            else:
                short = _SHORT_POLL if must_reach is not None and end < must_reach else 0.0
                wait = short if rows or end > begin else max(short, deadline - time.monotonic())
                first = consumer.poll(wait)
                fetched = ([first] if first is not None else []) + consumer.consume(_DRAIN, 0)
            before = end
            stop_at: int | None = None  # a refused record's offset: the read ends before it
            for i, msg in enumerate(fetched):
                refused = message_refusal(msg, self.opts.max_record_bytes)
                if refused is None and not is_data(msg, topic, partition, end):
                    continue
                offset = int(msg.offset() or 0)
                if offset < end:
                    continue  # already read (never expected: the consumer moves forward)
                if cap is not None and offset >= cap:
                    self._ahead = fetched[i:]
                    break
                if refused is not None:
                    if end == begin:
                        raise refused
                    self._ahead, stop_at = fetched[i:], offset  # the next read begins at it, and raises
                    break
                rows.append(_row(msg))
                end = offset + 1
            if self._ahead:
                # nothing readable lies between
                end = stop_at if stop_at is not None else cap if cap is not None else end
                break
            # offsets the consumer passed without a record (markers, aborted records) count as read
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position != OFFSET_INVALID and position > end:
                end = position if cap is None else min(position, cap)
            if cap is not None and end >= cap:
                break
            if must_reach is None:
                if not fetched:
                    break
                continue
            if end > before:
                progressed = time.monotonic()
            elif time.monotonic() - progressed > self.opts.poll_timeout_s:
                raise KafkaClientError(
                    f"reading {topic}[{partition}] stalled at offset {end} (wanted up to {must_reach}) for "
                    f"{self.opts.poll_timeout_s:.0f}s: an open transaction or an unreachable broker"
                )
        self._next = end
        return rows, end

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        """A batch planned before a restart, re-read from its offset range (in a Spark task)."""
        first, last = offset_of(self.opts, start), offset_of(self.opts, end)
        return read_offset_range(self.opts, first, last)

    def commit(self, end: dict[str, Any]) -> None:
        """Offsets live in Spark's checkpoint; a consumer group only hears of them (option commitGroup)."""
        self._group.consumed(offset_of(self.opts, end))


# records the driver reader drains from the consumer's queue per call (what is fetched already)
_DRAIN = 1000
_SHORT_POLL = 0.05  # seconds per poll while a read must go on (Trigger.AvailableNow)
_SUSPECT_SECONDS = 2.0  # idle reads past the reported high mark for this long get the full check
# Defaults of the long-lived consumer (a `kafka.` option of the same name wins). Tansu answers a
# fetch only when fetch.wait.max.ms has passed, even if records arrived meanwhile, so the consumer's
# default (500 ms) would add up to that to every record; at 10 ms a record is seen ~3 ms after its
# commit, and an idle consumer costs the Tansu broker ~3% of a core. Apache Kafka answers a held
# fetch as soon as records arrive: there `kafka.fetch.wait.max.ms=500` costs no lag.
LOW_LATENCY: dict[str, Any] = {"fetch.wait.max.ms": 10, "fetch.error.backoff.ms": 10}


class KafkaDataSource(DataSource):
    """Spark data source `streamer_kafka` (streaming read only)."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_options(self.options)
        if opts.reader == "driver":
            return _StoppingSimpleReader(KafkaDriverReader(opts))
        return KafkaStreamReader(opts)

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return KafkaDriverReader(parse_options(self.options))


# --- shutdown ----------------------------------------------------------------------------------
# The driver-side reader lives in a Python process of its own (PySpark's streaming source runner) that
# serves Spark's calls over a socket. A stopped query kills it (SIGTERM) and closes the socket. When
# the socket closes first, the runner reads EOF, tries to report the EOFError into the closed socket
# and dies of that write: two tracebacks, which the JVM copies to the user's terminal, for a query
# that stopped as asked. That happens to a query still running when the driver JVM goes away (its
# process exits), and can to one stopped while its thread waits on the reader's answer (the driver
# reader waits up to `waitMs` when idle; `query.stop()` interrupts that thread, and Java's channel
# I/O closes on interrupt). The runner calls the reader's `stop()` on its way out of the loop; there,
# a socket Spark hung up is recognised and the process ends quietly, as the kill would end it. Any
# other error still goes back to Spark. The target job and the demo also stop the query (and wait
# for it) before the session and the JVM go.

_RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"


def _spark_hung_up() -> bool:
    """In Spark's source runner, leaving the loop because the JVM closed the socket?"""
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(main_spec, "name", None) != _RUNNER_MODULE:
        return False
    return isinstance(sys.exc_info()[1], EOFError | ConnectionError)


def _exit_if_spark_hung_up() -> None:
    if _spark_hung_up():
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)


class _StoppingSimpleReader(_SimpleStreamReaderWrapper):
    """PySpark's adapter of a simple reader (prefetch and cache), passing `stop()` on: PySpark 4's own
    adapter drops it, so the driver reader's consumers were never closed nor a hung-up socket seen."""

    def __init__(self, reader: KafkaDriverReader) -> None:
        super().__init__(reader)
        self._reader = reader

    def stop(self) -> None:
        self._reader.stop()


def register(spark: SparkSession) -> None:
    """Make `format("streamer_kafka")` available in this session."""
    spark.dataSource.register(KafkaDataSource)
