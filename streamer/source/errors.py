"""Errors of the source agent, all under streamer's root exception."""

from __future__ import annotations

from streamer.errors import ConfigError, StreamerError


class PolicyParseError(ConfigError):
    """A replication policy is not valid Hive syntax; names the position and the expected token."""

    def __init__(self, text: str, position: int, expected: str, found: str | None = None) -> None:
        self.text = text
        self.position = position
        self.expected = expected
        self.found = found
        got = "end of policy" if found is None else repr(found)
        pointer = f"\n  {text}\n  {' ' * position}^"
        super().__init__(f"replication policy {text!r}: at position {position} expected {expected}, "
                         f"found {got}{pointer}")


class LogResetError(StreamerError):
    """The notification log's newest id is below what was already published: the log was reset."""

    def __init__(self, head_event_id: int, last_published_id: int) -> None:
        self.head_event_id = head_event_id
        self.last_published_id = last_published_id
        super().__init__(
            f"notification log head {head_event_id} is below the last published event id "
            f"{last_published_id}: the source log was reset or points at another metastore; "
            "a new bootstrap (and a new topic) is needed"
        )


class LogOrderError(StreamerError):
    """The reader returned event ids out of order or twice: the log or the reader is broken."""


class UnfinishedBootstrapError(StreamerError):
    """The topic ends inside a bootstrap: publishing incremental events after it would let targets
    take the partial dump for the whole one and lose the objects it lacks."""

    def __init__(self, topic: str, bootstrap_id: int, sequence: int, total: int) -> None:
        self.bootstrap_id = bootstrap_id
        super().__init__(
            f"topic {topic} ends inside bootstrap {bootstrap_id} (record {sequence} of {total}, no "
            "marker): finish it first (run `streamer bootstrap` again with the same --work-dir and "
            "policy), or publish a new one, then start the agent"
        )


class ProducerFencedError(StreamerError):
    """Another agent took over this source's transactional id; two agents must never run at once."""


class RecordTooLargeError(StreamerError):
    """An event's record does not fit the size limit: retrying cannot help, so the agent stops.

    ``by`` says who refused it: the agent's own limit (``--max-record-bytes``) or the broker (the
    topic's ``max.message.bytes``, for a compressed batch)."""

    def __init__(self, event_id: int, event_type: str, obj: str | None, size: int, limit: int | None,
                 by: str = "agent") -> None:
        self.event_id = event_id
        self.size = size
        self.limit = limit
        what = f"event {event_id} ({event_type}{' ' + obj if obj else ''})"
        if by == "agent":
            fix = (f"exceeds --max-record-bytes {limit:,} bytes; raise --max-record-bytes "
                   "(STREAMER_MAX_RECORD_BYTES) above it, and the topic's max.message.bytes with it")
        else:
            fix = ("was refused by the broker (MSG_SIZE_TOO_LARGE): raise the topic's max.message.bytes "
                   "(kafka-configs --alter --entity-type topics --add-config max.message.bytes=...) and "
                   "the brokers' socket.request.max.bytes if needed, or use a stronger --compression")
        super().__init__(f"{what}: its record of {size:,} bytes {fix}; the agent stops here, nothing "
                         "after this event is published")
