"""Running a plan: steps in order, a failing step halts its database and holds its later steps
(the lane runner, ``streamer.target.job.lane_runner``, runs steps concurrently with ``run_step``).
Design: docs/design/apply.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from streamer import metrics
from streamer.errors import ApplyError
from streamer.target.apply.applier import Applier
from streamer.target.apply.plan import Plan, Step
from streamer.target.state.state_file import Halt, TargetState

log = logging.getLogger(__name__)


@dataclass
class RunReport:
    applied: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    halted: dict[str, Halt] = field(default_factory=dict)  # halts that happened in this run
    coalesced: list[int] = field(default_factory=list)  # applied as part of a later event (plan.coalesced)


def run_plan(
    applier: Applier, plan: Plan, state: TargetState, on_halt: Callable[[str], None] | None = None
) -> RunReport:
    """Apply steps in order; a failing step halts its database, whose later steps are then held.

    ``on_halt(db)`` runs right after a halt is recorded, before any later step: the target job
    publishes the halt there, so readers know it before other databases move past it.
    """
    report = RunReport(held=list(plan.held))
    with applier.batch(len(plan.event_ids)):  # snapshots reused; a backlog's markers once per database
        for step in plan.steps:
            run_step(applier, step, state, report, on_halt)
    if plan.source_head is not None:
        metrics.TARGET_SOURCE_HEAD.set(plan.source_head)  # lag: streamer.target.state.status.lag_events
    return report


def run_step(
    applier: Applier,
    step: Step,
    state: TargetState,
    report: RunReport,
    on_halt: Callable[[str], None] | None = None,
) -> None:
    """Apply one step unless its database is halted; a failure halts the database (then
    ``on_halt(db)``). Records the outcome in ``report`` (the lane runner, ``streamer.target.job.lane_runner``,
    passes one per step)."""
    if state.is_halted(step.db):
        report.held.extend(step.event_ids)
        return
    try:
        applier.apply(step)
    except ApplyError as exc:
        halt = state.halt(
            step.db,
            exc.event_id or step.first.event_id,
            exc.cause,
            event_type=exc.event_type or str(step.first.event_type),
            obj=exc.obj,
        )
        log.error("database %s halted at event %s (%s): %s", step.db, halt.event_id, halt.object, halt.cause)
        report.halted[step.db] = halt
        report.held.extend(step.event_ids)
        if on_halt is not None:
            on_halt(step.db)
        return
    report.applied.extend(step.event_ids)
    report.coalesced.extend(step.superseded)
