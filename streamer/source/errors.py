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
