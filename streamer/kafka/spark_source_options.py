"""Options and offset arithmetic of the `streamer_kafka` Spark source, free of I/O.

Kept apart from the data source so the rules that decide what a micro-batch reads (read limits,
data-loss detection) are unit-testable without Spark or a broker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamer.errors import ConfigError, DataLossError
from streamer.kafka.record_limit import DEFAULT_TARGET_MAX_RECORD_BYTES, check_limit
from streamer.kafka.settings import client_config

STARTING = ("earliest", "latest")
# "task": offsets planned on the driver, each micro-batch read by a Spark task (new consumers per
# batch); "driver": a long-lived consumer on the driver reads while planning (no read task).
READERS = ("task", "driver")


@dataclass(frozen=True)
class SourceOptions:
    """What the reader needs, parsed and validated once on the driver."""

    topic: str
    config: dict[str, Any] = field(hash=False)
    partition: int = 0
    max_events: int | None = None
    starting: str = "earliest"
    fail_on_data_loss: bool = True
    poll_timeout_s: float = 120.0
    reader: str = "task"
    wait_s: float = 0.0  # driver reader: how long a trigger with nothing to read waits for records
    # a larger record (key and value, decompressed) is refused where read (streamer.kafka.record_limit)
    max_record_bytes: int = DEFAULT_TARGET_MAX_RECORD_BYTES
    commit_group: str | None = None  # consumer group told each completed batch's end (monitoring only)


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigError(f"option {name} must be true or false, got {value!r}")


def _positive_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise ConfigError(f"option {name} must be a positive integer, got {value!r}")
    return number


def _non_negative_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise ConfigError(f"option {name} must be a non-negative integer, got {value!r}")
    return number


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate Spark reader options (keys are case-insensitive; `kafka.*` passes to librdkafka)."""
    opts = {key.lower(): value for key, value in options.items()}
    topic = opts.pop("topic", "").strip()
    if not topic:
        raise ConfigError("option topic is required")
    bootstrap = opts.pop("bootstrap.servers", None) or opts.pop("kafka.bootstrap.servers", "")
    passthrough = {key[len("kafka.") :]: value for key, value in opts.items() if key.startswith("kafka.")}
    passthrough.pop("bootstrap.servers", None)
    config = client_config(bootstrap, passthrough)
    starting = opts.get("startingoffsets", "earliest").strip().lower()
    if starting not in STARTING:
        raise ConfigError(f"option startingOffsets must be one of {', '.join(STARTING)}, got {starting!r}")
    max_events = opts.get("maxeventspertrigger")
    reader = opts.get("reader", "task").strip().lower()
    if reader not in READERS:
        raise ConfigError(f"option reader must be one of {', '.join(READERS)}, got {reader!r}")
    known = {
        "partition", "maxeventspertrigger", "startingoffsets", "failondataloss", "polltimeoutms", "path",
        "reader", "waitms", "commitgroup", "maxrecordbytes",
    }
    unknown = sorted(key for key in opts if key not in known and not key.startswith("kafka."))
    if unknown:
        raise ConfigError(f"Unrecognized source options: {', '.join(unknown)}")
    return SourceOptions(
        topic=topic,
        config=config,
        partition=int(opts.get("partition", "0")),
        max_events=_positive_int("maxEventsPerTrigger", max_events) if max_events else None,
        starting=starting,
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        poll_timeout_s=_positive_int("pollTimeoutMs", opts.get("polltimeoutms", "120000")) / 1000,
        reader=reader,
        wait_s=_non_negative_int("waitMs", opts.get("waitms", "0")) / 1000,
        max_record_bytes=check_limit(
            _positive_int("maxRecordBytes", opts.get("maxrecordbytes", str(DEFAULT_TARGET_MAX_RECORD_BYTES)))
        ),
        commit_group=opts.get("commitgroup", "").strip() or None,
    )


def offset_dict(opts: SourceOptions, offset: int) -> dict[str, Any]:
    """The JSON-able offset Spark stores in its checkpoint."""
    return {"topic": opts.topic, "partition": opts.partition, "offset": offset}


def offset_of(opts: SourceOptions, offset: dict[str, Any]) -> int:
    """The partition offset in a checkpointed offset, refusing one that belongs to another topic."""
    if offset.get("topic") != opts.topic or int(offset.get("partition", -1)) != opts.partition:
        raise ConfigError(
            f"checkpoint offset {offset} is for another topic/partition than "
            f"{opts.topic}[{opts.partition}]; use a new checkpoint location"
        )
    return int(offset["offset"])


def data_loss_message(topic: str, partition: int, start: int, low: int | None, high: int | None) -> str:
    """The error an operator sees when a batch needs records the partition no longer holds."""
    held = "does not exist" if low is None else f"holds offsets {low}..{high}"
    why = (
        "records were purged or trimmed (retention)"
        if low is not None and start < low
        else "the topic was deleted or recreated (e.g. the broker restarted without storage)"
    )
    return (
        f"data loss on topic {topic!r} partition {partition}: the query needs offset {start} but the "
        f"partition {held}; {why}. Rebuild the target from a bootstrap with a new checkpoint, or set "
        f"failOnDataLoss=false to skip the missing records."
    )


def check_start(
    topic: str,
    partition: int,
    start: int,
    marks: tuple[int, int] | None,
    fail_on_data_loss: bool,
) -> int:
    """The offset to read from: `start` if the partition still holds it.

    Otherwise raise DataLossError, or (failOnDataLoss=false) move to the partition's low watermark.
    A missing topic at offset 0 is not a loss: nothing was ever read.
    """
    if marks is None:
        if start == 0:
            return 0
        if fail_on_data_loss:
            raise DataLossError(data_loss_message(topic, partition, start, None, None))
        return 0
    low, high = marks
    if low <= start <= high:
        return start
    if fail_on_data_loss:
        raise DataLossError(data_loss_message(topic, partition, start, low, high))
    return low


def batch_end(start: int, committed_end: int, max_rows: int | None, target: int | None = None) -> int:
    """End offset (exclusive) of the next micro-batch.

    Offsets count markers and aborted records too, so bounding the offset range by `max_rows` bounds
    the records. A committed end below `start` (some brokers report a bogus last stable offset while
    a transaction is open) means "nothing new yet", never a step back.
    """
    end = max(start, committed_end)
    if target is not None:
        end = min(end, max(start, target))
    if max_rows is not None:
        end = min(end, start + max_rows)
    return end


def read_cap(start: int, max_rows: int | None, target: int | None = None) -> int | None:
    """Exclusive offset bound of one driver-side read from `start`, or None (all available).

    The driver reader cannot be given Spark's read limit, so it bounds itself: by `max_rows` offsets
    (as `batch_end` does) and, under Trigger.AvailableNow, by the end fixed when the trigger began.
    """
    caps = [start + max_rows] if max_rows is not None else []
    if target is not None:
        caps.append(max(start, target))
    return min(caps) if caps else None
