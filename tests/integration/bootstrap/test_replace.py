"""Policy REPLACE end to end, through the real broker, metastore and Spark target job.

1. The operator restarts ``streamer source run`` (a child process) with another ``--policy`` while
   writers keep changing the source: the agent publishes the old policy's events up to E1, drops the
   newly excluded table and bootstraps the newly included ones at E1, and goes on publishing.
2. The change again, through ``replace_policy``, with writers interleaved with the dump itself (a
   table changed while read is re-read, one changed after it is consolidated from its events); a
   third change before any source event is refused (it would share the second one's event id).

A running ``streamer target run`` (never restarted) applies both; each time the target equals the
source for exactly the policy's tables (metadata, partitions, file checksums, rows via Spark SQL).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from pyspark.sql import SparkSession

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import (
    BootstrapKind,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    BootstrapScope,
    Column,
    Event,
    EventType,
    PartitionSnapshot,
    ProgressPayload,
)
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.topics import end_offsets
from streamer.source.policy import PolicySet
from streamer.source.policy_record import policy_record
from streamer.source.reader import SqlNotificationReader
from streamer.source.replace import PolicyChangeError, recorded_policy, replace_policy
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import COLUMNS
from tests.integration.source.test_agent import topic_events
from tests.integration.target.helpers import (
    STREAMER,
    Comparison,
    Source,
    SparkReader,
    TargetStack,
    assert_target_equals_source,
)
from tests.integration.target.in_process import TargetInProcess, TargetJob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DAY = [Column("dt", "string")]
FIRST_TABLES = ["a1", "a2", "a3"]
SECOND_TABLES = ["a1", "a3", "b1", "b2", "b3"]  # b3 is created while the policy changes
THIRD_TABLES = ["a1", "a2", "a3", "b1", "b3", "b5"]  # b5 is created during the dump
EMPTY_PARTITIONS = 50


def _rows(i: int, n: int = 3) -> list[dict[str, object]]:
    return [{"id": i * 10 + k, "name": f"n{i}.{k}", "amount": k * 1.5, "ok": k % 2 == 0} for k in range(n)]


def _history(wh: Warehouse, db: str, other: str) -> None:
    """Partitioned and plain tables with data: a* (the first policy), b* (added), c1 and ``other`` (never)."""
    wh.create_database(db, {"owner.team": "fin"})
    wh.create_database(other)
    wh.create_table(other, "a1", COLUMNS, [])
    wh.insert(other, "a1", _rows(0))
    for name in ("a1", "a2", "b1"):
        wh.create_table(db, name, COLUMNS, DAY)
        wh.add_partitions(db, name, [{"dt": f"d{k}"} for k in range(6)])
    wh.add_partitions(db, "b1", [{"dt": f"e{k:03d}"} for k in range(EMPTY_PARTITIONS)])
    for name in ("a1", "a2", "b1"):
        for k in range(3):
            wh.insert(db, name, _rows(k), {"dt": f"d{k}"})
    for name in ("a3", "b2", "c1"):
        wh.create_table(db, name, COLUMNS, [])
        wh.insert(db, name, _rows(1), n_files=2)
    wh.alter_table_properties(db, "b2", {"comment": "before the change"})
    wh.insert(db, "a1", _rows(9), {"dt": "d5"})  # the newest event is the first policy's


def _change(wh: Warehouse, db: str, other: str, i: int) -> None:
    """One round of writers: every table changes, in and out of every policy."""
    wh.insert(db, "a1", _rows(i), {"dt": f"d{i % 4}"})
    wh.insert(db, "a2", _rows(i), {"dt": f"n{i:03d}"})
    wh.insert(db, "b1", _rows(i), {"dt": f"n{i:03d}"})
    wh.insert(db, "b2", _rows(i))
    wh.insert(db, "c1", _rows(i))
    wh.insert(other, "a1", _rows(i))
    if i == 2:
        wh.create_table(db, "b3", COLUMNS, DAY)
    if i > 2:
        wh.insert(db, "b3", _rows(i), {"dt": f"d{i % 3}"})
    if i % 4 == 3:
        wh.alter_table_properties(db, "b2", {"comment": f"round {i}"})
        old = [p for p in wh.partitions(db, "b1") if p["dt"].startswith("d")]
        if old:
            wh.drop_partitions(db, "b1", old[:1])
        wh.insert(db, "a3", _rows(i), overwrite=True)


class _WritesDuringDump:
    """The dump's source catalog; the first read of a table's partitions lets writers change the source."""

    def __init__(self, catalog: WarehouseCatalog, write: Callable[[str], None]) -> None:
        self._catalog, self._write = catalog, write
        self.seen: list[str] = []

    def partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        if table not in self.seen:
            self.seen.append(table)
            self._write(table)
        return self._catalog.partitions(db, table)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)


def _writes_during_dump(wh: Warehouse, db: str, other: str) -> Callable[[str], None]:
    def write(table: str) -> None:
        if table == "a2":  # while a2 is read: it is read again
            wh.insert(db, "a2", _rows(50), {"dt": "during"})
            wh.insert(db, "a1", _rows(50), {"dt": "d0"})
        elif table == "b2":  # after a2 was read: its events are consolidated into the dump
            wh.drop_partitions(db, "a2", [{"dt": "d1"}])
            wh.insert(db, "a2", _rows(51), {"dt": "after"})
            wh.alter_table_properties(db, "a2", {"comment": "changed during the dump"})
            wh.insert(db, "b2", _rows(51))
            wh.create_table(db, "b5", COLUMNS, [])
            wh.insert(db, "b5", _rows(52))
            wh.insert(db, "c1", _rows(52))
            wh.insert(other, "a1", _rows(52))

    return write


class _Included:
    """The source warehouse as a policy sees it: only its databases and tables (for the comparison)."""

    def __init__(self, wh: Warehouse, policy: PolicySet) -> None:
        self._wh, self._policy = wh, policy

    def databases(self) -> list[str]:
        return [d for d in self._wh.databases() if self._policy.includes_db(d)]

    def tables(self, db: str) -> list[str]:
        return [t for t in self._wh.tables(db) if self._policy.includes_table(db, t)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wh, name)


class AgentProcess:
    """``streamer source run`` as a child process, as an operator runs it (own process group)."""

    def __init__(self, source: Source, servers: str, policies: Sequence[str], log_path: Path) -> None:
        assert isinstance(source.agent.reader, SqlNotificationReader)
        self.log_path = log_path
        self.command = [
            STREAMER, "--log-level", "INFO", "source", "run",
            "--source-id", source.source_id,
            "--notification-db", source.agent.reader.url,
            "--bootstrap-servers", servers,
            "--topic", source.topic,
            "--batch-size", "50", "--poll-interval", "0.05", "--gap-settle-seconds", "0.5",
            "--cmroot", str(source.agent.config.enrich.cmroot),
            *(arg for p in policies for arg in ("--policy", p)),
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AgentProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def replaced_at(self) -> int | None:
        """E1 once the agent has published the policy change (its own report), else None."""
        found = re.search(r"policies changed: .* at event (\d+)", self.log())
        return int(found.group(1)) if found else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        """SIGTERM (the agent finishes its batch and exits 0), then SIGKILL whatever is left."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.wait(30)


def _wait_applied(job: TargetJob, stack: TargetStack, db: str, event_id: int, timeout: float) -> None:
    def done() -> bool:
        halts = stack.halts()
        assert not halts, halts
        return stack.applied_ids([db])[db] >= event_id

    job.wait_for(done, f"{db} repl.last.id >= {event_id}", timeout)


def _changes(events: Sequence[Event], low: int, high: int) -> set[str]:
    """Tables of the source events published with ``low < id <= high``."""
    skip = (EventType.PROGRESS, EventType.BOOTSTRAP, EventType.BOOTSTRAP_END)
    return {str(e.table) for e in events
            if e.event_type not in skip and e.table and low < e.event_id <= high}


def _replacement(
    events: Sequence[Event], e1: int, old: PolicySet, new: PolicySet
) -> dict[BootstrapKind, set[str]]:
    """The change published at E1 (checked: one TABLES marker, old policy before it, new after it):
    the tables of its records by kind."""
    at = [i for i, e in enumerate(events) if isinstance(e.payload, BootstrapMarkerPayload)
          and e.event_id == e1]
    assert len(at) == 1, at
    marker = cast(BootstrapMarkerPayload, events[at[0]].payload)
    assert marker.scope is BootstrapScope.TABLES and marker.policy == policy_record(new), marker
    out: dict[BootstrapKind, set[str]] = {}
    for e in events[at[0] - marker.records : at[0]]:
        p = e.payload
        assert isinstance(p, BootstrapObjectPayload) and p.bootstrap_id == e1, e
        out.setdefault(p.kind, set()).add(p.table.name if p.table else "")
    progress = [(i, e.payload) for i, e in enumerate(events) if isinstance(e.payload, ProgressPayload)]
    last_before = [p for i, p in progress if i < at[0] - marker.records][-1]
    assert last_before.policy == policy_record(old) and last_before.last_event_id == e1, last_before
    assert {p.policy for i, p in progress if i > at[0]} == {policy_record(new)}
    return out


def _assert_replica(source: Source, stack: TargetStack, reader: SparkReader, policy: PolicySet,
                    db: str, tables: list[str], other: str) -> Comparison:
    """Exactly ``tables`` of ``db`` on the target, nothing of ``other``, and equal to the source."""
    with stack.catalog() as catalog:
        assert other not in catalog.list_databases()
        assert sorted(catalog.list_tables(db)) == tables
    assert sorted(_Included(source.warehouse, policy).tables(db)) == tables
    included = dataclasses.replace(source, warehouse=cast(Warehouse, _Included(source.warehouse, policy)))
    seen = assert_target_equals_source(included, stack, reader)
    assert seen.tables == len(tables) and seen.rows > 0, seen
    return seen


def test_policy_replace_drops_and_bootstraps_tables_without_stopping_the_stream(
    broker: EmbeddedBroker,
    spark: SparkSession,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetJob],
    spark_readers: Callable[[EmbeddedMetastore], SparkReader],
    prefix: str,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    wh = source.warehouse
    db, other = f"{prefix}db", f"{prefix}other"
    first = PolicySet.parse([f"{db}.['a.*']"])
    second_text = f"{db}.['(a|b).*'].['a2']"
    second = PolicySet.parse([second_text])
    third = PolicySet.parse([f"{db}.['(a|b).*'].['b2']"])
    _history(wh, db, other)
    source.agent.policy = first
    source.publish()
    job = TargetInProcess(target_stack, broker.bootstrap_servers, source, spark=spark).start()
    target_jobs.append(job)
    _wait_applied(job, target_stack, db, wh.current_event_id(), timeout=240)
    with target_stack.catalog() as catalog:
        assert sorted(catalog.list_tables(db)) == FIRST_TABLES
        assert other not in catalog.list_databases()
    before = wh.current_event_id()

    # 1. the operator stops the agent and starts it again with the new policy; writers never pause
    source.agent.close()
    _change(wh, db, other, 0)
    agent = AgentProcess(source, broker.bootstrap_servers, [second_text], tmp_path / "agent.log").start()
    try:
        rounds, e1, after = 1, None, 0
        deadline = time.monotonic() + 120
        while e1 is None or after < 6:
            assert agent.alive, f"agent exited {agent.proc and agent.proc.poll()}: {agent.log()[-3000:]}"
            assert time.monotonic() < deadline, f"no policy change published: {agent.log()[-3000:]}"
            _change(wh, db, other, rounds)
            rounds += 1
            e1 = e1 or agent.replaced_at()
            after += e1 is not None
            time.sleep(0.1)
        wh.insert(db, "b1", _rows(99), {"dt": "last"})  # the newest event is the new policy's
        last = wh.current_event_id()
        assert before < e1 < last, (before, e1, last)
        _wait_applied(job, target_stack, db, last, timeout=180)
        assert agent.alive, agent.log()[-3000:]  # the same agent process published before and after E1
    finally:
        code = agent.stop()
    assert code == 0, agent.log()[-3000:]
    first_applied = time.monotonic() - started

    events = topic_events(broker.client_settings(), source.topic)
    assert {e.db for e in events if e.event_type is not EventType.PROGRESS and e.db} == {db}
    assert _changes(events, before, e1) >= {"a1", "a2"}, "the old policy's events up to E1 are published"
    assert not _changes(events, before, e1) - set(FIRST_TABLES), _changes(events, before, e1)
    assert _changes(events, e1, last) >= {"a1", "b1", "b2", "b3"}, "the new policy's events follow E1"
    assert not _changes(events, e1, last) - set(SECOND_TABLES), _changes(events, e1, last)
    records = _replacement(events, e1, first, second)
    assert records[BootstrapKind.DROP_TABLE] == {"a2"}
    assert {"b1", "b2"} <= records[BootstrapKind.TABLE] <= {"b1", "b2", "b3"}, records  # b3 if before E1
    assert set(records) <= {BootstrapKind.DROP_TABLE, BootstrapKind.TABLE, BootstrapKind.PARTITIONS}
    reader = spark_readers(target_stack.hms)
    seen = _assert_replica(source, target_stack, reader, second, db, SECOND_TABLES, other)

    # 2. again, with writers changing the source while it is dumped: a2 back in, b2 out
    assert recorded_policy(source.agent.config) == policy_record(second)
    dumping = _WritesDuringDump(WarehouseCatalog(wh), _writes_during_dump(wh, db, other))
    before2 = wh.current_event_id()
    e2 = replace_policy(source.agent.config, source.agent.reader, dumping, second, third)
    assert {"a2", "b2"} <= set(dumping.seen) and e2 > before2 + 5, (dumping.seen, before2, e2)
    # another change before any source event would share E1 with this one: refused, nothing published
    offsets = end_offsets(broker.client_settings(), source.topic)
    with pytest.raises(PolicyChangeError, match=f"at event {e2} and the source has no event after it"):
        replace_policy(source.agent.config, source.agent.reader, WarehouseCatalog(wh), third, first)
    assert end_offsets(broker.client_settings(), source.topic) == offsets
    source.agent.policy = third
    source.agent.start()  # continues after E1
    assert source.agent.last_id == e2
    publishing = source.publishing()
    for i in range(rounds, rounds + 3):
        _change(publishing, db, other, i)
    publishing.insert(db, "a2", _rows(98), {"dt": "last"})
    last2 = source.publish()
    _wait_applied(job, target_stack, db, last2, timeout=180)

    events = topic_events(broker.client_settings(), source.topic)
    assert _changes(events, last, e2) == {"a1", "b2", "b5"}, _changes(events, last, e2)
    assert not _changes(events, e2, last2) - set(THIRD_TABLES), _changes(events, e2, last2)
    assert "c1" not in _changes(events, 0, last2)
    records = _replacement(events, e2, second, third)
    assert records == {BootstrapKind.DROP_TABLE: {"b2"}, BootstrapKind.TABLE: {"a2"}}, records
    assert job.alive and job.starts == 1, "the target job applied both changes without a restart"
    seen2 = _assert_replica(source, target_stack, reader, third, db, THIRD_TABLES, other)
    print(f"\npolicy replaced by a restarted agent at event {e1} (source events {before}..{last}, {rounds} "
          f"write rounds; target converged after {first_applied:.0f} s), {seen}; replaced again at {e2} "
          f"with writes during the dump, {seen2}; total {time.monotonic() - started:.0f} s")
