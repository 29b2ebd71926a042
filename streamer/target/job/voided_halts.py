"""Releasing a database halted at an INSERT whose files were gone, once the stream brings the event
that voids them.

The runner applies such an INSERT with a later overwrite, truncate or drop of its table in the same
batch (``streamer.target.apply.runner.VoidingRuns``); when that event comes in a later batch the
database halts first. Here the job retries it as an operator would (``streamer target retry``): the
held events are re-read from the INSERT, the voiding event among them, and the run applies whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from streamer.events.model import Event
from streamer.target.apply.plan import step_db
from streamer.target.apply.sources import NO_CHECKSUM
from streamer.target.apply.voiding import ObjectKey, voids, written_objects
from streamer.target.state.state_file import Halt, TargetState

log = logging.getLogger(__name__)

GONE_FILES = "no copy matches the event"  # streamer.target.apply.files: no candidate copy matched
PENDING_RUN = "voiding run was pending"  # streamer.target.apply.runner: another event failed


def gone_files(halt: Halt) -> bool:
    """Whether ``halt`` is a write whose files could not be copied, gone or never checksummed (and
    nothing else failed): the causes a voiding run resolves."""
    writes = halt.event_type in ("INSERT", "ADD_PARTITION")
    gone = GONE_FILES in halt.cause or NO_CHECKSUM in halt.cause
    return writes and gone and PENDING_RUN not in halt.cause


class VoidedHalts:
    """Retries halted databases whose halted write a newly read event voids, once per halt (the
    replay holds the voiding event: halted again at the same event, the database waits for an
    operator, as the halt's cause says); ``read_at(offset)`` re-reads a halted event that is not in
    the batch (after a restart)."""

    def __init__(self, read_at: Callable[[int], Event | None]) -> None:
        self._read_at = read_at
        self._objects: dict[tuple[str, int], list[ObjectKey]] = {}
        self._retried: set[tuple[str, int]] = set()  # one retry per halt: its run is in its replay

    def release(self, state: TargetState, new_events: Sequence[Event]) -> list[str]:
        """Retry each halted database whose halted INSERT one of ``new_events`` (read from the topic
        in this batch, not replayed) voids; returns those databases."""
        released = []
        for db, halt in state.halts().items():
            if not gone_files(halt) or (db, halt.event_id) in self._retried:
                continue
            objects = self._objects_of(halt, new_events)
            voider = next(
                (e for e in new_events
                 if step_db(e) == db and e.event_id > halt.event_id and any(voids(e, o) for o in objects)),
                None,
            )
            if voider is None:
                continue
            log.warning(
                "database %s: event %s (%s) voids the files event %s could not copy; retrying from it, "
                "to apply them as one run", db, voider.event_id, voider.event_type, halt.event_id,
            )
            state.retry(db)
            self._retried.add((db, halt.event_id))
            released.append(db)
        return released

    def _objects_of(self, halt: Halt, batch: Sequence[Event]) -> list[ObjectKey]:
        key = (halt.db, halt.event_id)
        if key not in self._objects:
            event = next((e for e in batch if e.event_id == halt.event_id), None)
            if event is None and halt.offset is not None:
                event = self._read_at(halt.offset)
            self._objects[key] = written_objects(event) if event is not None else []
        return self._objects[key]
