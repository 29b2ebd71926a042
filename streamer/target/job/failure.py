"""What a failed target query stops the job with, decided from the failure's text and a re-check of
the topic, free of I/O (``streaming.query_failure`` does the asking).

Data loss is reported only when a reachable broker confirms it: the offset the job resumes from is
not held by the partition (or the partition does not exist) in a broker's answer. A failure whose
text says ``DataLossError`` is not enough on its own; when the broker cannot be reached to confirm
it (a stalled or restarting broker), the job stops with a transport error: nothing is known to be
lost, and a restart resumes from the checkpoint, where the source checks the topic again and the
event chain stops at any missing record.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from streamer.errors import DataLossError, StreamerError
from streamer.kafka.errors import KafkaClientError
from streamer.kafka.record_limit import OversizedRecordError


class Outcome(enum.Enum):
    LOST = "lost"  # a reachable broker's answer shows the records are gone (detail: the loss)
    HELD = "held"  # a reachable broker holds the offset the job resumes from
    UNREACHABLE = "unreachable"  # the broker did not answer (detail: the transport error)
    UNCHECKED = "unchecked"  # no offset to check (nothing committed, and the failure names none)


@dataclass(frozen=True)
class Recheck:
    """The re-check of the topic after the query failed."""

    outcome: Outcome
    detail: str = ""  # the DataLossError's message (LOST) or the transport error (UNREACHABLE)
    offset: int | None = None  # the offset checked
    marks: tuple[int, int] | None = None  # the partition's (low, high) when HELD (None: no topic yet)


def says_data_loss(failure: str) -> bool:
    """The query's failure names a DataLossError (the source's data-loss check, or a record read)."""
    return "DataLossError" in failure


_LOSS_LINE = re.compile(r"DataLossError: (.*)")
# the offset in the source's data-loss messages (spark_source_options.data_loss_message, topics.is_data)
_NEEDED = re.compile(r"data loss on topic '(?P<topic>[^']*)' partition (?P<partition>\d+): "
                     r"(?:the query needs offset|offset) (?P<offset>\d+)")


def reported_offset(failure: str, topic: str) -> tuple[int, int] | None:
    """(partition, offset) the failure's data-loss message names for ``topic``, if it names one."""
    for found in _NEEDED.finditer(failure):
        if found["topic"] == topic:
            return int(found["partition"]), int(found["offset"])
    return None


def first_line(failure: str) -> str:
    """The line an operator reads first: the DataLossError's own, else the failure's first line."""
    loss = _LOSS_LINE.search(failure)
    if loss is not None:
        return f"DataLossError: {loss[1].strip()}"
    text = failure.strip()
    return text.splitlines()[0] if text else failure


def failure_error(failure: str, recheck: Recheck, where: str) -> StreamerError:
    """The error the job stops with; a ``DataLossError`` only when ``recheck`` confirmed the loss.
    ``where``: the topic and partition, as "'topic' partition N"."""
    resume = "restarting the job resumes from its checkpoint, where the source checks the topic again"
    if recheck.outcome is Outcome.LOST:
        return DataLossError(f"{recheck.detail} (the query failed with: {first_line(failure)})")
    oversized = OversizedRecordError.from_failure(failure)
    if oversized is not None:  # the source refused a record: the stream stops at it
        return oversized
    if not says_data_loss(failure):
        return StreamerError(f"target query failed: {failure}")
    if recheck.outcome is Outcome.UNREACHABLE:
        return KafkaClientError(
            f"target query failed: the Kafka broker is unreachable, so the data loss the query reported "
            f"could not be confirmed and is not reported as one ({recheck.detail}); a stalled or "
            f"restarting broker looks like this. Nothing is known to be lost: {resume} once the broker "
            f"answers. The query failed with: {first_line(failure)}"
        )
    if recheck.outcome is Outcome.HELD:
        held = (
            f"holds offsets {recheck.marks[0]}..{recheck.marks[1]}, offset {recheck.offset} included"
            if recheck.marks is not None
            else "does not exist and nothing of it was read yet"
        )
        return StreamerError(
            f"target query failed reporting data loss that the broker does not confirm: topic {where} "
            f"{held}; {resume} (records missing from a refilled topic stop the job at the event "
            f"chain). The query failed with: {first_line(failure)}"
        )
    return StreamerError(
        f"target query failed reporting data loss that could not be checked (no offset to check on topic "
        f"{where}); {resume}. The query failed with: {first_line(failure)}"
    )
