"""Fault campaigns: a gap in the notification log, a full target disk, a broker that lost its topic.

Each fault must stop replication loudly with a typed error and leave no partial state behind:
DESIGN §2 invariants 3, 6 and 7 seen from outside.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamer import metrics
from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.errors import EventGapError
from streamer.events.model import Column
from streamer.kafka.broker import EmbeddedBroker
from streamer.metastore.memory import MemoryCatalog
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.enrich import EnrichSettings
from streamer.source.reader import SqlNotificationReader
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import TMP_PREFIX, FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from streamer.testing.campaign import Child
from streamer.warehouse import Warehouse
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from tests.unit.target import builders as b

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _warehouse(work: Path) -> tuple[Warehouse, str]:
    url = str(work / "metastore.sqlite")
    wh = Warehouse.open(url, root=work / "warehouse", cmroot=work / "cmroot", source_id="faults")
    return wh, url


def test_notification_log_gap_halts_the_agent(broker: EmbeddedBroker, topic: str, tmp_path: Path) -> None:
    wh, url = _warehouse(tmp_path)
    try:
        wh.create_database("g")
        for i in range(4):
            wh.create_table("g", f"t{i}", [Column("id", "int")], [])
        with sqlite3.connect(url) as conn:
            conn.execute('DELETE FROM "NOTIFICATION_LOG" WHERE "EVENT_ID" = 3')
        config = AgentConfig("faults", broker.client_settings(), topic=topic, poll_interval=0.01,
                             gap_settle_seconds=0.2,
                             enrich=EnrichSettings(CHECKSUM_ALGORITHM, cmroot=str(tmp_path / "cmroot")))
        agent = SourceAgent(config, SqlNotificationReader(url))
        try:
            agent.start()
            with pytest.raises(EventGapError) as info:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    agent.run_once()
            assert "3" in str(info.value)
            assert agent.last_id == 2, "published past the gap"
            assert metrics.REGISTRY.get_sample_value("streamer_source_gap") == 1
        finally:
            agent.close()
            agent.reader.close()
    finally:
        wh.close()


@contextlib.contextmanager
def _tiny_disk(path: Path) -> Iterator[bool]:
    """A 1 MiB tmpfs at ``path`` when mounting works here (root), else nothing (yields False)."""
    path.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)],
                             capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)


def test_full_target_disk_halts_without_partial_state(tmp_path: Path) -> None:
    wh_dir = tmp_path / "wh"
    with _tiny_disk(wh_dir) as mounted:
        if not mounted:
            pytest.skip("cannot mount a tmpfs here (not root or no mount permission)")
        state = TargetState(tmp_path / "state")
        catalog = MemoryCatalog()
        paths = TargetPaths(str(wh_dir))
        applier = Applier(catalog, FileCopier(max_workers=2), paths, b.SOURCE_ID, state=state)
        snap = b.table("a", "t", location=f"file://{tmp_path}/src/a.db/t")
        small = b.write_source_file(tmp_path / "src/a.db/t", "small", b"s" * 1000)
        big = [b.write_source_file(tmp_path / "src/a.db/t", f"big{i}", b"b" * 400_000) for i in range(4)]
        events = [b.create_db(1, "a"), b.create_table(2, snap), b.insert(3, snap, [small]),
                  b.insert(4, snap, big)]
        run_plan(applier, plan(events, applier.load_progress(), state.halts()), state)
        halt = state.halts()["a"]
        assert halt.event_id == 4, halt
        assert "No space" in halt.cause or "ENOSPC" in halt.cause or "space" in halt.cause.lower(), halt.cause
        files = sorted(p.name for p in wh_dir.rglob("*") if p.is_file())
        assert files == ["small"], f"partial state of the failed insert is visible: {files}"
        assert not [p for p in wh_dir.rglob(f"{TMP_PREFIX}*")], "staging files left behind"
        db = catalog.get_database("a")
        assert db is not None and db.parameters["repl.last.id"] == "3"


def test_broker_restart_halts_the_target_with_data_loss(
    hms: EmbeddedMetastore, tmp_path: Path
) -> None:
    """Tansu keeps topics in memory: after a restart the topic is gone or empty, offsets behind the
    checkpoint. The target job must stop with DataLossError and never apply a gap."""
    with EmbeddedBroker(log_path=tmp_path / "broker.log") as broker:
        wh, url = _warehouse(tmp_path / "source")
        topic = "streamer.faults.events"
        try:
            wh.create_database("bl")
            wh.create_table("bl", "t", [Column("id", "int")], [])
            agent_argv = ["source", "run", "--source-id", "faults", "--notification-db", url,
                          "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, "--once",
                          "--checksum-algorithm", CHECKSUM_ALGORITHM,
                          "--cmroot", str(tmp_path / "source" / "cmroot")]
            agent = Child("agent", agent_argv, tmp_path / "agent.log")
            agent.start()
            assert agent.proc is not None and agent.proc.wait(120) == 0, agent.tail()
            target = Child("target", [
                "target", "run", "--bootstrap-servers", broker.bootstrap_servers, "--source-id", "faults",
                "--topic", topic, "--hms-uri", hms.uri, "--warehouse-root", (tmp_path / "twh").as_uri(),
                "--state-dir", str(tmp_path / "state"), "--trigger-seconds", "0.1", "--metrics-port", "0",
            ], tmp_path / "target.log")
            target.start()
            try:
                _wait(lambda: _last_id(hms, "bl") == 2, target, "first events applied")
                broker.restart()
                # the source goes on; a new agent republishes from the empty topic's view: event 3 onwards
                wh.create_table("bl", "after", [Column("id", "int")], [])
                agent.argv += ["--start-after", "2"]
                agent.start()
                assert agent.proc is not None and agent.proc.wait(120) == 0, agent.tail()
                _wait(lambda: not target.alive, None, "the target job to stop")
                assert _last_id(hms, "bl") == 2, "applied across the lost records"
                # the job's last word is the typed error, however the query died inside Spark (the
                # Python source worker may die while the broker is away before it sees the loss)
                assert target.proc is not None and target.proc.returncode == 1
                last_error = [line for line in target.tail(20000).splitlines() if line.startswith("error: ")]
                assert last_error and "data loss on topic" in last_error[-1], target.tail()
                assert "restarted without storage" in last_error[-1], last_error[-1]
            finally:
                target.stop()
        finally:
            wh.close()
            shutil.rmtree(tmp_path / "twh", ignore_errors=True)


def _last_id(hms: EmbeddedMetastore, db: str) -> int:
    from streamer.metastore.thrift import HmsCatalog

    with HmsCatalog(hms.uri) as catalog:
        snap = catalog.get_database(db)
        return int(snap.parameters.get("repl.last.id", "0")) if snap else 0


def _wait(cond: object, child: Child | None, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if child is not None and not child.alive:
            raise AssertionError(f"{child.name} exited while waiting for {what}: {child.tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {child.tail() if child else ''}")
        time.sleep(0.5)
