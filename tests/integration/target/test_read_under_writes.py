"""Plain Spark SQL and snapshots of a live replica while a writer keeps changing it (issue 40, items 8
and 9).

The writer's rounds span two databases: an order into ``shop.orders`` (partitioned), its payment into
``books.ledger``, and every third round an INSERT OVERWRITE of ``shop.items`` (the target replaces its
files, so a query that listed them before finds them gone). A read is one source state when its
orders and payments are prefixes with at most the newest order unpaid, and the items are the version
those rounds had; it reflects its claimed event id when every write up to that id shows.

``bracket`` runs the query again when a file vanished under it (Spark's
``FAILED_READ_FILE.FILE_NOT_EXIST``), refuses a lazy result, and ``bracket_sql`` finds the tables
itself. A snapshot is a mapping, registers temporary views for SQL, and with ``materialize=False``
reads the pinned files lazily and expires (``SnapshotExpired``) once the target replaced one.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from streamer.events.model import Column
from streamer.kafka.broker import EmbeddedBroker
from streamer.read import SnapshotExpired, snapshot
from streamer.warehouse import Warehouse
from tests.fixtures.spark_child import SparkChild, session_script
from tests.integration.target.helpers import Source, TargetStack, wait_converged
from tests.integration.target.in_process import TargetInProcess, TargetJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

COLS = [Column("id", "int"), Column("amount", "bigint")]
INITIAL_ITEMS = 3  # rows of shop.items before the first overwrite (amount -1)
PACE = 2.0  # seconds between rounds (about one source event a second): a steady writer, not a backlog
DEADLINE = 150.0  # seconds of writing at most while the readers read


@dataclass
class _Rounds:
    """The event id at which each write became part of the source's state."""

    orders: list[int] = field(default_factory=list)
    payments: list[int] = field(default_factory=list)
    overwrites: dict[int, int] = field(default_factory=dict)  # round -> event id of its items overwrite

    def version(self, last_round: int) -> int:
        """The items' version after round ``last_round`` (-1: the initial items)."""
        return max((r for r in self.overwrites if r <= last_round), default=-1)


def _setup(wh: Warehouse, shop: str, books: str) -> list[str]:
    for db in (shop, books):
        wh.create_database(db)
    wh.create_table(shop, "orders", COLS, [Column("dt", "string")])
    wh.create_table(shop, "items", COLS)
    wh.create_table(books, "ledger", COLS)
    wh.insert(shop, "items", [{"id": i, "amount": -1} for i in range(INITIAL_ITEMS)])
    return [f"{shop}.orders", f"{shop}.items", f"{books}.ledger"]


def _round(wh: Warehouse, shop: str, books: str, r: int, rounds: _Rounds, every: int = 3) -> None:
    """Round ``r``: an order, its payment, and every ``every`` rounds an overwrite of the items."""
    rounds.orders.append(wh.insert(shop, "orders", [{"id": r, "amount": 10 * r}], {"dt": f"d{r % 3}"})[0])
    rounds.payments.append(wh.insert(books, "ledger", [{"id": r, "amount": -10 * r}])[0])
    if r % every == every - 1:
        items = [{"id": i, "amount": r} for i in range(r % 4 + 1)]
        rounds.overwrites[r] = wh.insert(shop, "items", items, overwrite=True)[0]


def _query(shop: str, books: str) -> str:
    return (f"SELECT 'o' AS t, id, amount FROM {shop}.orders UNION ALL "
            f"SELECT 'l', id, amount FROM {books}.ledger UNION ALL SELECT 'i', id, amount FROM {shop}.items")


def _judge(rows: list[list[Any]], claimed: int, rounds: _Rounds) -> str | None:
    """Why ``rows`` (of :func:`_query`) are not one source state reflecting ``claimed``; None if they are."""
    orders = sorted(i for t, i, _ in rows if t == "o")
    ledger = sorted(i for t, i, _ in rows if t == "l")
    items = [a for t, _, a in rows if t == "i"]
    n, m = len(orders), len(ledger)
    if orders != list(range(n)) or ledger != list(range(m)) or n - m not in (0, 1):
        return f"orders {orders} and payments {ledger}: no source state has them together"
    versions = set(items)
    if len(versions) != 1:
        return f"items of several versions {sorted(versions)}"
    v = versions.pop()
    if len(items) != (INITIAL_ITEMS if v == -1 else v % 4 + 1):
        return f"items version {v} with {len(items)} rows"
    last = m - 1  # the newest paid round; its overwrite (if any) comes after its payment
    allowed = {rounds.version(last)} if n > m else {rounds.version(last), rounds.version(last - 1)}
    if n == m and last not in rounds.overwrites:
        allowed = {rounds.version(last)}
    if v not in allowed:
        return f"items version {v} with {n} orders and {m} payments (expected one of {sorted(allowed)})"
    missing = [f"order {r}" for r, e in enumerate(rounds.orders) if e <= claimed and r >= n]
    missing += [f"payment {r}" for r, e in enumerate(rounds.payments) if e <= claimed and r >= m]
    missing += [f"items {r}" for r, e in rounds.overwrites.items() if e <= claimed and v < r]
    if missing:
        return f"claims event {claimed} but misses {missing[:3]}"
    return None


# --- a long-lived Spark SQL session on the target metastore, in a child process -----------------------

_SESSION = session_script(
    "streamer-sql-reader",
    """
    def done(d, rows=True):
        result = [list(r) for r in d.result] if rows else d.result
        return {"result": result, "event_id": d.event_id, "attempts": d.attempts, "tables": list(d.tables)}

    def race(table):
        first = {}

        def query():
            df = spark.table(table)
            if first:
                return df.count()
            first["files"] = df.inputFiles()  # listed now: the test lets the target replace them
            print("PAUSED " + json.dumps(first["files"]), flush=True)
            sys.stdin.readline()
            try:
                first["count"] = df.count()
                return first["count"]
            except Exception as exc:
                gone = vanished_file(throwable_trail(exc))
                first["error"] = type(exc).__name__
                first["vanished"] = None if gone is None else [gone.kind, gone.condition]
                raise

        return {**done(bracket(spark, [table], query, timeout=60), rows=False), "first": first}

    def answer(req):
        op = req["op"]
        try:
            if op == "sql":
                for statement in req.get("setup", []):
                    spark.sql(statement)
                return done(bracket_sql(spark, req["text"], timeout=req.get("timeout", 60)))
            if op == "race":
                return race(req["table"])
            if op == "lazy":
                t = req["table"]
                lazy = {"frame": lambda: spark.table(t), "dict": lambda: {"n": spark.table(t)},
                        "grouped": lambda: spark.table(t).groupBy("id")}[req["form"]]
                return done(bracket(spark, [t], lazy, timeout=30), rows=False)
        except Exception as exc:
            return {"error": type(exc).__name__, "message": str(exc)[:3000]}
        raise ValueError(op)

    print("READY", flush=True)
    while line := sys.stdin.readline():
        print("RESULT " + json.dumps(answer(json.loads(line)), default=str), flush=True)
    spark.stop()
    """,
    imports="from streamer.read import bracket, bracket_sql, throwable_trail, vanished_file\n",
)


def _session(hms_uri: str, work: Path) -> SparkChild:
    """The session answers RESULT lines, and a PAUSED line where a race holds it until the test says GO."""
    session = SparkChild(_SESSION, [hms_uri, str(work / "sql-warehouse")], work / "sql-session.log",
                         what="the SQL session", kinds=("READY", "RESULT", "PAUSED"))
    session.wait_ready()
    return session


def test_bracket_holds_under_writes_runs_again_on_vanished_files_and_refuses_lazy_results(
    broker: EmbeddedBroker,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark: SparkSession,
    prefix: str,
    tmp_path: Path,
) -> None:
    wh = source.warehouse
    shop, books = f"{prefix}shop", f"{prefix}books"
    orders, items, ledger = _setup(wh, shop, books)
    source.start_background()
    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    wait_converged(job, source)
    rounds = _Rounds()
    session = _session(target_stack.hms.uri, tmp_path)
    try:
        # a lazy result would be read after the check: refused, whatever holds it
        for form in ("frame", "dict", "grouped"):
            refused = session.ask(op="lazy", table=items, form=form)
            assert refused.get("error") == "TypeError", refused
            assert "lazy result" in refused["message"] and ".collect()" in refused["message"], refused

        # bracket_sql finds every table, through a temporary view, a CTE and a subquery; commands are
        # refused before they run
        view = f"{prefix}recent"
        text = (f"WITH paid AS (SELECT id FROM {ledger}) "
                f"SELECT 'o', o.id, o.amount FROM {view} o WHERE o.id IN (SELECT id FROM paid) "
                f"UNION ALL SELECT 'i', id, amount FROM {items}")
        found = session.ask(op="sql", text=text,
                            setup=[f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM {orders}"])
        assert sorted(found.get("tables", [])) == sorted([orders, ledger, items]), found
        insert = session.ask(op="sql", text=f"INSERT INTO {items} VALUES (99, 99)")
        assert insert.get("error") == "SnapshotError" and "InsertIntoStatement" in insert["message"], insert

        # a file vanishes between the query's listing and its read: the query runs again
        session.send(json.dumps({"op": "race", "table": items}))
        kind, listed = session.line()
        assert kind == "PAUSED" and listed, listed
        _round(wh, shop, books, 0, rounds)
        _round(wh, shop, books, 1, rounds)
        _round(wh, shop, books, 2, rounds)  # overwrites items: their listed file is replaced
        wait_converged(job, source)
        gone = [u for u in listed if not os.path.exists(u.removeprefix("file:").removeprefix("//"))]
        session.send("GO")
        kind, raced = session.line()
        assert kind == "RESULT" and raced.get("result") == 2 % 4 + 1, raced  # the overwritten items
        assert raced["attempts"] >= 2, raced
        first = raced["first"]
        assert "error" in first or first.get("count") != raced["result"], raced
        if gone:  # the listed file is gone (not reused under its name): Spark's FILE_NOT_EXIST, found in
            # the Java exception's chain
            assert "error" in first and first["vanished"] is not None, raced
            assert first["vanished"][0].startswith(("org.apache.spark.", "java.")), raced

        # a steady writer: every read is one source state and reflects its event id
        results: list[dict[str, Any]] = []

        def reads() -> None:
            for _ in range(6):
                results.append(session.ask(op="sql", text=_query(shop, books), timeout=90))

        reader = threading.Thread(target=reads, daemon=True)
        reader.start()
        r, stop_at = 3, time.monotonic() + DEADLINE
        while reader.is_alive() and time.monotonic() < stop_at:
            _round(wh, shop, books, r, rounds)
            r += 1
            time.sleep(PACE)
        reader.join(300)
        wait_converged(job, source)
        final = session.ask(op="sql", text=_query(shop, books))
    finally:
        session.close(60)

    errors = [x for x in results if "error" in x]
    assert not errors, errors
    verdicts = [_judge(x["result"], x["event_id"], rounds) for x in [*results, final]]
    print(f"\nthe race: {raced}\n{r} rounds; bracket_sql attempts {[x['attempts'] for x in results]}; "
          f"verdicts {verdicts}")
    assert verdicts == [None] * len(verdicts)
    assert len({x["event_id"] for x in results}) >= 2, "the reads did not happen during the writes"
    paid = sorted(i for t, i, _ in final["result"] if t == "l")
    assert paid == list(range(r)), final  # after the writes: everything


def test_a_snapshot_is_a_mapping_usable_from_sql_and_reads_lazily_until_its_files_change(
    broker: EmbeddedBroker,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark: SparkSession,
    prefix: str,
) -> None:
    wh = source.warehouse
    shop, books = f"{prefix}shop", f"{prefix}books"
    tables = _setup(wh, shop, books)
    orders, items, ledger = tables
    rounds = _Rounds()
    for r in range(3):
        _round(wh, shop, books, r, rounds)
    source.start_background()
    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    hms_uri = target_stack.hms.uri
    snapshot(spark, hms_uri, tables, min_event_id=wh.current_event_id(), timeout=180).release()

    def sql_over(views: Mapping[str, str]) -> str:
        return _query(shop, books).replace(orders, views[orders]).replace(ledger, views[ledger]).replace(
            items, views[items])

    # materialized: a mapping of DataFrames, and temporary views over them, dropped on release
    with snapshot(spark, hms_uri, tables, timeout=60) as snap:
        assert isinstance(snap, Mapping) and sorted(snap) == sorted(tables) and len(snap) == 3
        assert items in snap and f"{shop}.nope" not in snap
        views = snap.register_temp_views(prefix=f"{prefix}m_")
        assert views[orders] == f"{prefix}m_{shop}__orders"
        rows = [list(x) for x in spark.sql(sql_over(views)).collect()]
        assert _judge(rows, snap.event_id, rounds) is None, rows
        assert sorted(i for t, i, _ in rows if t == "o") == [0, 1, 2]
        named = snap.register_temp_views(names={items: f"{prefix}items"})
        assert spark.table(named[items]).count() == 2 % 4 + 1
    assert snap.released
    for view in [*views.values(), named[items]]:
        assert not spark.catalog.tableExists(view), view

    # lazy: plans over the pinned files, nothing held; read() checks the files after the query
    lazy = snapshot(spark, hms_uri, tables, timeout=60, materialize=False)
    assert not lazy.materialized and "materialize=False" in repr(lazy)
    plan = lazy[items]._jdf.queryExecution().analyzed()
    assert plan.getClass().getSimpleName() != "LogicalRDD"  # not checkpointed
    views = lazy.register_temp_views(prefix=f"{prefix}l_")
    rows = lazy.read(lambda: [list(x) for x in spark.sql(sql_over(views)).collect()])
    assert _judge(rows, lazy.event_id, rounds) is None, rows
    with pytest.raises(TypeError, match="lazy result"):
        lazy.read(lambda: spark.table(views[items]))
    _round(wh, shop, books, 3, rounds)
    _round(wh, shop, books, 4, rounds)
    _round(wh, shop, books, 5, rounds)  # overwrites items: the snapshot's file of it is replaced
    wait_converged(job, source)
    with pytest.raises(SnapshotExpired, match=rf"the target replaced or removed .* \({items}\) since"):
        lazy.read(lambda: spark.sql(sql_over(views)).collect())
    assert lazy.expired and lazy.released
    with pytest.raises(SnapshotExpired):
        lazy[orders]
    assert not spark.catalog.tableExists(views[items])

    # under a steady writer: each lazy snapshot's SQL read is one source state, or it expired
    read: list[tuple[list[list[Any]], int]] = []
    expired: list[float] = []  # how long each expired read took
    errors: list[str] = []
    stop = threading.Event()

    def reads() -> None:
        try:
            lazy_reads()
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    def lazy_reads() -> None:
        n = 0
        while not stop.is_set() and len(read) < 4:
            n += 1
            started = time.monotonic()
            snap = snapshot(spark, hms_uri, tables, timeout=90, materialize=False)
            views = snap.register_temp_views(prefix=f"{prefix}w{n}_")
            try:
                text = sql_over(views)
                rows = snap.read(lambda text=text: [list(x) for x in spark.sql(text).collect()])
            except SnapshotExpired:
                expired.append(time.monotonic() - started)
                continue
            read.append((rows, snap.event_id))  # judged once the writer is done
            snap.release()

    reader = threading.Thread(target=reads, daemon=True)
    reader.start()
    r, stop_at = 6, time.monotonic() + DEADLINE
    while reader.is_alive() and time.monotonic() < stop_at:
        _round(wh, shop, books, r, rounds, every=6)  # appends mostly: what a lazy snapshot survives
        r += 1
        time.sleep(PACE)
    stop.set()
    reader.join(120)
    judged = [_judge(rows, event_id, rounds) for rows, event_id in read]
    print(f"\n{r} rounds; lazy snapshots judged {judged}, {len(expired)} expired after "
          f"{[round(e, 1) for e in expired]} s; errors {errors}")
    assert not errors
    assert len(judged) >= 2 and judged == [None] * len(judged)
