"""The plain-SQL bracket in Spark: read the marks, REFRESH the tables, run the query, read the marks again.

An engine reading a replica with SQL gets one source state only when no mark moved during the query
and the engine listed the tables' files during it: a long-lived Spark session keeps each table's file
listing from its first read, so without ``REFRESH TABLE`` it answers from an older state whatever
the marks say. :func:`bracket` does the whole recipe; :func:`parse_properties` reads the marks'
``DESCRIBE DATABASE EXTENDED`` text for engines and tools that get it as one string.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from streamer.metastore.catalog import FENCE_PARAM
from streamer.read.decision import Decision, Verdict, decide_marks
from streamer.read.errors import (
    MarksFormatError,
    MarksMoved,
    SnapshotError,
    SnapshotTimeout,
    TableNotFound,
    UnknownDatabase,
)
from streamer.read.model import DbMark, Marks, table_key
from streamer.read.resolve import marks_from

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

T = TypeVar("T")

_SPARK_PAIR = re.compile(r"\(([^,()]+),(.*?)\)(?:, |$)")


def parse_properties(text: str) -> dict[str, str]:
    """A database's parameters from the properties text ``DESCRIBE DATABASE EXTENDED`` prints:
    Spark's ``((k1,v1), (k2,v2))`` or Hive's ``{k1=v1, k2=v2}``; empty for ``()``, ``{}`` or ``""``.

    Values may hold commas (``streamer.watermark.halted=a,b``); keys may not, nor ``=`` in Hive's form.
    """
    body = text.strip()
    if body in ("", "()", "{}"):
        return {}
    if body.startswith("((") and body.endswith("))"):
        inner = body[1:-1]
        out: dict[str, str] = {}
        pos = 0
        while pos < len(inner):
            match = _SPARK_PAIR.match(inner, pos)
            if match is None:
                raise MarksFormatError(f"cannot read database properties {text!r} at {inner[pos:]!r}")
            out[match.group(1).strip()] = match.group(2)
            pos = match.end()
        return out
    if body.startswith("{") and body.endswith("}"):
        out = {}
        for item in re.split(r", (?=[^,=]+=)", body[1:-1]):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise MarksFormatError(f"cannot read database properties {text!r} at {item!r}")
            out[key.strip()] = value
        return out
    raise MarksFormatError(
        f"database properties {text!r} are neither Spark's ((k,v), ...) nor Hive's {{k=v, ...}}"
    )


def sql_marks(spark: SparkSession, dbs: Sequence[str], watermark_db: str | None = None) -> Marks:
    """The marks of ``dbs`` and their watermark as the query's own engine sees them (Spark SQL)."""
    return marks_from(lambda db: _describe(spark, db), dbs, watermark_db)


def _describe(spark: SparkSession, db: str) -> Mapping[str, str] | None:
    from pyspark.errors import AnalysisException

    try:
        rows = spark.sql(f"DESCRIBE DATABASE EXTENDED `{db}`").collect()
    except AnalysisException as exc:
        if "SCHEMA_NOT_FOUND" in str(exc) or "not found" in str(exc).lower():
            return None
        raise
    props = next((str(r[1]) for r in rows if str(r[0]).lower() in ("properties", "parameters")), "")
    return parse_properties(props)


@dataclass(frozen=True)
class Bracketed(Generic[T]):
    """A query's result and the source event id its tables showed (at least; see ``snapshot``)."""

    result: T
    event_id: int
    last_ids: Mapping[str, int]
    attempts: int


def bracket(
    spark: SparkSession,
    tables: Sequence[str],
    query: Callable[[], T],
    *,
    min_event_id: int | None = None,
    timeout: float = 60.0,
    retries: int = 3,
    poll_seconds: float = 0.2,
    watermark_db: str | None = None,
) -> Bracketed[T]:
    """Run ``query`` (which must read ``tables`` and return materialized results: ``collect()``,
    ``count()``, ...) between two readings of the marks, after ``REFRESH TABLE`` of each table.

    Marks that moved during the query (a ``repl.last.id``, the watermark, or an apply fence set or
    removed) run it again, up to ``retries`` more times, then
    :class:`MarksMoved`; ``min_event_id`` and ``timeout`` wait as :func:`~streamer.read.snapshot`
    does (:class:`SnapshotTimeout`). An unknown database raises :class:`UnknownDatabase`, a table
    missing :class:`TableNotFound`, a halted database read with others (or one that halted while
    applied out of event-id order: the apply fence stays) :class:`SnapshotError`.
    """
    names = list(dict.fromkeys(table_key(t) for t in tables))
    if not names:
        raise SnapshotError("bracket needs the tables the query reads")
    dbs = sorted({n.split(".", 1)[0] for n in names})
    deadline = time.monotonic() + timeout
    attempts = moved = 0
    while True:
        attempts += 1
        before = sql_marks(spark, dbs, watermark_db)
        decision = decide_marks(before, dbs, min_event_id)
        if decision.verdict is Verdict.READ:
            _refresh(spark, names, before)
            result = query()
            after = sql_marks(spark, dbs, watermark_db)
            if after == before:
                assert decision.event_id is not None
                ids = {db: m.last_id for db, m in before.databases.items() if m.last_id is not None}
                return Bracketed(result, decision.event_id, ids, attempts)
            moved += 1
            decision = Decision(Verdict.RETRY, f"the marks moved during the query: {_moves(before, after)}")
            if moved > retries:
                raise MarksMoved(f"{names}: the marks moved during each of {moved} runs of the query; "
                                 f"last: {decision.reason}")
        _stop_or_wait(decision, names, attempts, deadline, timeout, poll_seconds)


def _refresh(spark: SparkSession, names: Sequence[str], marks: Marks) -> None:
    """Drop Spark's cached file listing of each table, so the query lists the files now."""
    from pyspark.errors import AnalysisException

    for name in names:
        db, table = name.split(".", 1)
        if not marks.databases[db].exists:
            raise UnknownDatabase(f"database {db} (of {name}) does not exist on the target")
        try:
            spark.sql(f"REFRESH TABLE `{db}`.`{table}`")
        except AnalysisException as exc:
            first = str(exc).splitlines()[0]
            raise TableNotFound(f"table {name} does not exist on the target: {first}") from None


def _stop_or_wait(
    decision: Decision, names: Sequence[str], attempts: int, deadline: float, timeout: float, poll: float
) -> None:
    if decision.verdict is Verdict.FAIL:
        raise SnapshotError(f"cannot read {names} consistently: {decision.reason}")
    if decision.verdict is Verdict.MISSING:
        raise UnknownDatabase(f"cannot read {names}: {decision.reason}")
    log.debug("bracket attempt %d of %s: %s", attempts, names, decision.reason)
    if time.monotonic() >= deadline:
        raise SnapshotTimeout(
            f"no consistent read of {names} within {timeout:g} s ({attempts} attempts): {decision.reason}"
        )
    pause = poll if decision.verdict is Verdict.WAIT else poll / 4
    time.sleep(min(pause, max(0.0, deadline - time.monotonic())))


def _moves(before: Marks, after: Marks) -> str:
    moved: list[str] = []
    for db, m in before.databases.items():
        now = after.databases.get(db, DbMark(False))
        if now.last_id != m.last_id or now.exists != m.exists:
            moved.append(f"{db} repl.last.id {m.last_id} -> {now.last_id}")
        if now.fence != m.fence:  # a batch began (or ended) applying it out of order
            moved.append(f"{db} {FENCE_PARAM} {m.fence} -> {now.fence}")
    if before.watermark != after.watermark:
        old = before.watermark.event_id if before.watermark else None
        new = after.watermark.event_id if after.watermark else None
        moved.append(f"watermark {old} -> {new}")
    return ", ".join(moved)
