"""The lane runner: executes a schedule of apply lanes (``streamer.target.job.lanes``) concurrently:
databases in ``database`` mode, and in either mode the tables of a regrouped, fenced segment.

A fixed pool of worker threads, each with its own metastore connection, runs every step whose
predecessors have finished, exactly as the sequential runner runs it; the micro-batch ends when every
lane has finished. Why the shared state is safe: docs/design/consistency.md.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from streamer import metrics
from streamer.metastore.catalog import Catalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.plan import Plan
from streamer.target.apply.runner import RunReport, VoidingRuns, prefetch, run_plan, run_step
from streamer.target.job.lanes import Consistency, Schedule, schedule
from streamer.target.state.state_file import TargetState

log = logging.getLogger(__name__)


class LaneRunner:
    """Runs plans in the target's consistency mode; owns the pool of metastore connections."""

    def __init__(
        self,
        consistency: Consistency | str,
        catalogs: Callable[[], Catalog] | None = None,
        workers: int = 4,
    ) -> None:
        self.consistency = Consistency(consistency)
        self.workers = max(1, workers)
        self._new_catalog = catalogs
        self._catalogs: list[Catalog] = []
        self._lock = threading.Lock()
        if self.consistency is not Consistency.GLOBAL and catalogs is None:
            raise ValueError(f"consistency {self.consistency} needs a catalog factory for its lanes")

    def run(
        self, applier: Applier, plan: Plan, state: TargetState, on_halt: Callable[[str], None] | None = None
    ) -> RunReport:
        """``on_halt`` as for ``apply.run_plan``; here it is called from a lane, one call at a time."""
        if len(plan.steps) < 2 or not self._concurrent(plan):
            return run_plan(applier, plan, state, on_halt)
        the_schedule = schedule(plan, self.consistency)
        halted_lock = threading.Lock()

        def one_halt(db: str) -> None:
            if on_halt is not None:
                with halted_lock:
                    on_halt(db)

        # the lanes share one batch's database and table snapshots: one database is one lane, or one
        # table of a fenced segment is (whose steps change no database object but its fence, written
        # under a lock: markers.fence), so no lane reads what another writes; a failed step forgets
        # them all, which only makes the other lanes read again
        # (streamer.target.apply.applier.Applier.reusing_snapshots); and its deferred markers,
        # written after every lane has finished (Applier.batch)
        try:
            with applier.batch(len(plan.event_ids)):
                prefetch(applier, plan)
                runs = VoidingRuns(plan, applier)  # one database's steps stay in one lane, in order
                report = RunReport(held=list(plan.held))
                report = self._run(applier, the_schedule, state, report, one_halt, runs)
        finally:
            applier.pins.clear()  # as in run_plan
        if plan.source_head is not None:
            metrics.TARGET_SOURCE_HEAD.set(plan.source_head)
        return report

    def _concurrent(self, plan: Plan) -> bool:
        """Whether lanes could run at once: ``database`` mode, or in ``global`` mode a regrouped
        batch's fenced steps (per-table sub-lanes), given connections to run them on."""
        if self.consistency is not Consistency.GLOBAL:
            return True
        return self._new_catalog is not None and self.workers > 1 and any(s.fenced for s in plan.steps)

    def _run(
        self,
        applier: Applier,
        sched: Schedule,
        state: TargetState,
        report: RunReport,
        on_halt: Callable[[str], None],
        runs: VoidingRuns,
    ) -> RunReport:
        nodes = sched.nodes
        dependents = sched.dependents()
        waiting = [len(n.after) for n in nodes]
        outcomes: list[RunReport | None] = [None] * len(nodes)
        workers = min(self.workers, len(sched.lanes) or 1)
        free: queue.SimpleQueue[Applier] = queue.SimpleQueue()
        for catalog in self._pool(workers):
            clone = copy.copy(applier)  # shares progress, state, copier, visibility store
            clone.catalog = catalog
            free.put(clone)

        def one(index: int) -> int:
            lane_applier = free.get()
            try:
                outcome = RunReport()
                run_step(lane_applier, nodes[index].step, state, outcome, on_halt, runs)
                outcomes[index] = outcome
            finally:
                free.put(lane_applier)
            return index

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lane") as pool:
            pending: set[Future[int]] = {pool.submit(one, i) for i, n in enumerate(waiting) if n == 0}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    finished = future.result()  # a non-ApplyError failure ends the batch, as sequentially
                    for d in dependents[finished]:
                        waiting[d] -= 1
                        if waiting[d] == 0:
                            pending.add(pool.submit(one, d))
        for outcome in outcomes:  # merged in plan order
            if outcome is None:
                continue
            report.applied.extend(outcome.applied)
            report.held.extend(outcome.held)
            report.coalesced.extend(outcome.coalesced)
            report.halted.update(outcome.halted)
        log.debug("%d steps over %d lanes, %d barriers, %d workers",
                  len(nodes), len(sched.lanes), len(sched.barriers), workers)
        return report

    def _pool(self, n: int) -> list[Catalog]:
        with self._lock:
            assert self._new_catalog is not None
            while len(self._catalogs) < n:
                self._catalogs.append(self._new_catalog())
            return self._catalogs[:n]

    def close(self) -> None:
        with self._lock:
            for catalog in self._catalogs:
                close = getattr(catalog, "close", None)
                if close is not None:
                    close()
            self._catalogs.clear()
