"""What a reader of a replica is told when a consistent read cannot be had, typed so callers can act."""

from __future__ import annotations

from streamer.errors import StreamerError


class SnapshotError(StreamerError):
    """The tables cannot be read as one source state; the message says which database and why."""


class SnapshotTimeout(SnapshotError):
    """No consistent read (or not the wanted ``min_event_id``) within the timeout."""


class TableNotFound(SnapshotError, KeyError):
    """A requested table does not exist in the snapshot's source state, or a snapshot does not hold it.

    Also a ``KeyError``: ``snap["db.t"]`` of a table the snapshot did not read is a missing key.
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownDatabase(TableNotFound):
    """A database read does not exist on the target: nothing replicates it there (or not yet)."""


class SnapshotReleased(SnapshotError):
    """A snapshot's frame was used after :meth:`~streamer.read.Snapshot.release` freed its blocks."""


class SnapshotExpired(SnapshotReleased):
    """A snapshot taken with ``materialize=False`` lost a file it pinned: the target replaced or removed
    it (an overwrite, a truncate, a re-applied partition), so its frames cannot read its state any
    more. Take a new snapshot (or read through ``bracket``, which does so itself)."""


class MarksMoved(SnapshotTimeout):
    """A bracket's query raced the target (its tables changed, or a file vanished under it) in every
    run its ``retries`` allowed."""


class MarksFormatError(SnapshotError):
    """A ``DESCRIBE DATABASE`` properties text that is neither Spark's nor Hive's format."""
