"""The DR story on two real metastores: replicate, fail over at a cut, write on the new primary, fail
back, verify. Runbook: docs/failover.md.

Both sides are embedded Hive 2.3 metastores that log their changes (streamer's notification listener,
``EmbeddedMetastore(notifications=True)``), because the production story is Hive on both sides: the
old source must become a *target* after the failback, which only a metastore can be (the bundled
warehouse has no Thrift API to apply to), and the new primary must publish its own writes, which
needs its notification log. The test plays the writers (Hive, Spark) over Thrift: it creates
databases, tables and partitions, writes data files into the tables' locations and announces them
with ``fire_listener_event`` (INSERT), as writers with ``hive.metastore.dml.events`` do.

One test in phases; Spark starts three times (two forward jobs, one reverse job):
(1) the agent publishes A's log; ``--until-event N`` stops at N inside a micro-batch, a run without
the bound continues with exactly N+1.. and B equals A; (2) ``streamer failover`` stops the running
job and records the cut, with the new primary's head taken after the job stopped (B's log holds the
replication's own events); (3) B takes writes (a table, an insert, a partition); A takes writes after
the cut that are never replicated; (4) ``streamer failback`` lists A's changes and refuses; with
``--discard-unreplicated --rebase`` it records them and drops A's failed-over databases; (5) the
reverse stream: ``streamer bootstrap --hms-uri B`` into a new topic, an agent on B
``--start-after <cut.new_primary_event_id>`` (the topic's bootstrap wins) publishing B's later
writes from B's own log; (6) ``streamer target run`` onto A; ``streamer verify`` of A finds no drift
and A's tables, partitions and files equal B's.

What is not real: the writers are this test, not Hive or Spark (a Spark session writing through the
metastore would need the same listener and a fourth JVM); data files are small Parquet files.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hmsclient.genthrift.hive_metastore import ttypes as tt

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.errors import ConfigError
from streamer.events.model import (
    Column,
    DatabaseSnapshot,
    EventType,
    InsertPayload,
    PartitionSnapshot,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.catalog import FAILOVER_CUT_PARAM, LAST_ID_PARAM, REPL_TARGET_PARAM
from streamer.metastore.thrift import HmsCatalog
from streamer.metastore.transport import open_client
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.thrift_reader import ThriftNotificationReader
from streamer.target.dr.failback import read_failback
from streamer.target.dr.failover import read_record
from tests.integration.source.test_agent import topic_events
from tests.integration.target.helpers import (
    STREAMER,
    TargetProcess,
    TargetStack,
    target_files,
    wait_applied,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

COLS = [Column("id", "bigint"), Column("name", "string")]
DAY = [Column("dt", "string")]
PARQUET = {"input_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
           "output_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"}


@dataclass(frozen=True)
class Stream:
    source_id: str
    topic: str


class Writer:
    """Plays a Hive/Spark writer on one metastore: DDL over Thrift, data files + INSERT events."""

    def __init__(self, hms: EmbeddedMetastore, root: Path) -> None:
        self.uri = hms.uri
        self.root = root
        self.catalog = HmsCatalog(hms.uri)
        self._n = 0

    def close(self) -> None:
        self.catalog.close()

    def location(self, db: str, table: str, part: str | None = None) -> str:
        snap = self.catalog.get_table(db, table)
        if snap is None:
            return f"file://{self.root / f'{db}.db' / table}" + (f"/{part}" if part else "")
        return f"{snap.sd.location}/{part}" if part else str(snap.sd.location)

    def write_file(self, location: str, rows: int) -> str:
        """A Parquet file under ``location`` (a file:// URL); its URL."""
        self._n += 1
        directory = Path(location.removeprefix("file:"))
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"part-{self._n:05d}.parquet"
        ids = list(range(self._n * 100, self._n * 100 + rows))
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}), path)
        return f"file://{path}"

    def create_database(self, db: str) -> None:
        self.catalog.create_database(DatabaseSnapshot(name=db, location=f"file://{self.root / f'{db}.db'}"))

    def create_table(self, db: str, table: str, partitioned: bool = False, rows: int = 0) -> None:
        """A managed Parquet table; with ``rows`` a file is in its location before it is created."""
        location = self.location(db, table)
        if rows:
            self.write_file(location, rows)
        self.catalog.create_table(TableSnapshot(
            name=table, db=db, table_type="MANAGED_TABLE", partition_keys=DAY if partitioned else [],
            sd=StorageDescriptor(location=location, columns=COLS, **PARQUET)))

    def add_partitions(self, db: str, table: str, days: list[str]) -> None:
        parts = []
        for day in days:
            location = self.location(db, table, f"dt={day}")
            self.write_file(location, 3)
            parts.append(PartitionSnapshot(values=[day], sd=StorageDescriptor(
                location=location, columns=COLS, **PARQUET)))
        self.catalog.add_partitions(db, table, parts)

    def insert(self, db: str, table: str, day: str | None = None) -> None:
        """A new file in the table (or partition) and the INSERT event a writer fires for it."""
        url = self.write_file(self.location(db, table, f"dt={day}" if day else None), 2)
        client = open_client(self.uri, timeout_s=30)
        try:
            client.fire_listener_event(tt.FireEventRequest(
                successful=True, dbName=db, tableName=table, partitionVals=[day] if day else None,
                data=tt.FireEventRequestData(insertData=tt.InsertEventRequestData(filesAdded=[url]))))
        finally:
            client.close()

    def alter_table_param(self, db: str, table: str, key: str, value: str) -> None:
        snap = self.catalog.get_table(db, table)
        assert snap is not None
        params = {**snap.parameters, key: value}
        self.catalog.alter_table(db, table, dataclasses.replace(snap, parameters=params))


def log_rows(uri: str, after: int = 0) -> list[tuple[int, str, str | None, str | None]]:
    """(event id, type, db, table) of a metastore's notification log after ``after``."""
    reader = ThriftNotificationReader(uri)
    try:
        out, last = [], after
        while rows := reader.read_after(last, 500):
            out += [(r.event_id, r.event_type, r.db_name, r.table_name) for r in rows]
            last = rows[-1].event_id
        return out
    finally:
        reader.close()


def last_ids(uri: str, dbs: list[str], until: int | None = None, after: int = 0) -> dict[str, int]:
    """Per database, the id of its newest logged event (``<= until``)."""
    out: dict[str, int] = {}
    for event_id, _, db, _ in log_rows(uri, after):
        if db in dbs and (until is None or event_id <= until):
            out[db] = event_id
    return out


def publish(uri: str, config: dict[str, object], stream: Stream, start_after: int | None = None) -> int:
    """An agent on ``uri`` publishes everything logged so far; its last event id."""
    settings = AgentConfig(stream.source_id, dict(config), topic=stream.topic, start_after=start_after,
                           gap_settle_seconds=0.5)
    agent = SourceAgent(settings, ThriftNotificationReader(uri))
    try:
        agent.run(once=True)
        return agent.last_id
    finally:
        agent.close()
        agent.reader.close()


def tables_of(catalog: HmsCatalog, db: str) -> dict[str, tuple[object, ...]]:
    """Per table: columns, partition keys, partitions and data files (partition, name, sha256)."""
    out: dict[str, tuple[object, ...]] = {}
    for name in sorted(catalog.list_tables(db)):
        snap = catalog.get_table(db, name)
        assert snap is not None
        keys = [c.name for c in snap.partition_keys]
        parts = sorted(tuple(p.values) for p in catalog.list_partitions(db, name)) if keys else []
        out[name] = ([(c.name, c.type) for c in snap.sd.columns], keys, parts,
                     target_files(catalog, db, name), snap.parameters.get("note"))
    return out


def streamer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([STREAMER, *args], capture_output=True, text=True, timeout=300)


def test_replicate_failover_failback_verify(
    broker: EmbeddedBroker, hms_notifying: EmbeddedMetastore, target_jobs: list[TargetProcess],
    prefix: str, tmp_path: Path,
) -> None:
    bootstrap = broker.bootstrap_servers
    config = broker.client_settings()
    db_a, db_b = f"{prefix}a", f"{prefix}b"
    dbs = [db_a, db_b]
    forward = Stream(f"old-{prefix.rstrip('_')}", f"streamer.old.{prefix}events")
    reverse = Stream(f"new-{prefix.rstrip('_')}", f"streamer.new.{prefix}events")
    old = EmbeddedMetastore(work_dir=tmp_path / "old", notifications=True).start()  # A: the old source
    new = hms_notifying  # B: the target, then the new primary
    stack_b = TargetStack(new, tmp_path / "b")
    stack_a = TargetStack(old, tmp_path / "a")  # A as a target, after the failback
    on_a = Writer(old, old.warehouse_dir)
    on_b = Writer(new, stack_b.warehouse_root)
    try:
        # (1) A's writes, published; a bounded run stops at N, an unbounded one converges
        on_a.create_database(db_a)
        on_a.create_database(db_b)
        on_a.create_table(db_a, "t1", rows=3)  # its first file is listed by CREATE_TABLE
        on_a.insert(db_a, "t1")
        on_a.create_table(db_a, "p1", partitioned=True)
        on_a.add_partitions(db_a, "p1", ["2024-01-01", "2024-01-02"])
        on_a.insert(db_a, "p1", "2024-01-01")
        on_a.create_table(db_b, "t2")
        until = publish(old.uri, config, forward) + 1  # N: db_b's INSERT, after db_a's last event
        on_a.insert(db_b, "t2")
        on_a.alter_table_param(db_a, "t1", "note", "v1")
        on_a.catalog.drop_partitions(db_a, "p1", [["2024-01-02"]])
        on_a.create_table(db_a, "gone")
        on_a.catalog.drop_table(db_a, "gone")
        on_a.insert(db_b, "t2")
        head = publish(old.uri, config, forward)
        assert [t for _, t, _, _ in log_rows(old.uri)] == [
            "CREATE_DATABASE", "CREATE_DATABASE", "CREATE_TABLE", "INSERT", "CREATE_TABLE", "ADD_PARTITION",
            "INSERT", "CREATE_TABLE", "INSERT", "ALTER_TABLE", "DROP_PARTITION", "CREATE_TABLE", "DROP_TABLE",
            "INSERT"]
        expected_at_n = last_ids(old.uri, dbs, until)
        assert expected_at_n[db_a] < until == expected_at_n[db_b]

        bounded = TargetProcess(stack_b, bootstrap, forward, name="bounded",
                                extra=["--until-event", str(until), "--max-events-per-trigger", "5000"])
        target_jobs.append(bounded.start())
        assert bounded.proc is not None and bounded.proc.wait(240) == 0, bounded.tail()
        assert f"stopped at --until-event {until}; event {until + 1} and later are held" in bounded.tail()
        assert stack_b.applied_ids(dbs) == expected_at_n and not stack_b.halts()

        job = TargetProcess(stack_b, bootstrap, forward, name="forward")
        target_jobs.append(job.start())
        expected = last_ids(old.uri, dbs)
        wait_applied(job, stack_b, expected, 240)
        assert stack_b.applied_ids(dbs) == expected
        assert job.metric("streamer_target_events_applied_total") == head - until
        with stack_b.catalog() as b_cat, HmsCatalog(old.uri) as a_cat:
            for db in dbs:
                assert tables_of(b_cat, db) == tables_of(a_cat, db), db  # no drift at the cut
            assert b_cat.get_database(db_a).parameters[REPL_TARGET_PARAM] == forward.source_id  # type: ignore[union-attr]
        replication_events = [r for r in log_rows(new.uri) if r[2] in dbs]
        logged = {t for _, t, _, _ in replication_events}
        assert {"CREATE_DATABASE", "CREATE_TABLE", "ADD_PARTITION"} <= logged

        # (2) failover while the job runs: the cut, and B's head taken after the job stopped
        done = streamer("failover", "--state-dir", str(stack_b.state_dir), "--hms-uri", new.uri,
                        "--bootstrap-servers", bootstrap, "--topic", forward.topic, "--source-id",
                        forward.source_id, "--wait-seconds", "60", "--output", "json")
        assert done.returncode == 0, done.stderr
        cut = json.loads(done.stdout)["cut"]
        assert json.loads(done.stdout)["warnings"] == []  # B logs: a reverse stream is possible
        assert cut["event_id"] == head == cut["source_head_event_id"] and cut["unreplicated"] == 0
        assert job.proc is not None and job.proc.wait(60) == 0 and "failed over" in job.tail(), job.tail()
        b_head = log_rows(new.uri)[-1][0]
        assert cut["new_primary_event_id"] == b_head >= replication_events[-1][0]
        with stack_b.catalog() as b_cat:
            for db in dbs:
                params = b_cat.get_database(db).parameters  # type: ignore[union-attr]
                assert REPL_TARGET_PARAM not in params and params[FAILOVER_CUT_PARAM] == str(head)
        again = streamer("failover", "--state-dir", str(stack_b.state_dir), "--hms-uri", new.uri)
        assert again.returncode == 0 and "already failed over" in again.stdout, again.stderr
        status = streamer("status", "--hms-uri", new.uri, "--state-dir", str(stack_b.state_dir),
                          "--output", "json")
        assert status.returncode == 0 and json.loads(status.stdout)["failover"]["cut"]["event_id"] == head
        refused = streamer("target", "run", "--bootstrap-servers", bootstrap, "--source-id",
                           forward.source_id, "--topic", forward.topic, "--hms-uri", new.uri, "--state-dir",
                           str(stack_b.state_dir), "--warehouse-root", stack_b.warehouse_root.as_uri(),
                           "--metrics-port", "0")
        assert refused.returncode == 1 and "failed over at source event" in refused.stderr, refused.stderr

        # (3) B (the new primary) takes writes; A takes writes after the cut, never replicated
        on_b.create_table(db_a, "on_b", rows=2)
        on_b.insert(db_a, "on_b")
        on_b.add_partitions(db_a, "p1", ["2024-03-01"])
        on_a.create_table(db_b, "late")
        on_a.insert(db_b, "late")
        late = [e for e, _, _, t in log_rows(old.uri, head)]
        assert len(late) == 2

        # (4) failback: A's changes are listed and the rebase refused, until discarded explicitly
        state = str(stack_b.state_dir)
        check = streamer("failback", "--state-dir", state, "--source-hms-uri", old.uri, "--rebase")
        assert check.returncode == 1, check.stdout + check.stderr
        listed = f"{db_b}.late: events {late[0]}-{late[1]} (CREATE_TABLE, INSERT; never published)"
        assert listed in check.stderr
        assert "refusing to rebase" in check.stderr
        with HmsCatalog(old.uri) as a_cat:
            assert set(dbs) <= set(a_cat.list_databases())  # nothing dropped
        discard = streamer("failback", "--state-dir", state, "--source-hms-uri", old.uri,
                           "--discard-unreplicated", "--rebase", "--output", "json")
        assert discard.returncode == 0, discard.stderr
        body = json.loads(discard.stdout)
        assert body["discarded"] and body["unreplicated_events"] == 2 and body["dropped"] == sorted(dbs)
        assert read_failback(stack_b.state_dir)["dropped"] == sorted(dbs)  # type: ignore[index]
        with HmsCatalog(old.uri) as a_cat:
            assert not set(dbs) & set(a_cat.list_databases())

        # (5) the reverse stream: B bootstrapped into a new topic, then its agent after the cut
        boot = streamer("bootstrap", "--hms-uri", new.uri, "--source-id", reverse.source_id, "--topic",
                        reverse.topic, "--bootstrap-servers", bootstrap, "--policy", db_a, "--policy", db_b)
        assert boot.returncode == 0, boot.stderr
        record = read_record(stack_b.state_dir)
        assert record is not None and record.cut is not None and record.cut.new_primary_event_id == b_head
        on_b.insert(db_a, "on_b")  # B's own write after the bootstrap: only its log carries it
        b_insert = log_rows(new.uri)[-1]
        assert b_insert[1:3] == ("INSERT", db_a)
        assert publish(new.uri, config, reverse, start_after=b_head) == b_insert[0]
        with pytest.raises(ConfigError, match="already ends at event"):  # a gap would be left: refused
            publish(new.uri, config, reverse, start_after=b_insert[0] + 5)
        published = [e for e in topic_events(config, reverse.topic) if e.event_type == EventType.INSERT]
        assert [e.event_id for e in published] == [b_insert[0]]
        assert isinstance(published[0].payload, InsertPayload) and published[0].payload.files[0].checksum

        # (6) A as a target of B; verify finds no drift; A equals B
        back = TargetProcess(stack_a, bootstrap, reverse, name="reverse")
        target_jobs.append(back.start())
        wait_applied(back, stack_a, {db_a: b_insert[0], db_b: b_head + 1}, 300)  # db_b: at the bootstrap's id
        applied = stack_a.applied_ids(dbs)
        assert applied[db_a] == b_insert[0] and b_head < applied[db_b] < b_insert[0] and not stack_a.halts()
        back.stop()
        verify = streamer("verify", "--hms-uri", old.uri, "--state-dir", str(stack_a.state_dir),
                          "--bootstrap-servers", bootstrap, "--topic", reverse.topic, "--source-id",
                          reverse.source_id, "--output", "json")
        assert verify.returncode == 0, verify.stdout + verify.stderr
        verdict = json.loads(verify.stdout)
        assert verdict["ok"] and not verdict["drifts"], verdict
        assert sorted(d["db"] for d in verdict["databases"]) == sorted(dbs)
        assert sum(d["compared"]["files"] for d in verdict["databases"]) >= 6, verdict
        with stack_b.catalog() as b_cat, HmsCatalog(old.uri) as a_cat:
            for db in dbs:
                a_tables, b_tables = tables_of(a_cat, db), tables_of(b_cat, db)
                assert a_tables == b_tables, db
                assert LAST_ID_PARAM in a_cat.get_database(db).parameters  # type: ignore[union-attr]
                assert FAILOVER_CUT_PARAM not in a_cat.get_database(db).parameters  # type: ignore[union-attr]
            assert sorted(a_cat.list_tables(db_a)) == ["on_b", "p1", "t1"]
        rerun = streamer("failback", "--state-dir", state, "--source-hms-uri", old.uri,
                         "--discard-unreplicated", "--rebase")
        assert rerun.returncode == 0 and "already rebased" in rerun.stdout, rerun.stdout + rerun.stderr
        with HmsCatalog(old.uri) as a_cat:
            assert set(dbs) <= set(a_cat.list_databases())  # the replicas are never dropped again
            assert sum(Counter(target_files(a_cat, db_a, "on_b")).values()) == 3
    finally:
        on_a.close()
        on_b.close()
        old.stop()
