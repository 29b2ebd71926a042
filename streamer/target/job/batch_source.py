"""What the target's streaming query reads: the ``streamer_kafka`` source's options for a target, and
how ``foreachBatch`` gets a micro-batch's records (``--batch-read``) and those after it
(``--batch-follow``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from streamer import metrics
from streamer.target.job.settings import TargetSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamer.kafka.batch_reader import BatchReader


def consumer_group(settings: TargetSettings) -> str:
    """The consumer group the job commits its consumed offset to, for Kafka lag tools ("": none)."""
    from streamer.kafka.naming import target_group

    if settings.kafka.consumer_group is not None:
        return settings.kafka.consumer_group
    state_dir = os.path.abspath(settings.layout.state_dir)
    return target_group(settings.source_id, settings.metastore.uri, state_dir)


def source_options(settings: TargetSettings) -> dict[str, str]:
    """The ``streamer_kafka`` source's options for this target."""
    options = {
        "bootstrap.servers": settings.kafka.bootstrap_servers,
        "topic": settings.kafka.topic,
        "startingOffsets": "earliest",
        "maxEventsPerTrigger": str(settings.scale.max_events_per_trigger),
        "maxRecordBytes": str(settings.trust.max_record_bytes),
        "reader": settings.scale.kafka_reader,
        "waitMs": str(round(settings.scale.trigger_seconds * 1000)),
        "commitGroup": consumer_group(settings),
    }
    for key, value in settings.kafka.config.items():
        options[f"kafka.{key}"] = value
    return options


class BatchSource:
    """How ``foreachBatch`` gets a micro-batch's ``(offset, value)`` records, in offset order, and the
    records that come after them while it runs (``--batch-follow``).

    ``batch_read="driver"`` (``--batch-read``): the driver reads the range Spark logged for the
    batch from Kafka (``streamer.kafka.batch_reader``), so no Spark job runs for it; a batch whose
    range is not logged where the job can read it (a checkpoint's first batch, a remote checkpoint)
    is collected through Spark instead. ``"spark"``: every batch is collected.

    ``follow``: with the driver's reader, the micro-batch then goes on applying the records that
    arrive, up to ``follow_seconds``, before Spark checkpoints it and plans the next. A live record
    then waits for neither Spark's next micro-batch nor its fixed costs (offset log, commit log,
    planning: ~45-60 ms a batch on two cores); the next batch's range starts after what was applied.
    The applier's own progress (``repl.last.id``) keeps the effect exactly-once: a crash re-reads
    from the checkpoint and skips what was applied, as for any batch.
    """

    def __init__(
        self, checkpoint_dir: str, options: dict[str, str], batch_read: str, follow_seconds: float = 0.0
    ) -> None:
        from streamer.kafka.batch_reader import BatchReader
        from streamer.kafka.spark_source_options import parse_options

        self.checkpoint_dir = checkpoint_dir
        self.opts = parse_options(options)
        self.direct = BatchReader(self.opts) if batch_read == "driver" else None
        self.follow_seconds = follow_seconds if self.direct is not None else 0.0
        self.limit = self.opts.max_events or _FOLLOW_LIMIT
        self._stopping = threading.Event()

    def records(self, df: DataFrame, batch_id: int) -> list[tuple[int, bytes]]:
        """The micro-batch's records (none that ``follow`` already handed out)."""
        from streamer.kafka.spark_source_options import offset_of
        from streamer.target.job.checkpoint import batch_range

        direct = self.direct
        logged = batch_range(self.checkpoint_dir, batch_id) if direct is not None else None
        if direct is not None and logged is not None:
            with metrics.TARGET_BATCH_READ_SECONDS.labels(via="kafka").time():
                return direct.read(offset_of(self.opts, logged[0]), offset_of(self.opts, logged[1]))
        with metrics.TARGET_BATCH_READ_SECONDS.labels(via="spark").time():
            rows = df.select("offset", "value").collect()
            return sorted((int(r["offset"]), bytes(r["value"])) for r in rows)

    def follow(self, batch_id: int, apply: Callable[[list[tuple[int, bytes]]], None],
               done: Callable[[], bool]) -> None:
        """Apply the records that arrive after micro-batch ``batch_id``'s, a read at a time, until
        ``follow_seconds`` have passed, ``stop`` was called or ``done()`` is true. A failed apply
        raises, and the next batch reads its whole range again."""
        direct = self.direct
        if direct is None or self.follow_seconds <= 0 or self._stopping.is_set() or done():
            return
        deadline = time.monotonic() + self.follow_seconds
        if not self._positioned(direct, batch_id):
            return
        while not self._stopping.is_set() and not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            read = direct.read_on(self.limit, min(left, _FOLLOW_WAIT))  # mostly waiting: not timed
            if not read:
                continue
            try:
                apply(read)
            except BaseException:
                direct.forget()  # the next batch reads all of its range again
                raise

    def _positioned(self, direct: BatchReader, batch_id: int) -> bool:
        """After a batch Spark collected (a checkpoint's first), the reader reads on from its end."""
        from streamer.kafka.spark_source_options import offset_of
        from streamer.target.job.checkpoint import batch_end

        if direct.reading:
            return True
        end = batch_end(self.checkpoint_dir, batch_id)
        if end is None:
            return False
        direct.seek(offset_of(self.opts, end))
        return True

    def stop(self) -> None:
        """End a ``follow`` within ``_FOLLOW_WAIT`` (before the query is stopped: Spark waits for the
        running micro-batch), and follow no more."""
        self._stopping.set()

    def close(self) -> None:
        self.stop()
        if self.direct is not None:
            self.direct.close()


_FOLLOW_WAIT = 0.1  # seconds a follow waits for a record before it looks at its deadline and stop again
_FOLLOW_LIMIT = 5000  # records applied at a time by a follow without --max-events-per-trigger
