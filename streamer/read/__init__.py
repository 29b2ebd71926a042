"""Reading a replica consistently: several tables as of one source event id.

:func:`snapshot` reads the published watermark and the databases' ``repl.last.id``, resolves every
table (metadata, partitions, exact data files) twice and reads the ids again, retrying until both
readings agree: one source prefix. It then materializes exactly the resolved files and checks that
they did not change meanwhile (or, with ``materialize=False``, checks them when read). A
:class:`Snapshot` is a mapping of table to DataFrame and can register its tables as temporary views.
:func:`bracket_sql` and :func:`bracket` run plain Spark SQL checked the same way (tables pinned,
refreshed, the query run, the tables resolved again; a race runs it again until the timeout);
:func:`parse_properties` reads the marks' ``DESCRIBE DATABASE`` text. Protocol, cost and what
``event_id`` promises: docs/design/consistency.md.
"""

from streamer.read.decision import Decision, Verdict, decide, decide_marks
from streamer.read.errors import (
    MarksFormatError,
    MarksMoved,
    SnapshotError,
    SnapshotExpired,
    SnapshotReleased,
    SnapshotTimeout,
    TableNotFound,
    UnknownDatabase,
)
from streamer.read.model import UNPARTITIONED, DbMark, Marks, PinnedFile, PinnedTable
from streamer.read.races import Thrown, lazy_part, refuse_lazy, throwable_trail, vanished_file
from streamer.read.resolve import first_changed, marks_from, read_marks, resolve, still_there
from streamer.read.snapshot import Snapshot, snapshot, snapshot_from
from streamer.read.sql import (
    Bracketed,
    bracket,
    bracket_sql,
    parse_properties,
    plan_tables,
    session_hms_uri,
    sql_marks,
    tables_read,
)

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
    "SnapshotExpired",
    "SnapshotReleased",
    "SnapshotTimeout",
    "TableNotFound",
    "Thrown",
    "UnknownDatabase",
    "Verdict",
    "bracket",
    "bracket_sql",
    "decide",
    "decide_marks",
    "first_changed",
    "lazy_part",
    "marks_from",
    "parse_properties",
    "plan_tables",
    "read_marks",
    "refuse_lazy",
    "resolve",
    "session_hms_uri",
    "snapshot",
    "snapshot_from",
    "sql_marks",
    "still_there",
    "tables_read",
    "throwable_trail",
    "vanished_file",
]
