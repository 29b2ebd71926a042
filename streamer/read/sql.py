"""Plain Spark SQL over a live replica, checked: pin the tables, REFRESH them, run the query, check
that none of its tables changed while it ran, and run it again when one did.

A Spark query lists a table's files when it is planned and reads them while it runs; the target may
replace or remove them in between (the query then fails on a vanished file or, with a file name
reused, reads newer rows), and a long-lived session keeps each table's listing from its first read
unless the table is refreshed. :func:`bracket` runs a callable over tables the caller names;
:func:`bracket_sql` runs SQL text and takes the tables from Spark's analyzed plan, so none can be
forgotten. :func:`parse_properties` reads the marks' ``DESCRIBE DATABASE EXTENDED`` text for engines
and tools that get it as one string. Why each step is needed: docs/design/consistency.md.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from streamer.errors import StreamerError
from streamer.metastore.catalog import Catalog
from streamer.metastore.transport import HmsAuth
from streamer.read.decision import Decision, Verdict, decide, decide_marks
from streamer.read.errors import (
    MarksFormatError,
    MarksMoved,
    SnapshotError,
    SnapshotTimeout,
    TableNotFound,
    UnknownDatabase,
)
from streamer.read.model import Marks, PinnedTable, table_key
from streamer.read.races import refuse_lazy, throwable_trail, vanished_file
from streamer.read.resolve import Raced, marks_from, read_marks, resolve

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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
    """A query's result, the source event id its tables showed (at least; see ``snapshot``), the
    databases' ``repl.last.id``, how many attempts it took and the tables it was checked over."""

    result: T
    event_id: int
    last_ids: Mapping[str, int]
    attempts: int
    tables: tuple[str, ...] = ()


def bracket(
    spark: SparkSession,
    tables: Sequence[str],
    query: Callable[[], T],
    *,
    min_event_id: int | None = None,
    timeout: float = 60.0,
    retries: int | None = None,
    poll_seconds: float = 0.2,
    watermark_db: str | None = None,
    hms_uri: str | None = None,
    hms_auth: HmsAuth | None = None,
) -> Bracketed[T]:
    """Run ``query`` so that its result is the replica's state after one source event id, running it
    again whenever it raced the target, until ``timeout``.

    ``tables`` must name **every** table the query reads: Spark cannot tell which tables a Python
    callable read, and a table left out is not checked (its rows may be of another state). Prefer
    :func:`bracket_sql`, which finds them in the query's plan. ``query`` must return data
    (``collect()``, ``count()``, ``toPandas()``, a write): a lazy DataFrame, Column, grouped data,
    RDD or iterator (also inside a list, tuple, dict or dataclass) is refused with ``TypeError``.

    Each attempt pins the tables (marks, metadata and exact files, as :func:`~streamer.read.snapshot`
    resolves them), refreshes them (``REFRESH TABLE``), runs the query and resolves them again: a table that
    changed meanwhile, or a file that vanished under the query (Spark's
    ``FAILED_READ_FILE.FILE_NOT_EXIST``), runs it again. Other errors of the query are raised as they
    are. ``timeout`` bounds the whole call (a run in progress is not interrupted):
    :class:`SnapshotTimeout` says why the last attempt did not hold. ``retries``, when given, also
    stops after that many raced runs (:class:`MarksMoved`); by default only ``timeout`` does.
    ``min_event_id`` waits for that source event. ``hms_uri`` is the target metastore the session
    uses (default: the session's ``hive.metastore.uris``). An unknown database raises
    :class:`UnknownDatabase`, a missing table :class:`TableNotFound`, a halted database read with
    others or an ACID replica :class:`SnapshotError`.
    """
    names = list(dict.fromkeys(table_key(t) for t in tables))
    if not names:
        raise SnapshotError("bracket needs every table the query reads (or use bracket_sql)")
    with _catalog(spark, hms_uri, hms_auth) as catalog:
        return _bracket(spark, catalog, names, query, "bracket", min_event_id=min_event_id, timeout=timeout,
                        retries=retries, poll_seconds=poll_seconds, watermark_db=watermark_db)


def bracket_sql(
    spark: SparkSession,
    sql: str,
    *,
    action: Callable[[DataFrame], Any] | None = None,
    min_event_id: int | None = None,
    timeout: float = 60.0,
    retries: int | None = None,
    poll_seconds: float = 0.2,
    watermark_db: str | None = None,
    hms_uri: str | None = None,
    hms_auth: HmsAuth | None = None,
) -> Bracketed[Any]:
    """:func:`bracket` of a SQL query whose tables come from Spark's analyzed plan (views, subqueries
    and CTEs included), so none can be left out. ``action`` turns the query's DataFrame into data
    (default ``DataFrame.collect``; e.g. ``lambda df: df.toPandas()``); the DataFrame is built anew
    after each refresh. Only queries: a command (INSERT, CREATE, CACHE, SET, ...) is refused before it
    runs. Tables of other catalogs (DataSource V2) are refused; files read by path are not tables
    and are not checked. ``Bracketed.tables`` lists the tables found.
    """
    run_action = action if action is not None else _collect
    names = tables_read(spark, sql)
    with _catalog(spark, hms_uri, hms_auth) as catalog:
        deadline = time.monotonic() + timeout
        while True:
            def run(wanted: Sequence[str] = tuple(names)) -> Any:
                df = spark.sql(sql)
                found = plan_tables(df._jdf.queryExecution().analyzed())
                if set(found) != set(wanted):  # a view redefined since: bracket those tables instead
                    raise _OtherTables(found)
                return run_action(df)

            try:
                return _bracket(
                    spark, catalog, names, run, "bracket_sql", min_event_id=min_event_id,
                    timeout=max(0.0, deadline - time.monotonic()), retries=retries,
                    poll_seconds=poll_seconds, watermark_db=watermark_db,
                )
            except _OtherTables as other:
                log.debug("bracket_sql: the query's tables changed from %s to %s", names, other.names)
                if not other.names:
                    raise SnapshotError("the query reads no table of the catalog any more") from None
                names = other.names


def _collect(df: DataFrame) -> Any:
    return df.collect()


class _OtherTables(StreamerError):
    """The query's plan reads other tables than those pinned (a view redefined): pin those."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.names = names


def tables_read(spark: SparkSession, sql: str) -> list[str]:
    """The catalog tables (``db.table``) a SQL query reads, from Spark's analyzed plan; refuses
    commands (which ``spark.sql`` would run at once) without running them."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import convert_exception

    try:
        parsed = spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)
    except Py4JJavaError as exc:
        raise convert_exception(exc.java_exception) from None
    kind = parsed.getClass()
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    command = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.plans.logical.Command")
    if command.isAssignableFrom(kind) or str(kind.getSimpleName()).startswith("Insert"):
        raise SnapshotError(
            f"bracket_sql runs queries (SELECT, WITH, ...), not a {kind.getSimpleName()}: "
            "run commands outside the bracket"
        )
    names = plan_tables(spark.sql(sql)._jdf.queryExecution().analyzed())
    if not names:
        raise SnapshotError("the query reads no table of the catalog: nothing to bracket")
    return names


def plan_tables(plan: Any) -> list[str]:
    """The catalog tables of an analyzed logical plan (a Py4J ``LogicalPlan``), in plan order: Hive
    relations and file relations of the catalog, through children, subqueries and views. A table of
    another catalog (DataSource V2) is refused: the bracket cannot pin it."""
    out: dict[str, None] = {}
    stack = [plan]
    while stack:
        node = stack.pop()
        kind = str(node.getClass().getSimpleName())
        if kind == "HiveTableRelation":
            out[_identifier(node.tableMeta().identifier())] = None
        elif kind == "LogicalRelation":
            table = node.catalogTable()
            if table.isDefined():
                out[_identifier(table.get().identifier())] = None
        elif kind.startswith("DataSourceV2") and "Relation" in kind:
            raise SnapshotError(
                f"the query reads {node.simpleString(5)} of another catalog: the bracket reads tables of "
                "the session catalog (the target metastore) only"
            )
        for seq in (node.subqueries(), node.children()):
            found = []
            it = seq.iterator()
            while it.hasNext():
                found.append(it.next())
            stack.extend(reversed(found))
    return list(out)


def _identifier(ident: Any) -> str:
    db = ident.database()
    return table_key(f"{db.get() if db.isDefined() else 'default'}.{ident.table()}")


def session_hms_uri(spark: SparkSession) -> str | None:
    """The metastore a Hive-enabled session reads its tables from (the first of
    ``hive.metastore.uris``), or None for an embedded or in-memory catalog."""
    value = spark.sparkContext._jsc.hadoopConfiguration().get("hive.metastore.uris")
    for key in ("spark.hadoop.hive.metastore.uris", "spark.hive.metastore.uris"):
        value = value or spark.conf.get(key, None)
    first = str(value or "").split(",")[0].strip()
    return first or None


@contextmanager
def _catalog(spark: SparkSession, hms_uri: str | None, auth: HmsAuth | None) -> Iterator[Catalog]:
    """The target metastore's Thrift catalog for one bracket call."""
    from streamer.metastore.thrift import HmsCatalog

    uri = hms_uri or session_hms_uri(spark)
    if not uri:
        raise SnapshotError(
            "bracket pins the tables' files through the target metastore: pass hms_uri="
            "'thrift://host:port' (the session has no hive.metastore.uris)"
        )
    with HmsCatalog(uri, auth=auth) as catalog:
        yield catalog


def _bracket(
    spark: SparkSession,
    catalog: Catalog,
    names: Sequence[str],
    query: Callable[[], T],
    what: str,
    *,
    min_event_id: int | None,
    timeout: float,
    retries: int | None,
    poll_seconds: float,
    watermark_db: str | None,
) -> Bracketed[T]:
    dbs = sorted({n.split(".", 1)[0] for n in names})
    deadline = time.monotonic() + timeout
    attempts = raced = 0
    while True:
        attempts += 1
        decision, pinned, before = _pin(spark, catalog, names, dbs, min_event_id, watermark_db)
        if decision.verdict is Verdict.READ and pinned is not None:
            assert decision.event_id is not None
            outcome = _run(catalog, pinned, query, what)
            if isinstance(outcome, _Done):
                ids = {db: m.last_id for db, m in before.databases.items() if m.last_id is not None}
                return Bracketed(outcome.result, decision.event_id, ids, attempts, tuple(names))
            raced += 1
            decision = Decision(Verdict.RETRY, outcome)
            if retries is not None and raced > retries:
                raise MarksMoved(f"{list(names)}: the query raced the target in each of its {raced} runs "
                                 f"(retries={retries}); last: {outcome}")
        _stop_or_wait(decision, names, attempts, raced, deadline, timeout, poll_seconds)


@dataclass(frozen=True)
class _Done(Generic[T]):
    result: T


def _pin(
    spark: SparkSession,
    catalog: Catalog,
    names: Sequence[str],
    dbs: Sequence[str],
    min_event_id: int | None,
    watermark_db: str | None,
) -> tuple[Decision, list[PinnedTable] | None, Marks]:
    """The marks, each table resolved (metadata, exact files) and the marks again, as a snapshot's
    attempt; on READ the tables are refreshed, so the query lists their files after this point."""
    before = read_marks(catalog, dbs, watermark_db)
    early = decide_marks(before, dbs, min_event_id)
    if early.verdict is not Verdict.READ:
        return early, None, before
    try:
        pinned = [resolve(catalog, name) for name in names]
    except Raced as exc:
        return Decision(Verdict.RETRY, str(exc)), None, before
    after = read_marks(catalog, dbs, watermark_db)
    decision = decide(before, after, pinned, pinned, dbs, min_event_id)
    if decision.verdict is not Verdict.READ:
        return decision, None, before
    for table in pinned:
        db = table.name.split(".", 1)[0]
        if table.table is None:
            if not before.databases[db].exists:
                raise UnknownDatabase(f"database {db} (of {table.name}) does not exist on the target")
            raise TableNotFound(f"table {table.name} does not exist at source event {decision.event_id}")
        if table.write_ids is not None:
            raise SnapshotError(
                f"{table.name} is an ACID replica: plain Spark SQL reads its files of every write id, "
                "committed or not; read it with streamer.read.snapshot"
            )
    raced = _refresh(spark, catalog, names)
    if raced is not None:
        return Decision(Verdict.RETRY, raced), None, before
    return decision, pinned, before


def _run(
    catalog: Catalog, pinned: Sequence[PinnedTable], query: Callable[[], T], what: str
) -> _Done[T] | str:
    """The query's result when none of its tables changed while it ran; else why it raced."""
    try:
        result = query()
    except _OtherTables:
        raise
    except Exception as exc:
        gone = vanished_file(throwable_trail(exc))
        if gone is not None:
            where = _first_line(gone.message) or gone.kind
            return f"a file the query listed was gone when it read it ({where}): an apply replaced it"
        changed = _changed(catalog, pinned)
        if not changed:
            raise  # the query's own error: the tables are as pinned
        return f"the query failed while {changed} changed ({type(exc).__name__}: {_first_line(str(exc))})"
    refuse_lazy(result, what)
    changed = _changed(catalog, pinned)
    if changed:
        return f"{changed} changed while the query ran"
    return _Done(result)


def _changed(catalog: Catalog, pinned: Sequence[PinnedTable]) -> list[str]:
    """The pinned tables that are no longer as pinned (metadata, partitions, file identities)."""
    out = []
    for table in pinned:
        try:
            now = resolve(catalog, table.name)
        except Raced:
            now = None
        if now != table:
            out.append(table.name)
    return out


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and not line.startswith("An error occurred while calling"):
            return line.strip().removeprefix(": ")[:300]
    return ""


def _refresh(spark: SparkSession, catalog: Catalog, names: Sequence[str]) -> str | None:
    """Drop Spark's cached file listing of each table, so the query lists the files now; a table the
    target dropped since it was pinned is a race (the reason), one Spark does not know is an error."""
    from pyspark.errors import AnalysisException

    for name in names:
        db, table = name.split(".", 1)
        try:
            spark.sql(f"REFRESH TABLE `{db}`.`{table}`")
        except AnalysisException as exc:
            first = str(exc).splitlines()[0]
            if catalog.get_table(db, table) is None:
                return f"table {name} was dropped after it was pinned ({first})"
            raise TableNotFound(f"table {name} is on the target metastore but not in the Spark session's "
                                f"catalog: {first} (is the session on the target metastore?)") from None
    return None


def _stop_or_wait(
    decision: Decision, names: Sequence[str], attempts: int, raced: int, deadline: float, timeout: float,
    poll: float,
) -> None:
    if decision.verdict is Verdict.FAIL:
        raise SnapshotError(f"cannot read {list(names)} consistently: {decision.reason}")
    if decision.verdict is Verdict.MISSING:
        raise UnknownDatabase(f"cannot read {list(names)}: {decision.reason}")
    log.debug("bracket attempt %d of %s: %s", attempts, names, decision.reason)
    if time.monotonic() >= deadline:
        hint = ""
        if raced:
            hint = (f"; the query raced the target in {raced} of its runs: a query that runs longer than "
                    "the target's pace of changes to its tables cannot be bracketed, read a "
                    "streamer.read.snapshot instead")
        raise SnapshotTimeout(f"no consistent read of {list(names)} within {timeout:g} s ({attempts} "
                              f"attempts): {decision.reason}{hint}")
    pause = poll if decision.verdict is Verdict.WAIT else poll / 4
    time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
