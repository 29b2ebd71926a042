"""Contiguity of the notification log: event ids must follow the last published one without holes.

A missing id has two causes. A lower id may commit after a higher one (the row is not visible
*yet*), so the agent waits a settle time and reads again; or the metastore's cleaner removed it,
which no waiting repairs, and replication must halt (``EventGapError``) rather than skip. A head
below the last published id means the log was reset (``LogResetError``).

``check_contiguity`` is the pure decision; ``ContiguousReader`` does the waiting and re-reading.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from streamer.errors import EventGapError
from streamer.hive.notification import NotificationRow
from streamer.metrics import SOURCE_GAP
from streamer.source.errors import LogOrderError, LogResetError
from streamer.source.reader import NotificationReader

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Contiguity:
    """How many leading rows follow ``last_id`` without a hole, and the hole after them, if any."""

    ready: int
    gap: tuple[int, int] | None = None


def check_contiguity(last_id: int, event_ids: Sequence[int], head: int | None = None) -> Contiguity:
    """Decide which of ``event_ids`` (as read after ``last_id``) may be published now.

    ``head`` (the source's newest id, if known) reveals a hole even when nothing was read: ids up
    to the head that the read did not return are missing. Raises ``LogOrderError`` on ids out of
    order, repeated, or not after ``last_id``; ``LogResetError`` if ``head < last_id``.
    """
    if head is not None and head < last_id:
        raise LogResetError(head, last_id)
    previous = last_id
    for event_id in event_ids:
        if event_id <= previous:
            raise LogOrderError(
                f"notification reader returned event id {event_id} after {previous}: ids must be "
                f"increasing and after the last published id {last_id}"
            )
        previous = event_id
    expected = last_id + 1
    for index, event_id in enumerate(event_ids):
        if event_id > expected:
            return Contiguity(index, (expected, event_id - 1))
        expected += 1
    if not event_ids and head is not None and head >= expected:
        return Contiguity(0, (expected, head))
    return Contiguity(len(event_ids))


# Re-reads of a hole start this soon and back off to the cap: a lower id that commits after a
# higher one (two metastore transactions racing) is usually visible within milliseconds, and every
# event behind the hole waits as long as the agent does.
FIRST_RECHECK_SECONDS = 0.005
MAX_RECHECK_SECONDS = 0.25


class ContiguousReader:
    """Reads batches that are guaranteed contiguous after ``last_id``, or raises.

    Rows after a hole are held back: the prefix before it is returned now, and the hole is settled
    (re-read until it fills, for at most ``settle_seconds``) when it is at the front of the next read.
    """

    def __init__(
        self,
        reader: NotificationReader,
        settle_seconds: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.settle_seconds = settle_seconds
        self._sleep = sleep
        self._clock = clock

    def read_after(self, last_id: int, limit: int) -> list[NotificationRow]:
        rows, contiguity = self._attempt(last_id, limit)
        if contiguity.gap is not None and contiguity.ready == 0:
            rows, contiguity = self._settle(last_id, limit, contiguity)
        SOURCE_GAP.set(0)
        return rows[: contiguity.ready]

    def _settle(self, last_id: int, limit: int, contiguity: Contiguity) -> tuple[list[NotificationRow],
                                                                                 Contiguity]:
        """Re-reads, backing off, until the hole at the front fills; raises when the time is up."""
        assert contiguity.gap is not None
        deadline = self._clock() + self.settle_seconds
        pause = FIRST_RECHECK_SECONDS
        waited = False
        while True:
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            if not waited:
                log.info("event ids %d..%d are missing; waiting up to %.1f s for them to commit",
                         *contiguity.gap, self.settle_seconds)
                waited = True
            self._sleep(min(pause, remaining))
            pause = min(pause * 2, MAX_RECHECK_SECONDS)
            rows, contiguity = self._attempt(last_id, limit)
            if contiguity.gap is None or contiguity.ready > 0:
                return rows, contiguity
        # the time is up (or settling is off): one last read decides
        rows, contiguity = self._attempt(last_id, limit)
        if contiguity.gap is not None and contiguity.ready == 0:
            SOURCE_GAP.set(1)
            first, last = contiguity.gap
            raise EventGapError(
                first, last, f"still missing after {self.settle_seconds:g} s; last published id "
                f"{last_id}; the metastore's cleaner may have removed them",
            )
        return rows, contiguity

    def _attempt(self, last_id: int, limit: int) -> tuple[list[NotificationRow], Contiguity]:
        rows = self.reader.read_after(last_id, limit)
        head = self.reader.head_event_id() if not rows else None
        return rows, check_contiguity(last_id, [r.event_id for r in rows], head)
