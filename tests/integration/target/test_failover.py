"""DR operations on the embedded stack (bundled warehouse -> agent -> Tansu -> ``streamer target run``
-> embedded metastore): bounded replication, failover at a cut, a write on the new primary, and the
failback check of the old source. Runbook: docs/failover.md.

One test, in phases, so Spark starts only twice: (1) ``--until-event N`` stops cleanly at N while the
topic holds more, (2) a run without the bound applies exactly N+1.., (3) ``streamer failover`` stops
that running job, records the cut and makes the replica writable, (4) the new primary takes a write,
the old source takes writes after the cut, and ``streamer failback`` lists them and refuses until
they are discarded, (5) an agent on the new primary starts its reverse stream after the cut.

Where the stack is not real: the embedded metastore (Hive 2.3 from PySpark's jars) has no
DbNotificationListener, so the new primary's own writes never reach its notification log and the
reverse stream carries none of them; and the bundled warehouse cannot be a target (the target job
applies through a metastore's Thrift API), so the old source is not rebased here. docs/failover.md
says what a production failback does at those two steps.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from streamer.errors import ConfigError
from streamer.events.model import Column, StorageDescriptor, TableSnapshot
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.topics import read_tail
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.thrift_reader import ThriftNotificationReader
from streamer.target.catalog import FAILOVER_CUT_PARAM, LAST_ID_PARAM, REPL_TARGET_PARAM
from streamer.target.failover import read_record
from streamer.warehouse.workload import COLUMNS
from tests.integration.target.helpers import (
    STREAMER,
    Source,
    TargetProcess,
    TargetStack,
    assert_target_equals_source,
    mixed_workload,
    wait_converged,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def last_ids_through(source: Source, until: int) -> dict[str, int]:
    """Per source database existing at event ``until``: its newest event id ``<= until``."""
    out: dict[str, int] = {}
    for row in source.warehouse.notifications():
        if row.event_id > until:
            break
        if not row.db_name:
            continue
        if row.event_type == "DROP_DATABASE":
            out.pop(row.db_name.lower(), None)
        else:
            out[row.db_name.lower()] = row.event_id
    return out


def streamer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([STREAMER, *args], capture_output=True, text=True, timeout=180)


def test_bounded_replication_failover_and_failback_check(
    broker: EmbeddedBroker,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetProcess],
    prefix: str,
    tmp_path: Path,
) -> None:
    wh = source.warehouse
    last = mixed_workload(source.publishing(), prefix, 40, seed=41)
    until = last - 12  # inside the first micro-batch: the job must stop within a batch
    expected_at_n = last_ids_through(source, until)
    assert any(v < until for v in expected_at_n.values()), "want a database whose last event is before N"

    # (1) bounded: stops by itself at N, with the rest of the topic unapplied
    bounded = TargetProcess(target_stack, broker.bootstrap_servers, source, name="bounded",
                            extra=["--until-event", str(until), "--max-events-per-trigger", "5000"])
    target_jobs.append(bounded.start())
    assert bounded.proc is not None
    assert bounded.proc.wait(240) == 0, bounded.tail()
    assert f"stopped at --until-event {until}; event {until + 1} and later are held" in bounded.tail()
    assert target_stack.applied_ids(expected_at_n) == expected_at_n
    assert not target_stack.halts()

    # (2) unbounded: continues with exactly N+1 (the uncommitted batch is re-read, 1..N skipped)
    job = TargetProcess(target_stack, broker.bootstrap_servers, source, name="resumed")
    target_jobs.append(job.start())
    wait_converged(job, source)
    after_n = sum(1 for row in wh.notifications() if row.event_id > until)
    assert job.metric("streamer_target_events_applied_total") == after_n
    assert_target_equals_source(source, target_stack, None)  # no drift at the cut
    # (a `streamer verify` call belongs here once it exists: same target, expected: no drift)
    with target_stack.catalog() as catalog:
        db_a = catalog.get_database(f"{prefix}a")
        assert db_a is not None and db_a.parameters[REPL_TARGET_PARAM] == source.source_id

    # (3) failover while the job runs: it stops, the cut is recorded, the databases become writable
    done = streamer("failover", "--state-dir", str(target_stack.state_dir), "--hms-uri", target_stack.hms.uri,
                    "--bootstrap-servers", broker.bootstrap_servers, "--topic", source.topic,
                    "--source-id", source.source_id, "--wait-seconds", "60", "--output", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["state"] == "done" and not report["already_done"]
    cut = report["cut"]
    assert cut["event_id"] == last and cut["source_head_event_id"] == last and cut["unreplicated"] == 0
    assert job.proc is not None and job.proc.wait(60) == 0, job.tail()
    assert "failed over" in job.tail()
    replicated = set(source.last_ids())
    assert set(report["changed"]) == replicated
    with target_stack.catalog() as catalog:
        for db in replicated:
            params = catalog.get_database(db).parameters  # type: ignore[union-attr]
            assert REPL_TARGET_PARAM not in params
            assert params[FAILOVER_CUT_PARAM] == str(last) and params[LAST_ID_PARAM]
    state = str(target_stack.state_dir)
    again = streamer("failover", "--state-dir", state, "--hms-uri", target_stack.hms.uri)
    assert again.returncode == 0 and "already failed over" in again.stdout, again.stderr
    status = streamer("status", "--hms-uri", target_stack.hms.uri, "--state-dir", state, "--output", "json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["failover"]["cut"]["event_id"] == last
    refused = streamer("target", "run", "--bootstrap-servers", broker.bootstrap_servers, "--source-id",
                       source.source_id, "--topic", source.topic, "--hms-uri", target_stack.hms.uri,
                       "--warehouse-root", target_stack.warehouse_root.as_uri(),
                       "--state-dir", str(target_stack.state_dir), "--metrics-port", "0")
    assert refused.returncode == 1 and "failed over at source event" in refused.stderr, refused.stderr

    # (4) both sides write after the cut; the failback check lists the old source's changes
    with target_stack.catalog() as catalog:  # the new primary takes writes (its database is writable)
        catalog.create_table(TableSnapshot(
            name="written_on_new_primary", db=f"{prefix}a", table_type="MANAGED_TABLE",
            sd=StorageDescriptor(location=(target_stack.warehouse_root / "new_primary").as_uri(),
                                 columns=[Column("id", "bigint")])))
        assert "written_on_new_primary" in catalog.list_tables(f"{prefix}a")
    late = source.publishing()  # published by the agent: in the topic, never applied
    late.create_table(f"{prefix}b", "late", COLUMNS)
    late.insert(f"{prefix}b", "late", [{"id": 1, "name": "x", "amount": 1.0, "ok": True}])
    wh.alter_database(f"{prefix}a", {"note": "after the cut"})  # never published
    after_cut = [row.event_id for row in wh.notifications(after=last)]
    assert len(after_cut) == 3

    url = str(tmp_path / "source" / "metastore.sqlite")  # the old source's metastore (conftest.source)
    check = streamer("failback", "--state-dir", str(target_stack.state_dir), "--notification-db", url)
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"{prefix}b.late: events {after_cut[0]}-{after_cut[1]} (CREATE_TABLE, INSERT" in check.stderr
    assert f"{prefix}a: events {after_cut[2]} (ALTER_DATABASE; never published)" in check.stderr
    assert "refusing to rebase" in check.stderr
    assert not (target_stack.state_dir / "failback.json").exists()
    discard = streamer("failback", "--state-dir", str(target_stack.state_dir), "--notification-db", url,
                       "--discard-unreplicated", "--output", "json")
    assert discard.returncode == 0, discard.stderr
    body = json.loads(discard.stdout)
    assert body["discarded"] and body["unreplicated_events"] == 3
    assert sorted(i for o in body["objects"] for i in o["event_ids"]) == after_cut
    assert json.loads((target_stack.state_dir / "failback.json").read_text())["discarded"]

    # (5) the reverse stream: an agent on the new primary publishes to a new topic after the cut
    record = read_record(target_stack.state_dir)
    assert record is not None and record.cut is not None
    start = record.cut.new_primary_event_id
    assert start is not None
    config = broker.client_settings()
    reverse_topic = f"{source.topic}.reverse"
    reader = ThriftNotificationReader(target_stack.hms.uri)
    agent = SourceAgent(AgentConfig(f"{source.source_id}-dr", config, topic=reverse_topic, start_after=start,
                                    gap_settle_seconds=0.5), reader)
    try:
        agent.run(once=True)
        assert agent.last_id == max(start, reader.head_event_id())
    finally:
        agent.close()
    tail = read_tail(config, reverse_topic, n=1)
    assert tail, "the reverse stream published its first progress record"
    # a conflicting --start-after on a topic that already ends before it is refused, clearly
    conflict = SourceAgent(AgentConfig(f"{source.source_id}-dr", config, topic=reverse_topic,
                                       start_after=agent.last_id + 5), reader)
    try:
        with pytest.raises(ConfigError, match="already ends at event"):
            conflict.start()
    finally:
        conflict.close()
        reader.close()
