"""What a reader resolves: the marks of the databases read and each table's exact files. Pure data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamer.events.model import TableSnapshot
from streamer.read.errors import SnapshotError
from streamer.target.job.watermark import Watermark

UNPARTITIONED = ""  # the partition name of an unpartitioned table's files


@dataclass(frozen=True)
class DbMark:
    """One target database as a reader sees it: present, its ``repl.last.id`` and source, and the
    apply fence (``streamer.apply.fence``: the first event id of the batch applying it out of event-id
    order; None when it is applied in order)."""

    exists: bool
    last_id: int | None = None
    source_id: str | None = None
    fence: str | None = None


@dataclass(frozen=True)
class Marks:
    """The watermark record and the involved databases' marks, read together."""

    watermark: Watermark | None
    databases: Mapping[str, DbMark]


@dataclass(frozen=True)
class PinnedFile:
    """One data file a snapshot read: where, and the identity that proves it is the same file."""

    relative: str  # path below its partition (or table) directory, ACID directory included
    url: str
    size: int
    identity: tuple[Any, ...]  # (size, modification time, inode) as the filesystem reports them


@dataclass(frozen=True)
class PinnedTable:
    """A table resolved at the snapshot's cut: its metastore snapshot and exact files per partition.

    ``partitions`` maps the Hive partition name (``""`` for an unpartitioned table) to its files;
    ``locations`` to its directory. ``write_ids`` are the committed write ids of an ACID replica
    (None for other tables). ``table`` None: the table does not exist at the cut.
    """

    name: str
    table: TableSnapshot | None
    partitions: Mapping[str, tuple[PinnedFile, ...]] = field(default_factory=dict)
    locations: Mapping[str, str] = field(default_factory=dict)
    write_ids: tuple[int, ...] | None = None

    def files(self) -> list[PinnedFile]:
        return [f for files in self.partitions.values() for f in files]



def table_key(name: str) -> str:
    """``db.table``, lower case, backquotes and blanks dropped; anything else is refused."""
    parts = [p.strip().strip("`").lower() for p in name.strip().split(".")]
    if len(parts) != 2 or not all(parts):
        raise SnapshotError(f"table name {name!r} must be 'db.table'")
    return f"{parts[0]}.{parts[1]}"
