"""The source's history of observable table states over event ids, for the consistency checker.

:class:`History` records, per table (``db.table``, lower case), only the event ids at which its
fingerprint changed (as :class:`~streamer.replay.machine.SourceStateMachine` replays them), so "which
event ids is this observed state compatible with" is answered from a few change points. Pure.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from streamer.events.model import (
    CommitTxnPayload,
    Event,
)
from streamer.hive.decode import decode_row, decode_txn_writes
from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow
from streamer.replay.machine import SourceStateMachine
from streamer.replay.state import FileKey, TableState
from streamer.testing.intervals import IdSet, normalize


@dataclass(frozen=True)
class Change:
    """A table's state from ``event_id`` on (None: the table does not exist)."""

    event_id: int
    state: TableState | None

    @property
    def fingerprint(self) -> str | None:
        return self.state.fingerprint if self.state else None


@dataclass(frozen=True)
class EventInfo:
    """What the checker needs of an event beyond table states: the database whose progress it
    advances (None: none, e.g. a transaction's commit) and its type, for messages."""

    db: str | None
    event_type: str


class History:
    """Every table's states over the source's event ids ``base_event_id..last_event_id``.

    ``base_event_id`` is the state before the first event (every table absent): 0 for a log read from
    its start. Build it with :meth:`build` (decoded events) or :meth:`from_rows` (log rows).
    """

    def __init__(
        self,
        base_event_id: int,
        event_ids: list[int],
        event_times: list[int],
        changes: dict[str, list[Change]],
        step_of: Mapping[int, int] | None = None,
        events: Mapping[int, EventInfo] | None = None,
    ) -> None:
        self.base_event_id = base_event_id
        self._step_of = dict(step_of or {})
        self._events = dict(events or {})
        self.event_ids = event_ids
        self.event_times = event_times
        self.changes = changes
        self.last_event_id = event_ids[-1] if event_ids else base_event_id
        self._compatible: dict[str, dict[str | None, IdSet]] = {}
        self._running_max_time = _running_max(event_times)
        self._files_ever: dict[str, set[tuple[str, FileKey]]] = {}
        for key, points in changes.items():
            ever = self._files_ever[key] = set()
            for change in points:
                if change.state:
                    ever.update((p, f) for p, files in change.state.partitions for f in files)

    @classmethod
    def build(cls, events: Iterable[Event], base_event_id: int | None = None) -> History:
        machine = SourceStateMachine()
        ids: list[int] = []
        times: list[int] = []
        changes: dict[str, list[Change]] = {}
        seen: list[Event] = []
        infos: dict[int, EventInfo] = {}
        for event in events:
            seen.append(event)
            if ids and event.event_id <= ids[-1]:
                raise ValueError(f"event {event.event_id} follows {ids[-1]}: events must be in id order")
            if base_event_id is None:
                base_event_id = event.event_id - 1
            ids.append(event.event_id)
            times.append(event.source.event_time)
            infos[event.event_id] = EventInfo(event.db.lower() if event.db else None, event.event_type.value)
            for key in machine.apply(event):
                state = machine.state(key)
                points = changes.setdefault(key, [])
                previous = points[-1].fingerprint if points else None
                if (state.fingerprint if state else None) != previous:
                    points.append(Change(event.event_id, state))
        return cls(base_event_id or 0, ids, times, changes, step_of=_widest_steps(seen), events=infos)

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[NotificationRow],
        source_id: str = "hive",
        txn_writes: Callable[[int], list[TxnWriteNotificationRow]] | None = None,
    ) -> History:
        """From ``NOTIFICATION_LOG`` rows in id order (decoding errors propagate, typed).

        Hive 4 logs a transaction's files only in ``TXN_WRITE_NOTIFICATION_LOG``: pass ``txn_writes``
        (txn id -> its rows, e.g. ``Warehouse.txn_write_rows``) to fill in COMMIT_TXN events as the
        agent does. Events read back from the topic are already filled in: use :meth:`build`.
        """
        return cls.build(_with_writes(decode_row(row, source_id), txn_writes) for row in rows)

    def tables(self) -> list[str]:
        """Every table that existed at some point."""
        return sorted(self.changes)

    def state_at(self, key: str, event_id: int) -> TableState | None:
        """The table's state right after ``event_id`` was applied."""
        points = self.changes.get(key, [])
        i = bisect.bisect_right([c.event_id for c in points], event_id)
        return points[i - 1].state if i else None

    def states_at(self, event_id: int) -> dict[str, TableState]:
        """Every existing table's state right after ``event_id``."""
        out = {}
        for key in self.changes:
            state = self.state_at(key, event_id)
            if state is not None:
                out[key] = state
        return out

    def compatible(self, key: str, state: TableState | None) -> IdSet:
        """The event ids after which the source's table ``key`` was exactly in ``state``."""
        by_fp = self._compatible.get(key)
        if by_fp is None:
            by_fp = self._compatible[key] = self._index(key)
        return by_fp.get(state.fingerprint if state else None, ())

    def _index(self, key: str) -> dict[str | None, IdSet]:
        spans: dict[str | None, list[tuple[int, int]]] = {}
        start, fingerprint = self.base_event_id, None
        for change in self.changes.get(key, []):
            spans.setdefault(fingerprint, []).append((start, change.event_id - 1))
            start, fingerprint = change.event_id, change.fingerprint
        spans.setdefault(fingerprint, []).append((start, self.last_event_id))
        return {fp: normalize(s) for fp, s in spans.items()}

    def change_ids(self, keys: Iterable[str]) -> list[int]:
        """Sorted event ids at which any of ``keys`` changed."""
        return sorted({c.event_id for k in keys for c in self.changes.get(k, [])})

    def step_of(self, event_id: int) -> int:
        """The first event of the widest step the target may apply ``event_id`` in (see
        :func:`_widest_steps`); an event of its own has its own id."""
        return self._step_of.get(event_id, event_id)

    def event(self, event_id: int) -> EventInfo | None:
        """The event's database and type (None for an id the history does not hold)."""
        return self._events.get(event_id)

    def events_of(self, db: str) -> list[int]:
        """Sorted ids of the events that advance ``db``'s progress (``repl.last.id``)."""
        db = db.lower()
        return sorted(e for e, info in self._events.items() if info.db == db)

    def files_ever(self, key: str) -> set[tuple[str, FileKey]]:
        """Every (partition, file) the table held after some committed event."""
        return self._files_ever.get(key, set())

    def event_time(self, event_id: int) -> int | None:
        i = bisect.bisect_left(self.event_ids, event_id)
        return self.event_times[i] if i < len(self.event_ids) and self.event_ids[i] == event_id else None

    def next_event_id(self, event_id: int) -> int | None:
        """The first event after ``event_id``, if the history has one."""
        i = bisect.bisect_right(self.event_ids, event_id)
        return self.event_ids[i] if i < len(self.event_ids) else None

    def head_at(self, wall_time: float) -> int:
        """The last event written at or before ``wall_time`` (event times have one-second grain)."""
        i = bisect.bisect_right(self._running_max_time, wall_time)
        return self.event_ids[i - 1] if i else self.base_event_id


def _with_writes(event: Event, txn_writes: Callable[[int], list[TxnWriteNotificationRow]] | None) -> Event:
    p = event.payload
    if txn_writes is None or not isinstance(p, CommitTxnPayload) or p.writes:
        return event
    return dataclasses.replace(
        event, payload=dataclasses.replace(p, writes=decode_txn_writes(txn_writes(p.txn_id)))
    )


def _widest_steps(events: list[Event]) -> dict[int, int]:
    """Event id -> first event id of its step, for the steps the target's planner forms when it sees
    a database's events all at once.

    A step is the unit the target applies before it advances ``repl.last.id`` (several ADD_PARTITION
    of one table in one catalog call, a create..drop run applied as the drop): while one is in
    flight, the tables may be ahead of the watermark by all of its changes. A micro-batch only ever
    splits these steps (a batch boundary, or events of the database not yet applied), and what lies
    between two events of a database in a batch's plan is never another event of that database, so
    planning each database's whole sequence gives every step the target can form, or a wider one.
    """
    from streamer.target.apply.plan import GLOBAL_DB, plan, step_db

    by_db: dict[str, list[Event]] = {}
    for event in events:
        by_db.setdefault(step_db(event), []).append(event)
    out: dict[int, int] = {}
    for db, sequence in by_db.items():
        if db == GLOBAL_DB:
            continue
        for step in plan(sequence, {}).steps:
            if len(step.events) > 1:
                out.update((e.event_id, step.first.event_id) for e in step.events)
    return out


def _running_max(values: list[int]) -> list[int]:
    out: list[int] = []
    for v in values:
        out.append(max(v, out[-1]) if out else v)
    return out
