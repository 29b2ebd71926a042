"""Releasing a database halted at an INSERT whose files were gone, once the stream brings the event
that voids them.

The runner applies such an INSERT with a later overwrite, truncate or drop of its table in the same
batch (``streamer.target.apply.runner.VoidingRuns``); when that event comes in a later batch the
database halts first. Here the job retries it as an operator would (``streamer target retry``): the
held events are re-read from the INSERT, the voiding event among them, and the run applies whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from streamer.events.model import Event
from streamer.target.apply.plan import step_db
from streamer.target.apply.sources import NO_CHECKSUM
from streamer.target.apply.voiding import ObjectKey, voids, written_objects
from streamer.target.state.state_file import Halt, TargetState

log = logging.getLogger(__name__)

GONE_FILES = "no copy matches the event"  # streamer.target.apply.files: no candidate copy matched

Read = Callable[[int, int], Iterable[Event]]  # the topic's events in an offset range


def gone_files(halt: Halt) -> bool:
    """Whether ``halt`` is a write whose files could not be copied, gone or never checksummed (itself,
    or another write of the voiding run pending from it): the causes a later voiding event resolves."""
    writes = halt.event_type in ("INSERT", "ADD_PARTITION")
    return writes and (GONE_FILES in halt.cause or NO_CHECKSUM in halt.cause)


class VoidedHalts:
    """Retries halted databases whose failed write a newly read event voids, once per halt and failed
    event (the replay holds the voiding event; halted again at the same one, the database waits for
    an operator, as the halt's cause says). ``read(start, end)`` re-reads the topic for a failed
    event that is not in the batch (after a restart)."""

    def __init__(self, read: Read) -> None:
        self._read = read
        self._objects: dict[tuple[str, int, int], list[ObjectKey]] = {}
        self._retried: set[tuple[str, int, int]] = set()

    def release(
        self, state: TargetState, new_events: Sequence[Event], batch: Sequence[Event], end_offset: int | None
    ) -> list[str]:
        """Retry each halted database whose failed write one of ``new_events`` (read from the topic in
        this batch, not replayed) voids; ``batch`` is every event of the batch, ``end_offset`` its
        first record's offset. Returns those databases."""
        released = []
        for db, halt in state.halts().items():
            failed = halt.failed
            key = (db, halt.event_id, failed)
            if not gone_files(halt) or key in self._retried:
                continue
            objects = self._objects_of(key, halt, batch, end_offset)
            voider = next(
                (e for e in new_events
                 if step_db(e) == db and e.event_id > failed and any(voids(e, o) for o in objects)),
                None,
            )
            if voider is None:
                continue
            log.warning(
                "database %s: event %s (%s) voids the files event %s could not copy; retrying from event "
                "%s, to apply them as one run", db, voider.event_id, voider.event_type, failed, halt.event_id,
            )
            state.retry(db)
            self._retried.add(key)
            released.append(db)
        return released

    def _objects_of(
        self, key: tuple[str, int, int], halt: Halt, batch: Sequence[Event], end_offset: int | None
    ) -> list[ObjectKey]:
        if key not in self._objects:
            failed = key[2]
            event = next((e for e in batch if e.event_id == failed), None)
            if event is None and halt.offset is not None:
                end = halt.offset + 1 if failed == halt.event_id else end_offset
                if end is not None and end > halt.offset:
                    event = next((e for e in self._read(halt.offset, end) if e.event_id == failed), None)
            self._objects[key] = written_objects(event) if event is not None else []
        return self._objects[key]
