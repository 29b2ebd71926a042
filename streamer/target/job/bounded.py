"""Bounded replication (``streamer target run --until-event N``): apply up to N, hold the rest. Pure.

A micro-batch that straddles N has its events ``<= N`` applied and the rest held; the job then stops
without letting Spark commit that batch, so a later run continues with exactly the first event after
N. How progress records are treated: docs/design/consistency.md.
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
