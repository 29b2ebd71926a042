"""A micro-batch's records read by the job's driver itself, from the offset range Spark logged.

``foreachBatch`` hands the job a DataFrame; collecting it is a Spark job per micro-batch (on two
quiet cores ~3 ms per event of a live batch and 2.6-5.9% of a catch-up; bench/README.md, issue 41).
The range the batch covers is in Spark's checkpoint before the batch runs
(``checkpoint.batch_range``), and Kafka gives the same records to any ``read_committed`` reader of
that range. So the driver reads them with one long-lived consumer that reads on from where the last
batch ended (what it fetched ahead is kept), with the same record limit and data-loss checks the
source's readers make. Spark's DataFrame is left unread.

``read_on`` goes past the batch's range (``--batch-follow``): the records that came after it, handed
to the apply before Spark plans the next micro-batch. The next range then starts where they ended,
so a record is handed out once per reader; a failure forgets that (``forget``), and the records are
read again, to be skipped by event id (``repl.last.id``) as after any crash.
"""

from __future__ import annotations

import dataclasses
import time

from confluent_kafka import OFFSET_INVALID, Consumer, Message, TopicPartition

from streamer.kafka.errors import KafkaClientError
from streamer.kafka.record_limit import check_message
from streamer.kafka.spark_source import LOW_LATENCY, checked_start, consumer_for
from streamer.kafka.spark_source_options import SourceOptions
from streamer.kafka.topics import is_data

_POLL = 0.01  # seconds per wait for the range's next record, or for the position to pass a marker
_DRAIN = 1000  # records taken from the consumer's queue per call, besides the one polled


class BatchReader:
    """Reads offset ranges ``[start, end)`` of the source's partition in the calling process."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = dataclasses.replace(opts, config={**LOW_LATENCY, **opts.config})
        self._consumer: Consumer | None = None
        self._next: int | None = None  # where the consumer reads on (None: assign first)
        self._ahead: list[Message] = []  # fetched at or past ``_next``
        self._handed: int | None = None  # ``read_on`` handed out every record below this offset

    def read(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """``(offset, value)`` of every committed data record with ``start <= offset < end``, in order.

        ``end`` is a bound the source's reader already reached, so every offset below it is decided
        (committed, aborted or a transaction marker). Records gone from the topic raise
        ``DataLossError`` (or, with ``failOnDataLoss=false``, the range starts where the topic does,
        as the source's readers do); a record over the limit raises ``OversizedRecordError``.
        """
        handed = self._handed
        if handed is not None and start < handed:  # read on past ``start`` already: from there on
            if end <= handed:
                return []
            start = handed
        self._handed = None
        if end <= start:
            return []
        consumer = self._positioned(start)
        try:
            out = self._read_to(consumer, end)
        except BaseException:
            self.forget()  # where the consumer stands is unknown: assign again
            raise
        self._next = end
        return out

    def read_on(self, limit: int, wait: float) -> list[tuple[int, bytes]]:
        """Up to ``limit`` committed data records from where the last read ended, as many as have
        arrived (waiting up to ``wait`` seconds for the first), in order; [] when none came or the
        reader has not read yet. Each is handed out once: the next ``read`` starts after them."""
        if self._consumer is None or self._next is None:
            return []
        try:
            out = self._read_available(self._consumer, limit, wait)
        except BaseException:
            self.forget()
            raise
        self._handed = self._next
        return out

    @property
    def reading(self) -> bool:
        """Whether the reader knows where it reads on (a range ended there, or ``seek``)."""
        return self._consumer is not None and self._next is not None

    def seek(self, offset: int) -> None:
        """Read on from ``offset`` (a range read some other way ended there), after the data-loss check."""
        try:
            self._positioned(offset)
        except BaseException:
            self.forget()
            raise

    def forget(self) -> None:
        """Read the next range whole, from a new assignment: what was handed out is unknown (its
        apply failed), or the consumer stands somewhere unknown."""
        self._next, self._ahead, self._handed = None, [], None

    def _read_available(self, consumer: Consumer, limit: int, wait: float) -> list[tuple[int, bytes]]:
        topic, partition = self.opts.topic, self.opts.partition
        assert self._next is not None
        position = self._next
        fetched, self._ahead = self._ahead, []
        if not fetched:
            fetched = _fetch(consumer, wait)
        out: list[tuple[int, bytes]] = []
        for i, msg in enumerate(fetched):
            if len(out) >= limit:
                self._ahead = fetched[i:]  # kept, in order, for the next read
                break
            try:
                check_message(msg, self.opts.max_record_bytes)
                data = is_data(msg, topic, partition, position, " while reading on")
            except Exception:
                if not out:
                    raise
                self._ahead = fetched[i:]  # the records before it first; the next read raises
                break
            if not data:
                continue
            offset = int(msg.offset() or 0)
            if offset >= position:
                out.append((offset, msg.value() or b""))
                position = offset + 1
        if not self._ahead:  # offsets passed without a record (markers, aborted records): read too
            position = max(position, self._consumed_to(consumer))
        self._next = position
        return out

    def _read_to(self, consumer: Consumer, end: int) -> list[tuple[int, bytes]]:
        topic, partition = self.opts.topic, self.opts.partition
        out: list[tuple[int, bytes]] = []
        assert self._next is not None
        position, progressed = self._next, time.monotonic()
        held, self._ahead = self._ahead, []
        while position < end:
            if held:
                fetched, held = held, []
            else:
                fetched = _fetch(consumer, _POLL)
            for i, msg in enumerate(fetched):
                offset = int(msg.offset() or 0)
                if offset >= end:
                    self._ahead = fetched[i:]  # the next batch's (records or errors): kept for it
                    position = end
                    break
                check_message(msg, self.opts.max_record_bytes)  # a refusal (client errors too) first
                if not is_data(msg, topic, partition, position, f" while reading up to {end}"):
                    continue
                if offset >= position:
                    out.append((offset, msg.value() or b""))
                    position = offset + 1
            if position < end:
                # offsets passed without a record (transaction markers, aborted records) count as read
                current = self._consumed_to(consumer)
                if current > position:
                    position = min(current, end)
                    progressed = time.monotonic()
                elif fetched:
                    progressed = time.monotonic()
                elif time.monotonic() - progressed > self.opts.poll_timeout_s:
                    raise KafkaClientError(
                        f"reading {topic}[{partition}] stalled at offset {position} (the micro-batch "
                        f"ends at {end}) for {self.opts.poll_timeout_s:.0f}s: an unreachable broker"
                    )
        return out

    def _consumed_to(self, consumer: Consumer) -> int:
        """The consumer's position (past transaction markers and aborted records); -1 when unknown."""
        current = consumer.position([TopicPartition(self.opts.topic, self.opts.partition)])[0].offset
        return -1 if current == OFFSET_INVALID else int(current)

    def _positioned(self, start: int) -> Consumer:
        """The consumer, reading on at ``start``: assigned there (after the data-loss check) unless
        the last range ended there."""
        if self._consumer is None:
            self._consumer = consumer_for(
                self.opts, isolation_level="read_committed", auto_offset_reset="error"
            )
        if self._next != start:
            probe = consumer_for(self.opts)
            try:
                begin = checked_start(probe, self.opts, start)
            finally:
                probe.close()
            self._consumer.assign([TopicPartition(self.opts.topic, self.opts.partition, begin)])
            self._next, self._ahead = begin, []
        return self._consumer

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        self.forget()
        if consumer is not None:
            consumer.close()


def _fetch(consumer: Consumer, wait: float) -> list[Message]:
    """What the consumer has: one message waited for up to ``wait`` seconds, and those queued after it."""
    first = consumer.poll(wait)
    return ([first] if first is not None else []) + consumer.consume(_DRAIN, 0)
