"""Readers of a live replica (issue 28, item 6): the plain-SQL bracket in a long-lived Spark session,
and the snapshot API's errors.

A Spark session that read a table once keeps its file listing: after the target applied an insert,
its plain query still counts the old rows whatever the marks say. ``streamer.read.bracket`` refreshes
the tables inside the bracket, so its result is the replica's state at the marks. The snapshot API
fails at once on an unknown database, names what a snapshot holds when asked for another table,
and refuses a frame used after ``release()`` with a typed error.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from streamer.events.model import Column
from streamer.kafka.broker import EmbeddedBroker
from streamer.read import SnapshotReleased, TableNotFound, UnknownDatabase, snapshot
from tests.fixtures.spark_child import SparkChild, session_script
from tests.integration.target.helpers import Source, TargetProcess, TargetStack, wait_converged

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

COLS = [Column("id", "int"), Column("amount", "bigint")]

# a long-lived Spark SQL session on the target metastore, as a notebook or a BI server keeps one
_SESSION = session_script(
    "streamer-sql-reader",
    """
    def answer(req):
        table = req.get("table")
        if req["op"] == "count":  # the plain query of a long-lived session
            return spark.table(table).count()
        started = time.monotonic()
        try:
            done = bracket(spark, req["tables"], lambda: spark.table(table).count(), timeout=60)
        except Exception as exc:
            return {"error": type(exc).__name__, "message": str(exc), "seconds": time.monotonic() - started}
        return {"count": done.result, "event_id": done.event_id, "attempts": done.attempts}

    print("READY", flush=True)
    for line in sys.stdin:
        print("RESULT " + json.dumps(answer(json.loads(line))), flush=True)
    spark.stop()
    """,
    imports="import time\nfrom streamer.read import bracket\n",
)


def _session(hms_uri: str, work: Path) -> SparkChild:
    session = SparkChild(_SESSION, [hms_uri, str(work / "sql-warehouse")], work / "sql-session.log",
                         what="the SQL session")
    session.wait_ready()
    return session


def test_bracket_refreshes_a_long_lived_sessions_listing_and_snapshot_errors_are_typed(
    broker: EmbeddedBroker,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetProcess],
    spark: SparkSession,
    prefix: str,
    tmp_path: Path,
) -> None:
    wh = source.warehouse
    shop = f"{prefix}shop"
    orders = f"{shop}.orders"
    wh.create_database(shop)
    wh.create_table(shop, "orders", COLS)
    for i in range(3):
        wh.insert(shop, "orders", [{"id": i, "amount": i}])
    source.start_background()
    job = TargetProcess(target_stack, broker.bootstrap_servers, source).start()
    target_jobs.append(job)
    wait_converged(job, source)
    hms_uri = target_stack.hms.uri

    session = _session(hms_uri, tmp_path)
    try:
        assert session.ask(op="count", table=orders) == 3  # the session lists the files once
        wh.insert(shop, "orders", [{"id": 3, "amount": 3}])
        written = wh.current_event_id()
        wait_converged(job, source)
        # the stale result: the replica holds 4 rows, the session's cached listing 3
        assert session.ask(op="count", table=orders) == 3
        done = session.ask(op="bracket", tables=[orders], table=orders)
        assert done.get("count") == 4 and done["event_id"] >= written, done
        unknown = session.ask(op="bracket", tables=[f"{prefix}nope.t"], table=f"{prefix}nope.t")
        assert unknown["error"] == "UnknownDatabase" and f"{prefix}nope" in unknown["message"], unknown
        assert unknown["seconds"] < 10, unknown  # no waiting out the timeout
    finally:
        session.close(60)

    # the snapshot API: an unknown database fails at once, naming it
    started = time.monotonic()
    with pytest.raises(UnknownDatabase, match=f"{prefix}nope"):
        snapshot(spark, hms_uri, [f"{prefix}nope.t"], timeout=60)
    assert time.monotonic() - started < 10
    with pytest.raises(UnknownDatabase, match=rf"database {prefix}gone \(of {prefix}gone.t\) does not exist"):
        snapshot(spark, hms_uri, [f"{prefix}gone.t", orders], timeout=60)

    snap = snapshot(spark, hms_uri, [orders], timeout=60)
    assert repr(snap) == f"Snapshot(event_id={snap.event_id}, tables=['{orders}'], attempts={snap.attempts})"
    with pytest.raises(TableNotFound, match=rf"{shop}.missing is not in this snapshot .*'{orders}'"):
        snap[f"{shop}.missing"]
    frame = snap[orders]
    assert frame.count() == 4
    snap.release()
    with pytest.raises(SnapshotReleased, match=rf"{orders}: the snapshot at source event \d+ was released"):
        frame.count()
    with pytest.raises(SnapshotReleased):
        snap[orders]
    assert "released" in repr(snap) and "released" in repr(frame)
