"""Is a partition there, gone, or is the broker just not answering? A verdict from answers, no I/O.

librdkafka answers a watermark request with ``_UNKNOWN_PARTITION`` both for a partition the cluster
does not have and for one its own metadata cache does not know right now: after a broker stops
answering (a stall, a frozen VM, a restart) two timed-out requests empty that cache, and every later
request gets the same answer at once, from the client, without asking any broker. Taking it for
"does not exist" turned a stalled broker into a false data loss that halted the target.

So "does not exist" is concluded only from a metadata answer of a reachable broker: the metadata
request returned, lists brokers, and lists the topic with ``UNKNOWN_TOPIC_OR_PART`` or lists it
without the partition. Everything else that is not a pair of watermarks (timeouts, transport
errors, no brokers, a metadata answer that lists the partition after all) is ``UNREACHABLE``: the
caller asks again with backoff and, if it stays so, fails with a transport error, never data loss.
``streamer.kafka.topics.watermarks`` does the asking.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from confluent_kafka import KafkaError

# what a watermark request fails with for a partition the client does not know (maybe only its cache)
UNKNOWN = frozenset({KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART})
# what it fails with when no broker answered
UNREACHABLE = frozenset(
    {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._DESTROY_BROKER}
)


class Kind(enum.Enum):
    HELD = "held"  # the partition's watermarks were read
    ABSENT = "absent"  # a reachable broker lists no such topic or partition
    UNREACHABLE = "unreachable"  # no broker answered, or the answers settle nothing: ask again
    FAILED = "failed"  # an error that asking again will not cure


@dataclass(frozen=True)
class Metadata:
    """A metadata answer for one topic: ``list_topics(topic)`` returned."""

    brokers: int  # brokers the answer lists
    listed: bool = True  # the topic is in the answer
    topic_error: int | None = None  # the topic's error code in the answer
    partitions: frozenset[int] = frozenset()  # the topic's partitions in the answer


@dataclass(frozen=True)
class Answers:
    """What was observed about one partition: the watermark request's answer or error code, and,
    when that error was an unknown topic or partition, the metadata request's answer or error code."""

    marks: tuple[int, int] | None = None
    marks_error: int | None = None
    metadata: Metadata | None = None
    metadata_error: int | None = None


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    why: str
    marks: tuple[int, int] | None = None


def needs_metadata(marks_error: int | None) -> bool:
    """Whether a watermark error must be confirmed by a metadata request before anything is concluded."""
    return marks_error in UNKNOWN


def error_name(code: int | None) -> str:
    """librdkafka's name of an error code (``_TIMED_OUT``, ``UNKNOWN_TOPIC_OR_PART``)."""
    if code is None:
        return "no error"
    try:
        return str(KafkaError(code).name())
    except Exception:  # a code this librdkafka does not know
        return f"error {code}"


def verdict(partition: int, answers: Answers) -> Verdict:
    """What the answers about ``partition`` prove (see the module's docstring)."""
    if answers.marks is not None:
        return Verdict(Kind.HELD, "watermarks read", answers.marks)
    code = answers.marks_error
    if code is None:
        return Verdict(Kind.UNREACHABLE, "no answer to the watermark request")
    if code in UNREACHABLE:
        return Verdict(Kind.UNREACHABLE, f"no broker answered ({error_name(code)})")
    if code not in UNKNOWN:
        return Verdict(Kind.FAILED, f"the watermark request failed with {error_name(code)}")
    return _confirmed(partition, code, answers)


def _confirmed(partition: int, code: int, answers: Answers) -> Verdict:
    """A watermark request that said "unknown", weighed against the metadata answer."""
    said = f"the client answered {error_name(code)}"
    md = answers.metadata
    if md is None:
        if answers.metadata_error is None:
            return Verdict(Kind.UNREACHABLE, f"{said}, unconfirmed by any metadata answer")
        return Verdict(Kind.UNREACHABLE, f"{said} and no broker answered the metadata request "
                                         f"({error_name(answers.metadata_error)})")
    if md.brokers <= 0:
        return Verdict(Kind.UNREACHABLE, f"{said} and the metadata answer lists no broker")
    if not md.listed:
        return Verdict(Kind.UNREACHABLE, f"{said} and the metadata answer does not mention the topic")
    if md.topic_error == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return Verdict(Kind.ABSENT, "the broker lists no such topic")
    if md.topic_error is not None:  # e.g. LEADER_NOT_AVAILABLE while a leader is elected
        return Verdict(Kind.UNREACHABLE, f"{said} and the broker answered {error_name(md.topic_error)} "
                                         "for the topic")
    if partition not in md.partitions:
        return Verdict(Kind.ABSENT, f"the broker lists the topic without partition {partition}")
    return Verdict(Kind.UNREACHABLE, f"{said} but the broker lists the partition (the client's metadata "
                                     "was stale)")
