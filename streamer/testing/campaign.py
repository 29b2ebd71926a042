"""A crash campaign: seeded workloads replicated by a source agent and a target job that keep dying.

The agent and the target job run as child processes (:class:`~streamer.testing.child.Child`) that are
SIGKILLed at random points and restarted while :class:`~streamer.testing.sampler.Sampler` readers
sample the target; the samples are then judged offline (:func:`streamer.testing.checker.check`).
How workloads share one warehouse and one agent/target pair: docs/design/consistency.md.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from streamer.errors import StreamerError
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.metastore.thrift import HmsCatalog
from streamer.target.state.state_file import TargetState
from streamer.testing.checker import BATCH_EVENTS, Report, Sample, check
from streamer.testing.child import STREAMER, Child
from streamer.testing.history import History
from streamer.testing.sampler import Sampler, TargetReader
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from streamer.warehouse.warehouse import Warehouse
from streamer.warehouse.workload import Workload

__all__ = [
    "STREAMER", "Campaign", "CampaignConfig", "CampaignError", "CampaignResult", "Child", "run_campaign",
]

log = logging.getLogger(__name__)


class CampaignError(StreamerError, AssertionError):
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
    coalesce_backlog: bool = False  # the target's --coalesce-backlog (markers per batch, regrouped, fenced)


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
        agent_argv = _agent_argv(config, self.source_id, self.topic, self.db_url)
        self.agent = Child("agent", agent_argv, work / "agent.log")
        self.target = Child("target", _target_argv(config, self.source_id, self.topic), work / "target.log")
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
        try:
            samples.extend(_final_samples(self.catalog, self.dbs, self.target_root))
        finally:
            self.agent.stop()
            self.target.stop()
        skipped: dict[str, set[int]] = {}
        for skip in TargetState(self.state_dir).skips():
            skipped.setdefault(skip.db, set()).add(skip.event_id)
        history, report = _judge(cfg, self.warehouse, self.source_id, samples, skipped)
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
        kills = _kill_plan(self.rng, cfg)
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


def _final_samples(catalog: HmsCatalog, dbs: Sequence[str], target_root: str) -> list[Sample]:
    """Every table of every database once the target caught up: the random samples may miss a
    table whose event was passed unapplied (the checker's ``passed``); these cannot."""
    out: list[Sample] = []
    for db in dbs:
        scope: functools.partial[list[str]] = functools.partial(list, [db])
        reader = TargetReader(f"final@{db}", catalog, scope, target_root, max_tables=1 << 30)
        for _ in range(20):  # the target is idle: a read races nothing, unless it still writes
            sample = reader.sample()
            if sample is not None:
                out.append(sample)
                break
            time.sleep(0.2)
        else:
            raise CampaignError(f"no final read of {db}: every read raced a change")
    return out


def _kill_plan(rng: random.Random, cfg: CampaignConfig) -> list[tuple[float, str]]:
    """When (seconds into a workload) to SIGKILL which process: the target not in the first fifth."""
    duration = cfg.events / cfg.rate
    return sorted(
        [(rng.uniform(0, duration), "agent") for _ in range(cfg.kills)]
        + [(rng.uniform(0.2, 1.0) * duration, "target") for _ in range(cfg.kills)]
    )


def _judge(
    cfg: CampaignConfig,
    warehouse: Warehouse,
    source_id: str,
    samples: list[Sample],
    skipped: dict[str, set[int]],
) -> tuple[History, Report]:
    """The samples judged against the source's history (``skipped``: the operator skips the target
    recorded); every violation goes to ``violations.txt``."""
    history = History.from_rows(warehouse.notifications(), source_id, txn_writes=warehouse.txn_write_rows)
    batch = BATCH_EVENTS if cfg.coalesce_backlog else None  # markers at a batch's end: a batch ahead
    report = check(history, samples, scope=cfg.consistency, skipped=skipped, batch_events=batch)
    every = report.summary(limit=len(samples))
    (cfg.work_dir / "violations.txt").write_text(every + "\n", encoding="utf-8")
    return history, report


def _agent_argv(config: CampaignConfig, source_id: str, topic: str, db_url: str) -> list[str]:
    return [
        "source", "run", "--source-id", source_id, "--notification-db", db_url,
        "--bootstrap-servers", config.bootstrap_servers, "--topic", topic,
        "--batch-size", "100", "--poll-interval", "0.05", "--gap-settle-seconds", "2",
        "--checksum-algorithm", CHECKSUM_ALGORITHM, "--cmroot", str(config.work_dir / "source" / "cmroot"),
    ]


def _target_argv(config: CampaignConfig, source_id: str, topic: str) -> list[str]:
    work = config.work_dir
    return [
        "target", "run", "--bootstrap-servers", config.bootstrap_servers,
        "--source-id", source_id, "--topic", topic, "--hms-uri", config.hms_uri,
        "--warehouse-root", (work / "target" / "warehouse").as_uri(),
        "--external-base-dir", (work / "target" / "external").as_uri(),
        "--state-dir", str(work / "target" / "state"), "--trigger-seconds", "0.1", "--metrics-port", "0",
        "--consistency", config.consistency,
        *(["--coalesce-backlog"] if config.coalesce_backlog else []),
    ]


def run_campaign(config: CampaignConfig) -> CampaignResult:
    """Run a campaign and close everything it started."""
    with Campaign(config) as campaign:
        return campaign.run()
