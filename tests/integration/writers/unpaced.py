"""The writer scenario unpaced, against a source that runs Hive's change management: Spark SQL writes
every statement as fast as it can (overwrites, a rename, drops of partitions and of a table
included) while the agent publishes and the target applies behind it; only at the end does the test
wait for the replica and compare. Shared by ``test_unpaced.py`` and ``bench/writer.py --unpaced``.

The source is ``streamer hms run --notifications --cmroot`` (``hms_cm``); the writer writes through
streamer's local filesystem, whose files have MD5 checksums, so its INSERT events name files as
``uri#checksum`` as a writer on HDFS does; the agent runs with ``--checksum-algorithm md5 --cmroot``
(its fallback: Hive 2.3's ``<cmroot>/<checksum>``), the target with ``--source-cmroot``. What can
go missing: files an INSERT named that a later overwrite replaced (Hive 2.3 keeps none of them: the
target applies the run up to the overwrite as one step) and files of a dropped partition or table
(kept in the cmroot, where the agent points).

What happens today (measured; docs/dr.md "Unpaced writers on a Hive 2.3 source"): when the target
has not copied an INSERT's files before a later INSERT OVERWRITE of the same table or partition
deleted them, the database halts at that INSERT, "no copy matches the event: <file>: missing;
<cmroot>/<checksum>: missing" (Hive 2.3 recycles no overwritten file, and the target's planner does
not yet apply an INSERT .. INSERT OVERWRITE run as one step). The halt is visible (``streamer
status``, the halt metric); nothing diverges silently.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streamer.embedded_metastore.cm import cmroot_uri
from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import EventType
from streamer.metastore.thrift import HmsCatalog
from streamer.source.enrich import EnrichSettings
from streamer.target.state.state_file import Halt
from tests.integration.source.test_agent import topic_events
from tests.integration.target.helpers import TargetProcess, TargetStack
from tests.integration.writers.scenario import (
    CONVERSION,
    FINAL_TABLES,
    FORMATS,
    SYNC_SECONDS,
    LogCursor,
    Outcome,
    Scenario,
    _equal,
    by_state_statements,
    close_all,
    declared,
    statements,
    thrift_agent,
)
from tests.integration.writers.spark_writer import SparkWriter

DROPPED = "t_gone"  # written, overwritten and dropped before the replica can have caught up


def unpaced_statements(db: str) -> Iterator[str]:
    """Every statement of the paced scenario, in its order, then a table written and dropped."""
    for fmt in FORMATS:
        yield from (sql for sql, _ in statements(db, fmt))
    yield f"INSERT OVERWRITE TABLE {db}.t_parquet VALUES (9, 'z')"
    yield f"ALTER TABLE {db}.t_parquet RENAME TO {db}.t_moved"
    yield f"INSERT OVERWRITE TABLE {db}.p_textfile PARTITION (dt='1') VALUES (10, 'y')"
    yield f"ALTER TABLE {db}.p_textfile DROP PARTITION (dt='1')"
    # Spark drops each partition of one statement with its own call: DROP_PARTITIONs in a row,
    # which the target applies in one drop_partitions call
    yield f"ALTER TABLE {db}.p_textfile ADD PARTITION (dt='7') PARTITION (dt='8') PARTITION (dt='9')"
    yield f"ALTER TABLE {db}.p_textfile DROP PARTITION (dt='7'), PARTITION (dt='8')"
    yield f"SET {CONVERSION}=true"
    yield from (sql for sql, _ in by_state_statements(db))
    yield f"SET {CONVERSION}=false"
    yield f"CREATE TABLE {db}.{DROPPED} (id bigint, s string) STORED AS textfile"
    yield f"INSERT INTO {db}.{DROPPED} VALUES (1, 'a')"
    yield f"INSERT INTO {db}.{DROPPED} VALUES (2, 'b')"
    yield f"INSERT OVERWRITE TABLE {db}.{DROPPED} VALUES (3, 'c')"
    yield f"DROP TABLE {db}.{DROPPED}"


def run_unpaced(kafka: dict[str, Any], bootstrap: str, source_hms: EmbeddedMetastore,
                target_hms: EmbeddedMetastore, work: Path, *, timeout: float = 300.0) -> Outcome:
    """The unpaced scenario; ``Outcome.diverged`` lists every table that did not end equal and
    ``Outcome.halts`` every halt (database: cause). Never raises on a difference: the caller asserts."""
    assert source_hms.cmroot is not None, "the source must run Hive's change management (--cmroot)"
    cmroot = cmroot_uri(source_hms.cmroot)
    db = f"unpaced{int(time.time() * 1000) % 10**8}"
    agent, stream, start = thrift_agent(source_hms, kafka, db, EnrichSettings("md5", cmroot=cmroot))
    writer = SparkWriter(source_hms.uri, source_hms.warehouse_dir, work / "writer.log", checksums=True)
    job = TargetProcess(TargetStack(target_hms, work / "target"), bootstrap, stream,
                        extra=("--external-sync-seconds", SYNC_SECONDS, "--source-cmroot", cmroot,
                               *declared(source_hms)))
    source, target = HmsCatalog(source_hms.uri), HmsCatalog(target_hms.uri)
    stop = threading.Event()
    publisher = threading.Thread(target=agent.run, kwargs={"stop": stop}, name="agent", daemon=True)
    try:
        agent.start()
        job.start()
        writer.wait_ready()
        began = time.monotonic()
        publisher.start()
        writer.sql(f"CREATE DATABASE {db}")
        for sql in unpaced_statements(db):
            writer.sql(sql)
        written = time.monotonic() - began
        cursor = LogCursor(source_hms.uri, start)
        expected = cursor.advance({db})[db]
        scenario = Scenario(writer, agent, cursor, job, source, target, db, check=False)
        halts = _wait_applied_or_halted(job, db, expected, timeout)
        applied = time.monotonic() - began
        deadline = time.monotonic() + 60  # tables replicated by state converge at their next sync
        while not halts and time.monotonic() < deadline and not all(
                _equal(scenario.compare(t, f)) for t, f in FINAL_TABLES.items()):
            time.sleep(0.5)
        tables = {} if halts else {t: scenario.verdict(t, f, "the end") for t, f in FINAL_TABLES.items()}
        if not halts and target.get_table(db, DROPPED) is not None:
            scenario.diverged.append(f"{db}.{DROPPED} was dropped on the source but is on the replica")
        events = topic_events(kafka, stream.topic)
        _write_event_list(work / "events.txt", events)  # to read a halt against what was published
        published = {e.event_id: e.payload for e in events if e.event_type is EventType.INSERT}
        by_state = job.metric("streamer_target_tables_synced_by_state", db=db)
        cm_fallbacks = job.metric("streamer_target_cm_fallbacks_total")
        return Outcome(tables, cursor.inserts, published, [written, applied, time.monotonic() - began],
                       scenario.diverged, by_state, halts=halts, cm_fallbacks=cm_fallbacks, events=events)
    finally:
        stop.set()
        if publisher.is_alive():
            publisher.join(60)
        close_all(writer, job, agent, source, target)


SETTLE_SECONDS = 20.0  # a halt unchanged this long is final: the job retries a voidable one sooner


def _wait_applied_or_halted(job: TargetProcess, db: str, expected: int, timeout: float) -> dict[str, Halt]:
    """Wait until ``db``'s replica applied ``expected`` or its databases stayed halted, unchanged, for
    ``SETTLE_SECONDS`` (a halt at a write whose files a later event voids is retried by the job
    itself); the halts then."""
    seen: dict[str, tuple[tuple[int, str], float]] = {}

    def done() -> bool:
        now = time.monotonic()
        current = job.stack.halts()
        for name in list(seen):
            if name not in current:
                del seen[name]
        for name, halt in current.items():
            key = (halt.event_id, halt.cause)
            if name not in seen or seen[name][0] != key:
                seen[name] = (key, now)
        if job.stack.applied_ids([db])[db] >= expected:
            return True
        return bool(seen) and all(now - since >= SETTLE_SECONDS for _, since in seen.values())

    job.wait_for(done, f"{db} applied up to event {expected} or halted", timeout)
    return job.stack.halts()


def _write_event_list(path: Path, events: list[Any]) -> None:
    """One line per published event: id, type, table, partition values, replace, file names."""
    lines = []
    for e in events:
        p = e.payload
        values = getattr(p, "partition_values", None) or [getattr(x, "values", None)
                                                             for x in getattr(p, "partitions", []) or []]
        files = [f.uri.rsplit("/", 2)[-2:] for f in getattr(p, "files", []) or []]
        moved = ""
        if hasattr(p, "before") and hasattr(p, "after"):
            moved = f" location {p.before.sd.location} -> {p.after.sd.location}"
        lines.append(f"{e.event_id} {e.event_type} {e.table} {values} replace={getattr(p, 'replace', None)} "
                     f"files={files}{moved}")
    path.write_text("\n".join(lines) + "\n")
