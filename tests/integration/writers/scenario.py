"""The writer scenario shared by ``test_spark_sql.py`` and ``bench/writer.py``: Spark SQL with Hive
support writes Hive tables through a source metastore that logs its changes, an agent
(``--hms-uri``, in this process) publishes, ``streamer target run`` applies; paced, statement by
statement, each table compared on both sides after each step.

What Spark's Hive 2.3 client logs: INSERT INTO an existing table or partition is an INSERT with its
files; one creating partitions is ADD_PARTITION (with the files the listener lists) and no INSERT;
every INSERT OVERWRITE (a table, a static partition, each partition of a dynamic-partition overwrite)
is an INSERT without files, which the agent resolves into a listing (``streamer.source.insert_files``).

Writes that log no INSERT at all: a Spark datasource table (``USING parquet``; only a new partition
is logged, as ADD_PARTITION) and a Hive Parquet table Spark writes with its default conversion
(``spark.sql.hive.convertMetastoreParquet=true``). The target replicates those by state
(``streamer.target.apply.by_state``): its directory sync (``--external-sync-seconds``) copies them,
so their steps wait for the replica to converge rather than for an event.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow.parquet as pq

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import EventType, InsertPayload, Payload
from streamer.hive.decode import decode_row
from streamer.hive.files import is_hidden
from streamer.metastore.thrift import HmsCatalog
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.enrich import EnrichSettings
from streamer.source.policy import PolicySet
from streamer.source.thrift_reader import ThriftNotificationReader
from streamer.target.apply.by_state import SOURCE_LOCATION_PARAM
from tests.integration.source.test_agent import topic_events
from tests.integration.target.helpers import TargetProcess, TargetStack, target_files, wait_applied
from tests.integration.writers.spark_writer import SparkWriter

FORMATS = ("parquet", "textfile")
FINAL_TABLES = {"t_moved": "parquet", "p_parquet": "parquet", "t_textfile": "textfile",
                "p_textfile": "textfile", "ds": "parquet", "ds_part": "parquet", "hp_converted": "parquet"}
SYNC_SECONDS = "1"  # the target's --external-sync-seconds: how often tables replicated by state sync
CONVERSION = "spark.sql.hive.convertMetastoreParquet"


@dataclass(frozen=True)
class Stream:
    source_id: str
    topic: str


@dataclass
class LogCursor:
    """Reads a metastore's notification log as it grows: the newest event id per database."""

    uri: str
    after: int
    last: dict[str, int] = field(default_factory=dict)
    inserts: list[tuple[int, str, bool]] = field(default_factory=list)  # (id, table, logged with files)

    def advance(self, dbs: set[str]) -> dict[str, int]:
        reader = ThriftNotificationReader(self.uri)
        try:
            while rows := reader.read_after(self.after, 500):
                for row in rows:
                    db = (row.db_name or "").lower()
                    if db in dbs:
                        self.last[db] = row.event_id
                        if row.event_type == EventType.INSERT.value:
                            payload = decode_row(row).payload
                            assert isinstance(payload, InsertPayload)
                            self.inserts.append((row.event_id, str(row.table_name), bool(payload.files)))
                self.after = rows[-1].event_id
        finally:
            reader.close()
        return {db: self.last[db] for db in dbs if db in self.last}


def _dir(location: str) -> Path:
    return Path(unquote(urlsplit(location).path))


def _file_rows(path: Path, fmt: str) -> list[tuple[Any, ...]]:
    if fmt == "parquet":
        return [(r["id"], r["s"]) for r in pq.read_table(path).to_pylist()]
    out = []
    for line in path.read_text().splitlines():  # Hive's text format: ^A between fields, \N for null
        a, b = line.split("\x01")
        out.append((None if a == "\\N" else int(a), None if b == "\\N" else b))
    return out


def replica_rows(catalog: HmsCatalog, db: str, table: str, fmt: str) -> Counter[tuple[Any, ...]]:
    """Rows of a target table read from its files (pyarrow or Hive's text format), partition values last."""
    snap = catalog.get_table(db, table)
    assert snap is not None, f"{db}.{table} missing on the target"
    places = [((), snap.sd.location)] if not snap.partition_keys else [
        (tuple(p.values), p.sd.location) for p in catalog.list_partitions(db, table)]
    out: Counter[tuple[Any, ...]] = Counter()
    for values, location in places:
        assert location, f"{db}.{table} {values} has no location"
        directory = _dir(location)
        for f in sorted(directory.iterdir()) if directory.is_dir() else []:
            if f.is_file() and not is_hidden(f.name):
                out.update(row + values for row in _file_rows(f, fmt))
    return out


def statements(db: str, fmt: str) -> Iterator[tuple[str, str]]:
    """(statement, table) pairs: appends, an overwrite of a table, of a static partition, dynamic
    partitions created and overwritten, and INSERTs that write no rows."""
    t, p = f"t_{fmt}", f"p_{fmt}"
    yield f"CREATE TABLE {db}.{t} (id bigint, s string) STORED AS {fmt}", t
    yield f"INSERT INTO {db}.{t} VALUES (1, 'a'), (2, 'b')", t
    yield f"INSERT INTO {db}.{t} VALUES (3, 'c')", t
    yield f"INSERT OVERWRITE TABLE {db}.{t} VALUES (4, 'd'), (5, 'e')", t
    yield f"INSERT INTO {db}.{t} SELECT id, s FROM {db}.{t} WHERE id < 0", t  # no rows
    yield f"INSERT INTO {db}.{t} VALUES (6, 'f')", t
    yield f"CREATE TABLE {db}.{p} (id bigint, s string) PARTITIONED BY (dt string) STORED AS {fmt}", p
    yield f"INSERT INTO {db}.{p} PARTITION (dt='1') VALUES (1, 'a')", p  # a new partition
    yield f"INSERT INTO {db}.{p} PARTITION (dt='1') VALUES (2, 'b')", p
    yield f"INSERT OVERWRITE TABLE {db}.{p} PARTITION (dt='1') VALUES (3, 'c')", p
    yield f"INSERT INTO {db}.{p} PARTITION (dt) VALUES (4, 'd', '2'), (5, 'e', '3')", p  # creates two
    yield f"INSERT OVERWRITE TABLE {db}.{p} PARTITION (dt) VALUES (6, 'f', '2'), (7, 'g', '3')", p
    yield f"INSERT INTO {db}.{p} PARTITION (dt) VALUES (8, 'h', '3')", p
    yield f"INSERT OVERWRITE TABLE {db}.{p} PARTITION (dt='2') SELECT id, s FROM {db}.{t} WHERE id < 0", p


def by_state_statements(db: str) -> Iterator[tuple[str, str]]:
    """(statement, table) pairs whose writes log no INSERT: a datasource table, partitioned and not
    (appends, overwrites, new partitions), and a Hive Parquet table written with conversion on."""
    yield f"CREATE TABLE {db}.ds (id bigint, s string) USING parquet", "ds"
    yield f"INSERT INTO {db}.ds VALUES (1, 'a'), (2, 'b')", "ds"
    yield f"INSERT OVERWRITE TABLE {db}.ds VALUES (3, 'c')", "ds"
    yield f"CREATE TABLE {db}.ds_part (id bigint, s string, dt string) USING parquet PARTITIONED BY (dt)", \
        "ds_part"
    yield f"INSERT INTO {db}.ds_part VALUES (1, 'a', '1'), (2, 'b', '2')", "ds_part"  # two new partitions
    yield f"INSERT INTO {db}.ds_part VALUES (3, 'c', '1')", "ds_part"  # appends: nothing logged
    yield f"INSERT OVERWRITE TABLE {db}.ds_part PARTITION (dt='2') VALUES (4, 'd')", "ds_part"
    yield f"CREATE TABLE {db}.hp_converted (id bigint, s string) STORED AS parquet", "hp_converted"
    yield f"INSERT INTO {db}.hp_converted VALUES (1, 'a')", "hp_converted"
    yield f"INSERT OVERWRITE TABLE {db}.hp_converted VALUES (2, 'b'), (3, 'c')", "hp_converted"


class Scenario:
    """The writer, the agent and the target job; ``step`` runs statements paced, ``compare`` a table."""

    def __init__(self, writer: SparkWriter, agent: SourceAgent, cursor: LogCursor, job: TargetProcess,
                 source: HmsCatalog, target: HmsCatalog, db: str, *, check: bool = True) -> None:
        self.writer, self.agent, self.cursor, self.job = writer, agent, cursor, job
        self.source, self.target, self.db = source, target, db
        self.check = check
        self.seconds: list[float] = []
        self.diverged: list[str] = []

    def step(self, statement: str, table: str, fmt: str, *, then: tuple[str, ...] = (),
             by_state: bool = False) -> None:
        """``statement`` (and ``then``, before the agent publishes) written, published and applied;
        ``by_state``: then synced (the table's writes log no INSERT), waited for up to a minute."""
        began = time.monotonic()
        for sql in (statement, *then):
            self.writer.sql(sql)
        self.agent.run(once=True)
        expected = self.cursor.advance({self.db})
        wait_applied(self.job, self.job.stack, expected, 120)
        deadline = time.monotonic() + 60
        while by_state and not _equal(self.compare(table, fmt)) and time.monotonic() < deadline:
            time.sleep(0.5)
        self.seconds.append(time.monotonic() - began)
        self.verdict(table, fmt, statement)

    def compare(self, table: str, fmt: str) -> dict[str, Any]:
        """The table on both sides: rows (the source's through Spark SQL, the replica's from its
        files), partitions and files (name and sha256)."""
        db, name = self.db, f"{self.db}.{table}"
        snap = self.source.get_table(db, table)
        assert snap is not None, name
        keys = [k.name for k in snap.partition_keys]
        columns = ", ".join(["id", "s", *keys])
        source_rows = Counter(tuple(r.values()) for r in self.writer.sql(f"SELECT {columns} FROM {name}"))
        replica = replica_rows(self.target, db, table, fmt)
        parts, replica_parts = (
            sorted(tuple(p.values) for p in catalog.list_partitions(db, table)) if keys else []
            for catalog in (self.source, self.target)
        )
        return {
            "rows_source": sum(source_rows.values()), "rows_replica": sum(replica.values()),
            "rows_equal": replica == source_rows, "partitions": len(parts),
            "partitions_equal": parts == replica_parts,
            "files_equal": target_files(self.target, db, table) == target_files(self.source, db, table),
            "outside_target": self.outside_target(table, snap.sd.location or ""),
            "diff": "" if replica == source_rows else f"source {dict(source_rows)}, replica {dict(replica)}",
        }

    def outside_target(self, table: str, source_location: str) -> list[str]:
        """Locations of the replica's table and partitions (``sd.location`` and every parameter)
        that are not inside the target's warehouse or name the source's directory (streamer's own
        record of it, ``SOURCE_LOCATION_PARAM``, apart)."""
        snap = self.target.get_table(self.db, table)
        assert snap is not None
        root, source = self.job.stack.warehouse_root.resolve(), _dir(source_location)
        parts = self.target.list_partitions(self.db, table) if snap.partition_keys else []
        sds = [(snap.sd, snap.parameters)] + [(p.sd, p.parameters) for p in parts]
        bad = []
        for sd, params in sds:
            if not sd.location or not _dir(sd.location).is_relative_to(root):
                bad.append(f"location {sd.location}")
            values = {**sd.serde.parameters, **sd.parameters, **params}
            values.pop(SOURCE_LOCATION_PARAM, None)
            bad += [f"{k}={v}" for k, v in values.items() if str(source) in v]
            path = sd.serde.parameters.get("path")
            if path is not None and not _dir(path).is_relative_to(root):
                bad.append(f"path {path}")
        return bad

    def verdict(self, table: str, fmt: str, what: str) -> dict[str, Any]:
        result = self.compare(table, fmt)
        halts = self.job.stack.halts()
        if not _equal(result) or halts:
            message = f"{self.db}.{table} after {what!r}: {result} halts {halts}"
            self.diverged.append(message)
            if self.check:
                raise AssertionError(message)
        return result


def _equal(result: dict[str, Any]) -> bool:
    return bool(result["rows_equal"] and result["partitions_equal"] and result["files_equal"]
                and not result["outside_target"])


@dataclass
class Outcome:
    """What a run found: per final table its comparison, the INSERT events (id, table, with files),
    the published INSERT payloads, the seconds of each paced step (unpaced: written, applied, compared)."""

    tables: dict[str, dict[str, Any]]
    inserts: list[tuple[int, str, bool]]
    published: dict[int, Payload]
    seconds: list[float]
    diverged: list[str]
    by_state: float = 0.0  # the job's streamer_target_tables_synced_by_state for the database
    halts: dict[str, Any] = field(default_factory=dict)  # database: its Halt (event id, object, cause)
    cm_fallbacks: float = 0.0  # the job's streamer_target_cm_fallbacks_total
    events: list[Any] = field(default_factory=list)  # every published event, in order



def thrift_agent(
    source_hms: EmbeddedMetastore, kafka: dict[str, Any], db: str, enrich: EnrichSettings | None = None
) -> tuple[SourceAgent, Stream, int]:
    """An agent on the source's Thrift log from its present head, publishing database ``db`` to a
    stream of its own; returns it, the stream and the head event id it starts after."""
    stream = Stream(f"spark-{db}", f"streamer.{db}.events")
    head = ThriftNotificationReader(source_hms.uri)
    start = head.head_event_id()
    head.close()
    more = {"enrich": enrich} if enrich is not None else {}
    agent = SourceAgent(
        AgentConfig(stream.source_id, kafka, topic=stream.topic, start_after=start, gap_settle_seconds=0.5,
                    **more),
        ThriftNotificationReader(source_hms.uri), PolicySet.parse([db]),
    )
    return agent, stream, start

def declared(source_hms: EmbeddedMetastore) -> tuple[str, ...]:
    """The source's warehouse declared as its store: a directory sync reads only below a declared
    ``--source-prefix`` (docs/security.md)."""
    return ("--source-prefix", Path(source_hms.warehouse_dir).as_uri())


def close_all(writer: SparkWriter, job: TargetProcess, agent: SourceAgent, *catalogs: HmsCatalog) -> None:
    """A writer scenario's teardown: the writer, the target job, the agent and its reader, the catalogs."""
    writer.close()
    job.stop()
    agent.close()
    agent.reader.close()
    for catalog in catalogs:
        catalog.close()


def run(kafka: dict[str, Any], bootstrap: str, source_hms: EmbeddedMetastore, target_hms: EmbeddedMetastore,
        work: Path, *, check: bool = True) -> Outcome:
    """The whole scenario: both formats, then an overwrite published only after a rename of its table,
    one after a drop of its partition, and an insert published after a drop of two partitions at
    once. ``check``: raise at the first difference."""
    db = f"spark{int(time.time() * 1000) % 10**8}"
    agent, stream, start = thrift_agent(source_hms, kafka, db)
    writer = SparkWriter(source_hms.uri, source_hms.warehouse_dir, work / "writer.log")
    job = TargetProcess(TargetStack(target_hms, work / "target"), bootstrap, stream,
                        extra=("--external-sync-seconds", SYNC_SECONDS, *declared(source_hms)))
    source, target = HmsCatalog(source_hms.uri), HmsCatalog(target_hms.uri)
    try:
        agent.start()
        job.start()
        writer.wait_ready()
        cursor = LogCursor(source_hms.uri, start)
        scenario = Scenario(writer, agent, cursor, job, source, target, db, check=check)
        writer.sql(f"CREATE DATABASE {db}")
        for fmt in FORMATS:
            for statement, table in statements(db, fmt):
                scenario.step(statement, table, fmt)
        scenario.step(f"INSERT OVERWRITE TABLE {db}.t_parquet VALUES (9, 'z')", "t_moved", "parquet",
                      then=(f"ALTER TABLE {db}.t_parquet RENAME TO {db}.t_moved",))
        scenario.step(f"INSERT OVERWRITE TABLE {db}.p_textfile PARTITION (dt='1') VALUES (10, 'y')",
                      "p_textfile", "textfile",
                      then=(f"ALTER TABLE {db}.p_textfile DROP PARTITION (dt='1')",))
        # one statement dropping two partitions logs a DROP_PARTITION each (Spark calls the metastore
        # per partition), applied in one call; the INSERT's files are gone by then, voided by the drop
        added = "PARTITION (dt='7') PARTITION (dt='8') PARTITION (dt='9')"
        scenario.step(f"ALTER TABLE {db}.p_textfile ADD {added}", "p_textfile", "textfile",
                      then=(f"INSERT INTO TABLE {db}.p_textfile PARTITION (dt='7') VALUES (11, 'x')",
                            f"ALTER TABLE {db}.p_textfile DROP PARTITION (dt='7'), PARTITION (dt='8')"))
        writer.sql(f"SET {CONVERSION}=true")  # Spark's default: its own writer, no INSERT logged
        for statement, table in by_state_statements(db):
            scenario.step(statement, table, "parquet", by_state=True)
        writer.sql(f"SET {CONVERSION}=false")
        tables = {table: scenario.verdict(table, fmt, "the end") for table, fmt in FINAL_TABLES.items()}
        events = topic_events(kafka, stream.topic)
        published = {e.event_id: e.payload for e in events if e.event_type is EventType.INSERT}
        by_state = job.metric("streamer_target_tables_synced_by_state", db=db)
        return Outcome(tables, scenario.cursor.inserts, published, scenario.seconds, scenario.diverged,
                       by_state, events=events)
    finally:
        close_all(writer, job, agent, source, target)
