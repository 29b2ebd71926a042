"""Bounded replication (``streamer target run --until-event N``): apply up to N, hold the rest. Pure.

Hive's ``REPL DUMP ... TO N`` stops a replication cycle at an event id; here a running target job
does. A micro-batch may straddle N: its events ``<= N`` are applied and the rest held. The job then
stops *without* letting Spark commit that batch (``job.BatchApplier`` raises ``UntilReached`` inside
``foreachBatch``), so the checkpoint never passes an event that was not applied. A later run re-reads
the batch; the events ``<= N`` are dropped by the planner because every database's ``repl.last.id``
already covers them (DESIGN invariant 4), and it continues with exactly the first event after N.

``STREAMER_PROGRESS`` records carry no change: one past N only says the events up to its id were
published (or filtered by the policy); it is kept, so a batch whose only record past N is a
progress record is not a straddle and commits normally.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streamer.errors import StreamerError
from streamer.events.model import Event, EventType


class UntilReached(StreamerError):
    """Raised inside a straddling micro-batch after its prefix was applied: stop, do not commit."""

    def __init__(self, until: int, first_held: int) -> None:
        super().__init__(f"stopped at --until-event {until}; event {first_held} and later are held")
        self.until = until
        self.first_held = first_held


@dataclass(frozen=True)
class Bounded:
    """A batch split at the bound: ``within`` is applied, ``beyond`` held (not lost: re-read later)."""

    within: tuple[Event, ...]
    beyond: tuple[Event, ...]

    @property
    def straddles(self) -> bool:
        return bool(self.beyond)

    @property
    def first_held(self) -> int | None:
        return min((e.event_id for e in self.beyond), default=None)


def split_at(events: Iterable[Event], until: int | None) -> Bounded:
    """Events a bounded job may apply (``<= until``; progress records always) and those it must hold."""
    within: list[Event] = []
    beyond: list[Event] = []
    for event in events:
        if until is None or event.event_id <= until or event.event_type is EventType.PROGRESS:
            within.append(event)
        else:
            beyond.append(event)
    return Bounded(tuple(within), tuple(beyond))


def consumed_through(bounded: Bounded, consumed: int, until: int | None) -> int:
    """The newest event id a batch lets the job count as consumed: never past a held event."""
    if until is None or not bounded.straddles:
        return consumed
    held = bounded.first_held
    assert held is not None
    return min(consumed, until, held - 1)


def reached(consumed: int, until: int | None) -> bool:
    """Whether a bounded job has consumed every event up to its bound."""
    return until is not None and consumed >= until
