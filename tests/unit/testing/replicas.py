"""Simulated replicas over a source history, pure: the checker's positive and negative controls.

Each function returns the samples readers of such a replica would take. They stand in for a real
target (no metastore, no files): a replica is just the source state machine fed in some order.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from streamer.events.model import CommitTxnPayload, Event
from streamer.hive.decode import decode_row, decode_txn_writes
from streamer.testing import History, Sample, SourceStateMachine, TableState
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import Workload
from tests.unit.testing.observe import observe_warehouse

START = 1_700_000_000


@dataclass(frozen=True)
class Run:
    """A seeded workload's decoded events, its history, and the warehouse's final observed state."""

    events: list[Event]
    history: History
    final: dict[str, TableState]


def workload_run(
    directory: Path, seed: int, n_events: int, max_rows: int = 3, txn_share: float = 0.15
) -> Run:
    """Run a seeded workload on a fresh sqlite warehouse; every operation gets its own clock second."""
    ticks = itertools.count(START)
    with Warehouse.open(
        str(directory / "metastore.sqlite"),
        root=directory / "warehouse",
        cmroot=directory / "cmroot",
        message_format="json-0.2",
        clock=lambda: float(next(ticks)),
    ) as wh:
        Workload(wh, seed=seed, max_rows=max_rows, txn_share=txn_share).run(n_events)
        events = [with_txn_writes(decode_row(row, "warehouse"), wh) for row in wh.notifications()]
        final = observe_warehouse(wh)
    return Run(events, History.build(events), final)


def with_txn_writes(event: Event, wh: Warehouse) -> Event:
    """COMMIT_TXN with its writes, as the agent publishes it (replicas replay published events)."""
    p = event.payload
    if not isinstance(p, CommitTxnPayload):
        return event
    writes = decode_txn_writes(wh.txn_write_rows(p.txn_id))
    return dataclasses.replace(event, payload=dataclasses.replace(p, writes=writes))


def temp_workload_run(seed: int, n_events: int) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        return workload_run(Path(tmp), seed, n_events)


def dbs_of(keys: Sequence[str]) -> set[str]:
    return {k.split(".", 1)[0] for k in keys}


def replay_samples(
    events: Sequence[Event],
    keys: Sequence[str],
    *,
    reader: str = "r",
    every: int = 1,
    lag_s: float = 0.5,
) -> list[Sample]:
    """A replica applying ``events`` in the order given, sampled after every ``every``-th event.

    The advertised ``repl.last.id`` of every database is the id of the last event applied.
    """
    machine = SourceStateMachine()
    samples = []
    applied = 0
    for n, event in enumerate(events, 1):
        machine.apply(event)
        applied = event.event_id
        if n % every == 0:
            samples.append(
                Sample(
                    reader=reader,
                    wall_time=event.source.event_time + lag_s,
                    applied_event_ids={db: applied for db in dbs_of(keys)},
                    tables={k: machine.state(k) for k in keys},
                )
            )
    return samples


def swappable_pair(history: History) -> tuple[int, int, str, str]:
    """Two consecutive events that each change exactly one table, and not the same one."""
    changed: dict[int, set[str]] = {}
    for key, points in history.changes.items():
        for change in points:
            changed.setdefault(change.event_id, set()).add(key)
    for first, second in itertools.pairwise(history.event_ids):
        a, b = changed.get(first, set()), changed.get(second, set())
        if len(a) == 1 and len(b) == 1 and a != b:
            return first, second, a.pop(), b.pop()
    raise AssertionError("the workload has no two adjacent single-table changes")


def swapped(events: Sequence[Event], first: int, second: int) -> list[Event]:
    out = list(events)
    i, j = (next(n for n, e in enumerate(out) if e.event_id == eid) for eid in (first, second))
    out[i], out[j] = out[j], out[i]
    return out


def state_transfer_samples(history: History, keys: Sequence[str], step: int, seed: int = 0) -> list[Sample]:
    """A replica refreshed table by table from the source's *current* state, as batch copies do.

    The source moves on by ``step`` events between two table copies; the replica advertises the
    event id at which its current round started. A reader samples every table after each copy.
    """
    rng = random.Random(seed)
    replica: dict[str, TableState | None] = {}
    samples = []
    position = history.base_event_id
    while position < history.last_event_id:
        round_start = position
        order = list(keys)
        rng.shuffle(order)
        for key in order:
            position = min(position + step, history.last_event_id)
            replica[key] = history.state_at(key, position)
            samples.append(
                Sample(
                    reader="batch",
                    wall_time=float(history.event_time(position) or START),
                    applied_event_ids={db: round_start for db in dbs_of(keys)},
                    tables={k: replica.get(k) for k in keys},
                )
            )
    return samples
