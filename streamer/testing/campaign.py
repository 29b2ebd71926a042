"""A crash campaign: seeded workloads replicated by a source agent and a target job that keep dying.

The agent (``streamer source run``) and the target job (``streamer target run``) run as child
processes, each in its own process group, and are SIGKILLed at random points and restarted, while
:class:`~streamer.testing.sampler.Sampler` readers sample the target. Once the target has caught up,
the samples are judged offline against the source's history (:func:`streamer.testing.checker.check`).

Workloads run one after another on one bundled warehouse and one agent/target pair (the JVM start of
a target job costs ~15 s, so one pair keeps the campaign about the apply rate, not about restarts);
each workload has its own seed and its own three databases, which it alone changes. The broker and
the target metastore are the caller's (tests share the session's).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, cast

from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.metastore.thrift_catalog import HmsCatalog
from streamer.target.state.state_file import TargetState
from streamer.testing.checker import Report, Sample, check
from streamer.testing.history import History
from streamer.testing.sampler import Sampler
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from streamer.warehouse.warehouse import Warehouse
from streamer.warehouse.workload import Workload

log = logging.getLogger(__name__)

STREAMER = str(Path(sys.executable).with_name("streamer"))


class CampaignError(AssertionError):
    """The campaign could not finish (a process halted or died, or the target never caught up)."""


@dataclass(frozen=True)
class CampaignConfig:
    """What to run. ``kills`` is SIGKILLs of each process per workload; ``rate`` paces the workload
    (events/s) near the target's apply rate so that kills land while both processes are busy."""

    bootstrap_servers: str
    hms_uri: str
    work_dir: Path
    workloads: int = 5
    events: int = 1000
    kills: int = 1
    seed: int = 0
    readers: int = 2
    rate: float = 60.0
    name: str = "campaign"
    catch_up_timeout: float = 600.0
    consistency: str = "global"  # the target's --consistency; the checker judges prefixes in that scope


@dataclass
class CampaignResult:
    workloads: int
    events: int
    agent_kills: int
    target_kills: int
    samples: int
    discarded: int
    report: Report
    seconds: float
    sampler_errors: list[str] = field(default_factory=list)
    read_failures: list[str] = field(default_factory=list)  # reads the target metastore failed
    taken: list[Sample] = field(default_factory=list, repr=False)
    history: History | None = field(default=None, repr=False)

    @property
    def kills(self) -> int:
        return self.agent_kills + self.target_kills

    def summary(self) -> dict[str, Any]:
        return {
            "workloads": self.workloads,
            "events": self.events,
            "kills": self.kills,
            "samples": self.samples,
            "violations": len(self.report.violations),
            "worst_staleness_s": round(self.report.worst_staleness_s, 3),
        }


class Child:
    """A ``streamer`` subcommand as a child process in its own session, killable as a whole group."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.argv = [STREAMER, "--log-level", "INFO", *argv]
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0

    def start(self) -> Self:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        with open(self.log_path, "ab") as out:
            out.write(f"\n==== start {self.starts + 1}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,
            )
        self.starts += 1
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group (a JVM and Python workers included): a crash."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(20)
        self.kill()

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


class _Scoped:
    """The warehouse as one workload sees it: only its own databases."""

    def __init__(self, wh: Warehouse, dbs: Sequence[str]) -> None:
        self._wh = wh
        self._dbs = list(dbs)

    def databases(self) -> list[str]:
        return [d for d in self._wh.databases() if d in self._dbs]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wh, name)


class Campaign:
    """One campaign over ``config.workloads`` workloads; :meth:`run` returns the judged result."""

    def __init__(self, config: CampaignConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        work = config.work_dir
        (work / "source").mkdir(parents=True, exist_ok=True)
        (work / "target").mkdir(parents=True, exist_ok=True)
        self.source_id = f"{config.name}{config.seed}"
        self.topic = f"streamer.{self.source_id}.{os.getpid()}.{int(time.time())}"
        self.db_url = str(work / "source" / "metastore.sqlite")
        self.warehouse = Warehouse.open(
            self.db_url, root=work / "source" / "warehouse", cmroot=work / "source" / "cmroot",
            source_id=self.source_id,
        )
        self.target_root = (work / "target" / "warehouse").as_uri()
        self.state_dir = work / "target" / "state"
        self.dbs: list[str] = []
        self.agent = Child("agent", [
            "source", "run", "--source-id", self.source_id, "--notification-db", self.db_url,
            "--bootstrap-servers", config.bootstrap_servers, "--topic", self.topic,
            "--batch-size", "100", "--poll-interval", "0.05", "--gap-settle-seconds", "2",
            "--checksum-algorithm", CHECKSUM_ALGORITHM, "--cmroot", str(work / "source" / "cmroot"),
        ], work / "agent.log")
        self.target = Child("target", [
            "target", "run", "--bootstrap-servers", config.bootstrap_servers,
            "--source-id", self.source_id, "--topic", self.topic, "--hms-uri", config.hms_uri,
            "--warehouse-root", self.target_root,
            "--external-base-dir", (work / "target" / "external").as_uri(),
            "--state-dir", str(self.state_dir), "--trigger-seconds", "0.1", "--metrics-port", "0",
            "--consistency", config.consistency,
        ], work / "target.log")
        self.catalog = HmsCatalog(config.hms_uri)

    # --- observing the target --------------------------------------------------------------
    def applied(self) -> dict[str, int]:
        out = {}
        for db in self.dbs:
            snap = self.catalog.get_database(db)
            out[db] = int(snap.parameters.get(LAST_ID_PARAM, "0") or 0) if snap else 0
        return out

    def expected(self) -> dict[str, int]:
        """Per database, the id of its newest source event: what its replica's ``repl.last.id`` becomes."""
        out: dict[str, int] = {}
        for row in self.warehouse.notifications():
            if row.db_name and row.db_name.lower() in self.dbs:
                out[row.db_name.lower()] = row.event_id
        return out

    def _check_alive(self) -> None:
        halts = TargetState(self.state_dir).halts()
        if halts:
            raise CampaignError(f"target halted: {halts}\n{self.target.tail()}")
        for child in (self.agent, self.target):
            if child.proc is not None and not child.alive:
                raise CampaignError(f"{child.name} exited {child.proc.returncode}:\n{child.tail()}")

    # --- running ---------------------------------------------------------------------------
    def run(self) -> CampaignResult:
        cfg = self.config
        started = time.monotonic()
        sampler = Sampler(lambda: HmsCatalog(cfg.hms_uri), lambda: list(self.dbs), readers=cfg.readers,
                          seed=cfg.seed, warehouse_root=self.target_root)
        try:
            self.agent.start()
            self.target.start()
            sampler.start()
            for index in range(cfg.workloads):
                self._workload(index)
            self._catch_up()
        finally:
            samples = sampler.stop()
            self.agent.stop()
            self.target.stop()
        history = History.from_rows(self.warehouse.notifications(), self.source_id,
                                    txn_writes=self.warehouse.txn_write_rows)
        report = check(history, samples, scope=cfg.consistency)
        every = report.summary(limit=len(samples))
        (cfg.work_dir / "violations.txt").write_text(every + "\n", encoding="utf-8")
        return CampaignResult(
            workloads=cfg.workloads, events=self.warehouse.current_event_id(),
            agent_kills=self.agent.kills, target_kills=self.target.kills,
            samples=len(samples), discarded=sampler.discarded, report=report,
            seconds=time.monotonic() - started, sampler_errors=sampler.errors,
            read_failures=sampler.read_failures, taken=samples, history=history,
        )

    def _workload(self, index: int) -> None:
        cfg = self.config
        prefix = f"{cfg.name}{cfg.seed}w{index}_"
        dbs = [f"{prefix}{c}" for c in "abc"]
        for db in dbs:
            self.warehouse.create_database(db, {"owner.team": "fin"})
        self.dbs.extend(dbs)
        workload = Workload(cast(Warehouse, _Scoped(self.warehouse, dbs)), seed=cfg.seed * 1000 + index)
        start = self.warehouse.current_event_id()
        duration = cfg.events / cfg.rate
        kills = sorted(
            [(self.rng.uniform(0, duration), "agent") for _ in range(cfg.kills)]
            + [(self.rng.uniform(0.2, 1.0) * duration, "target") for _ in range(cfg.kills)]
        )
        t0 = time.monotonic()
        target_progress = sum(self.applied().values())
        while self.warehouse.current_event_id() - start < cfg.events or kills:
            self._check_alive()
            done = self.warehouse.current_event_id() - start
            if done < cfg.events:
                workload.run(min(10, cfg.events - done))
            elapsed = time.monotonic() - t0
            while kills and kills[0][0] <= elapsed:
                if kills[0][1] == "agent":
                    self._crash(self.agent)
                else:
                    progress = sum(self.applied().values())
                    if progress <= target_progress and self.applied() != self.expected():
                        break  # still starting up: kill it once it applies again, mid-stream
                    self._crash(self.target)
                    target_progress = progress
                kills.pop(0)
            ahead = self.warehouse.current_event_id() - start - (time.monotonic() - t0) * cfg.rate
            if ahead > 0 or done >= cfg.events:
                time.sleep(min(max(ahead / cfg.rate, 0.05), 1.0))
        log.info("workload %s done: events %s..%s", index, start + 1, self.warehouse.current_event_id())

    def _crash(self, child: Child) -> None:
        log.info("SIGKILL %s (start %s)", child.name, child.starts)
        child.kill()
        child.kills += 1
        time.sleep(self.rng.uniform(0, 1.0))
        child.start()

    def _catch_up(self) -> None:
        deadline = time.monotonic() + self.config.catch_up_timeout
        expected = self.expected()
        while self.applied() != expected:
            self._check_alive()
            if time.monotonic() > deadline:
                raise CampaignError(
                    f"target did not catch up in {self.config.catch_up_timeout:.0f} s: applied "
                    f"{self.applied()} expected {expected}\n{self.target.tail()}"
                )
            time.sleep(0.5)

    def close(self) -> None:
        self.agent.stop()
        self.target.stop()
        self.catalog.close()
        self.warehouse.close()

    def __enter__(self) -> Campaign:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_campaign(config: CampaignConfig) -> CampaignResult:
    """Run a campaign and close everything it started."""
    with Campaign(config) as campaign:
        return campaign.run()
