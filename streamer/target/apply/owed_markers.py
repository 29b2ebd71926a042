"""The markers a batch owes: its progress per database until the batch's end writes it.

State only (``markers`` writes them): the journal of a deferring batch, the owed ``repl.last.id`` per
source database, the databases it fenced. Lanes note theirs concurrently. Design: docs/design/apply.md
("Progress per batch").
"""

from __future__ import annotations

import threading
from collections.abc import MutableMapping
from pathlib import Path

from streamer.target.apply.dir_fsync import DirFsyncs
from streamer.target.apply.journal import ProgressJournal

# With --markers-per-batch, batches of fewer events (live traffic) still write repl.last.id after every
# step: a reader's bracket (streamer.read.sql) then sees every step, and a marker per step costs little
DEFER_MIN_EVENTS = 8


class DeferredMarkers:
    """The markers a batch owes: source db -> last applied id (lanes note theirs concurrently)."""

    def __init__(self, per_batch: bool = False) -> None:
        # --markers-per-batch: off, every step writes its marker (SQL brackets see each step)
        self.per_batch = per_batch
        self.deferring = False
        self.journal: ProgressJournal | None = None
        self._pending: dict[str, int] = {}
        # source dbs this batch fenced (or found fenced): no journal line for them; the batch's end
        # lifts the fence with the marker, unless the database halted (streamer.target.apply.reorder)
        self.fenced: set[str] = set()
        self.fencing = threading.Lock()  # held while a database's fence is written (``markers.fence``)
        # renames' directory fsyncs of steps only this batch's markers record (executor.run)
        self.dir_fsyncs = DirFsyncs()
        self._lock = threading.Lock()

    def note(self, src: str, event_id: int) -> None:
        with self._lock:
            self._pending[src] = max(self._pending.get(src, event_id), event_id)

    def defer_for(self, events: int, has_state: bool) -> None:
        """Whether this batch defers: only per batch, with a state dir (the journal), for a backlog."""
        self.deferring = self.per_batch and has_state and events >= DEFER_MIN_EVENTS

    def take(self) -> dict[str, int]:
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending

    def journal_at(self, state_dir: Path) -> ProgressJournal:
        journal = self.journal
        if journal is None or journal.path.parent != Path(state_dir):
            journal = self.journal = ProgressJournal(state_dir)
        return journal

    def add_fenced(self, src: str) -> None:
        with self._lock:
            self.fenced.add(src)

    def take_fenced(self) -> set[str]:
        """The batch's fenced databases, and none from now on (its end lifts them)."""
        with self._lock:
            fenced, self.fenced = self.fenced, set()
        return fenced

    def refence(self, fenced: set[str]) -> None:
        """Fenced again: the batch's end failed before lifting them."""
        with self._lock:
            self.fenced |= fenced

    def is_fenced(self, src: str) -> bool:
        with self._lock:
            return src in self.fenced

    def recover(self, state_dir: Path, progress: MutableMapping[str, int]) -> bool:
        """Steps a killed job journaled but whose markers it never wrote: into ``progress``, and
        owed again; True when there were any (the caller writes them at once)."""
        found = False
        for src, event_id in self.journal_at(state_dir).read().items():
            if event_id > progress.get(src, -1):
                progress[src] = event_id
                self.note(src, event_id)
                found = True
        return found
