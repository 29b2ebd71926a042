"""What the target's streaming query reads: the ``streamer_kafka`` source's options for a target, and
how ``foreachBatch`` gets a micro-batch's records (``--batch-read``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from streamer import metrics
from streamer.target.job.settings import TargetSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


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


def batch_records(
    checkpoint_dir: str, options: dict[str, str], batch_read: str, closers: list[Callable[[], None]]
) -> Callable[[DataFrame, int], list[tuple[int, bytes]]]:
    """How ``foreachBatch`` gets a micro-batch's ``(offset, value)`` records, in offset order.

    ``batch_read="driver"`` (``--batch-read``): the driver reads the range Spark logged for the
    batch from Kafka (``streamer.kafka.batch_reader``), so no Spark job runs for it; a batch whose
    range is not logged where the job can read it (a checkpoint's first batch, a remote checkpoint)
    is collected through Spark instead. ``"spark"``: every batch is collected. The reader's consumer
    is closed through ``closers`` (``BatchApplier.close``).
    """
    from streamer.kafka.batch_reader import BatchReader
    from streamer.kafka.spark_source_options import offset_of, parse_options
    from streamer.target.job.checkpoint import batch_range

    opts = parse_options(options)
    direct = BatchReader(opts) if batch_read == "driver" else None
    if direct is not None:
        closers.append(direct.close)

    def records(df: DataFrame, batch_id: int) -> list[tuple[int, bytes]]:
        logged = batch_range(checkpoint_dir, batch_id) if direct is not None else None
        if direct is not None and logged is not None:
            with metrics.TARGET_BATCH_READ_SECONDS.labels(via="kafka").time():
                return direct.read(offset_of(opts, logged[0]), offset_of(opts, logged[1]))
        with metrics.TARGET_BATCH_READ_SECONDS.labels(via="spark").time():
            rows = df.select("offset", "value").collect()
            return sorted((int(r["offset"]), bytes(r["value"])) for r in rows)

    return records
