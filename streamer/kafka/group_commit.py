"""The target's consumed offset, committed to a Kafka consumer group: a monitoring signal only.

A target's position lives in Spark's checkpoint and its state dir; no consumer group held it, so
standard lag tools (``kafka-consumer-groups --describe``, kafka_exporter, Burrow) could not see a
stopped target at all. The ``streamer_kafka`` source commits, to the group its ``commitGroup``
option names, the end of the last micro-batch Spark has completed:

- at each planning (``latestOffset`` / the driver reader's ``read``), whose start is the end of the
  previous micro-batch: Spark plans the next batch only after that one's ``foreachBatch`` returned
  (the target's progress written) and its commit log entry is written;
- in ``commit(end)``, Spark's own word that ``end`` is done (it comes late: when the next batch is
  planned, so an idle stream would otherwise show its last batch as lag).

Nothing ever reads the group back: positioning stays with the checkpoint. Commits are asynchronous
and never fail the query: a broker that refuses them (ACLs, an outage) costs one warning per run of
failures. The same offset is committed again every ``REFRESH_S`` so that an idle target's group
does not expire (Kafka drops an empty group's offsets ``offsets.retention.minutes`` after its last
commit). The group's name is chosen by the target job (``streamer.kafka.naming.target_group``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streamer.kafka.client_log import with_client_log
from streamer.kafka.settings import with_overrides

log = logging.getLogger(__name__)

REFRESH_S = 600.0  # an unchanged offset is committed again this often (keeps an idle group alive)


def commit_due(last: tuple[int, float] | None, offset: int, now: float, refresh_s: float = REFRESH_S) -> bool:
    """Whether ``offset`` should be committed now, given the last commit ``(offset, when)``."""
    return last is None or last[0] != offset or now - last[1] >= refresh_s


class GroupCommitter:
    """Commits one partition's consumed offset to ``group`` (no group: does nothing)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        group: str | None,
        topic: str,
        partition: int,
        *,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = dict(config)
        self.group = group or None
        self.topic = topic
        self.partition = partition
        self.refresh_s = refresh_s
        self._clock = clock
        self._consumer: Consumer | None = None
        self._last: tuple[int, float] | None = None
        self._failing = False

    def __getstate__(self) -> dict[str, Any]:
        # the consumer stays where it was made (Spark pickles the reader for its executors)
        return {**self.__dict__, "_consumer": None, "_last": None, "_failing": False}

    def consumed(self, offset: int) -> None:
        """Every record before ``offset`` is applied and checkpointed: tell the group (if due)."""
        if self.group is None or offset < 0:
            return
        try:
            consumer = self._consumer_now()
            consumer.poll(0)  # serves the outcome of earlier commits (_on_commit): a failure is retried
            now = self._clock()
            if not commit_due(self._last, offset, now, self.refresh_s):
                return
            consumer.commit(offsets=[TopicPartition(self.topic, self.partition, offset)], asynchronous=True)
        except (KafkaException, RuntimeError) as exc:
            self._report(f"{exc}", offset)
            return
        self._last = (offset, now)

    def close(self) -> None:
        """Serve what is outstanding and drop the consumer (it never joined the group: nothing to leave)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.poll(0)
            finally:
                consumer.close()

    def _consumer_now(self) -> Consumer:
        if self._consumer is None:
            config = with_overrides(self.config, group_id=self.group, enable_auto_commit=False,
                                    enable_auto_offset_store=False)
            config["on_commit"] = self._on_commit
            self._consumer = Consumer(with_client_log(config))
        return self._consumer

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        errors = [err] if err is not None else [p.error for p in partitions if p.error is not None]
        offset = max((p.offset for p in partitions), default=-1)
        if errors:
            self._report(str(errors[0]), offset)
        elif self._failing:
            self._failing = False
            log.info("committing %s[%d] offsets to consumer group %s works again (offset %d)",
                     self.topic, self.partition, self.group, offset)

    def _report(self, cause: str, offset: int) -> None:
        """One warning per run of failures: the job goes on, only lag tools see an older position."""
        self._last = None  # try again at the next planning
        if self._failing:
            return
        self._failing = True
        log.warning(
            "could not commit offset %d of %s[%d] to consumer group %s (%s): Kafka lag tools show an older "
            "position for this target; its own position (the checkpoint) is unaffected", offset,
            self.topic, self.partition, self.group, cause,
        )
