"""One root exception for streamer; subclasses carry the event id, object and cause.

Every error that reaches an operator must say which event, which object and why, so that a halted
stream can be diagnosed and retried without reading code.
"""

from __future__ import annotations


class StreamerError(Exception):
    """Root of every error streamer raises on purpose."""


class ConfigError(StreamerError):
    """A setting is missing or invalid; the message names the setting and the allowed values."""


class EventError(StreamerError):
    """An error tied to one notification event."""

    def __init__(
        self,
        cause: str,
        *,
        event_id: int | None = None,
        event_type: str | None = None,
        obj: str | None = None,
    ) -> None:
        self.cause = cause
        self.event_id = event_id
        self.event_type = event_type
        self.obj = obj
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.event_id is not None:
            parts.append(f"event {self.event_id}")
        if self.event_type:
            parts.append(self.event_type)
        if self.obj:
            parts.append(self.obj)
        where = " ".join(parts)
        return f"{where}: {self.cause}" if where else self.cause

    def to_dict(self) -> dict[str, object]:
        return {
            "error": type(self).__name__,
            "event_id": self.event_id,
            "event_type": self.event_type,
            "object": self.obj,
            "cause": self.cause,
        }


class DecodeError(EventError):
    """A notification message (or wire record) could not be decoded."""


class UnknownEventTypeError(DecodeError):
    """The event type is not one streamer knows; the caller decides whether that halts."""


class CodecError(StreamerError):
    """An Avro record could not be encoded or decoded."""


class InvalidNameError(DecodeError, CodecError):
    """A record names a database or table no metastore can hold: a control character (a tab or a
    newline would forge lines in what the target writes: logs, its progress journal) or a name longer
    than Hive's columns store."""


class EnvelopeMismatchError(DecodeError, CodecError):
    """A record's envelope names one database or table and its payload another.

    The target checks ownership of the envelope's database and keys progress by it, so a payload
    acting elsewhere would change what nothing checked (docs/security.md). A ``CodecError`` too: code
    that skips undecodable records skips these.
    """


class EventGapError(StreamerError):
    """The notification log is missing event ids: replication cannot continue without loss."""

    def __init__(self, first_missing: int, last_missing: int, detail: str = "") -> None:
        self.first_missing = first_missing
        self.last_missing = last_missing
        msg = f"notification log gap: event ids {first_missing}..{last_missing} are missing"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


class ApplyError(EventError):
    """An event could not be applied on a target; its database halts at this event."""


class ChecksumMismatchError(ApplyError):
    """Neither the source file nor its cmroot copy matches the checksum recorded in the event."""


class PathEscapeError(ApplyError):
    """A location from an event would write outside the target's roots."""


class UntrustedSourceError(ApplyError):
    """A file an event names lies outside the source's declared stores, or has no checksum to verify
    it by (``--source-prefix``, ``--allow-unverified-files``; docs/security.md)."""


class UnverifiableFileError(UntrustedSourceError):
    """A data file an event names carries no checksum (the source lost it before the agent could
    compute one): refused unless ``--allow-unverified-files``, or voided by a later overwrite."""


class DataLossError(StreamerError):
    """Records the consumer needed are gone from the topic (purged, trimmed, or broker restarted)."""


class EventChainError(DataLossError):
    """A record does not continue from the last one consumed: records between them are gone.

    Each record names the event id of the record before it in the topic (``prev_event_id``); a
    topic that was purged or recreated and refilled past the consumer's offset breaks that chain.
    """

    def __init__(
        self,
        topic: str,
        *,
        expected_prev: int,
        found_prev: int,
        event_id: int,
        event_type: str,
        offset: int,
        last_offset: int,
        same_offset: bool = False,
        missing: bool = False,
    ) -> None:
        self.topic = topic
        self.expected_prev = expected_prev
        self.found_prev = found_prev
        self.event_id = event_id
        self.event_type = event_type
        self.offset = offset
        self.last_offset = last_offset
        found = (
            f"holds no record of this stream now, where event {expected_prev} was consumed before, yet "
            f"the records before it are read again (the first is event {event_id} {event_type})"
            if missing
            else f"is event {event_id} {event_type}, not event {expected_prev} consumed there before"
            if same_offset
            else f"(event {event_id} {event_type}) follows event {found_prev}, but the last record consumed "
            f"(offset {last_offset}) was event {expected_prev}"
        )
        super().__init__(
            f"event chain broken on topic {topic!r}: the record at offset {offset} {found}; records "
            "between them are gone (the topic was purged or recreated and refilled). Nothing after the "
            "break was applied. Rebuild the target from a bootstrap, or accept the loss with "
            "`streamer target reset-chain`."
        )
