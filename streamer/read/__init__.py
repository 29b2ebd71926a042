"""Reading a replica consistently: several tables as of one source event id.

:func:`snapshot` reads the published watermark and the databases' ``repl.last.id``, resolves every
table (metadata, partitions, exact data files) twice and reads the ids again, retrying until both
readings agree: one source prefix. It then materializes exactly the resolved files and checks that
they did not change meanwhile. :func:`bracket` is the plain-SQL recipe in Spark (marks, REFRESH,
query, marks again); :func:`parse_properties` reads the marks' ``DESCRIBE DATABASE`` text. Protocol,
cost and what ``event_id`` promises: docs/design/consistency.md.
"""

from streamer.read.decision import Decision, Verdict, decide, decide_marks
from streamer.read.errors import (
    MarksFormatError,
    MarksMoved,
    SnapshotError,
    SnapshotReleased,
    SnapshotTimeout,
    TableNotFound,
    UnknownDatabase,
)
from streamer.read.model import UNPARTITIONED, DbMark, Marks, PinnedFile, PinnedTable
from streamer.read.resolve import marks_from, read_marks, resolve, still_there
from streamer.read.snapshot import Snapshot, snapshot, snapshot_from
from streamer.read.sql import Bracketed, bracket, parse_properties, sql_marks

__all__ = [
    "UNPARTITIONED",
    "Bracketed",
    "DbMark",
    "Decision",
    "Marks",
    "MarksFormatError",
    "MarksMoved",
    "PinnedFile",
    "PinnedTable",
    "Snapshot",
    "SnapshotError",
    "SnapshotReleased",
    "SnapshotTimeout",
    "TableNotFound",
    "UnknownDatabase",
    "Verdict",
    "bracket",
    "decide",
    "decide_marks",
    "marks_from",
    "parse_properties",
    "read_marks",
    "resolve",
    "snapshot",
    "snapshot_from",
    "sql_marks",
    "still_there",
]
