"""The source's history of observable table states, computed from its ordered change events.

:class:`SourceStateMachine` replays events the way a perfect replica would (INSERT adds files,
INSERT OVERWRITE and truncates replace them, drops remove, renames move a table's whole state to its
new name, transactional writes become visible at their COMMIT_TXN and never after an ABORT_TXN).
:class:`History` records, per table (``db.table``, lower case), only the event ids at which its
fingerprint changed, so that "which event ids is this observed state compatible with" is answered
from a few change points even for logs of many thousands of events. Pure: events in, states out.
"""

from __future__ import annotations

import bisect
import dataclasses
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from streamer.events.model import (
    AbortTxnPayload,
    AcidWrite,
    AcidWritePayload,
    AddPartitionPayload,
    AllocWriteIdPayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
    BootstrapKind,
    BootstrapObjectPayload,
    CommitTxnPayload,
    CreateTablePayload,
    DatabasePayload,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    InsertPayload,
    PartitionSnapshot,
    TableSnapshot,
)
from streamer.hive.decode import decode_row, decode_txn_writes
from streamer.hive.files import partition_name
from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow
from streamer.testing.intervals import IdSet, normalize
from streamer.testing.state import UNPARTITIONED, FileKey, TableMeta, TableState, table_meta, table_state


def table_key(db: str, table: str) -> str:
    """How the checker names a table: ``db.table`` in lower case (as the metastore stores names)."""
    return f"{db.lower()}.{table.lower()}"


def file_key(ref: FileRef, base_location: str | None) -> FileKey:
    """A file's identity within its partition: path relative to the partition (or table) directory.

    Falls back to ``subdir/name`` (ACID deltas) or the bare name when the file lies elsewhere.
    """
    path = urlsplit(ref.uri).path
    if base_location:
        base = urlsplit(base_location).path.rstrip("/") + "/"
        if path.startswith(base):
            return path[len(base) :], ref.checksum or ""
    name = posixpath.basename(path)
    return (f"{ref.subdir.strip('/')}/{name}" if ref.subdir else name), ref.checksum or ""


@dataclass
class _Live:
    """A table during the replay: mutable, turned into a :class:`TableState` after each change."""

    meta: TableMeta
    location: str | None
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # partition -> path -> checksum
    locations: dict[str, str | None] = field(default_factory=dict)
    write_ids: set[int] = field(default_factory=set)  # committed, for transactional tables
    # (partition, relative path) -> the reference that put the file there (sizes, algorithms, cm
    # copies: what verification and repair need; entries of removed files may linger, unread)
    refs: dict[tuple[str, str], FileRef] = field(default_factory=dict)

    @classmethod
    def of(cls, table: TableSnapshot) -> _Live:
        live = cls(table_meta(table), table.sd.location)
        if not live.meta.is_view and not live.meta.partition_keys:
            live.files[UNPARTITIONED] = {}
        return live

    def state(self) -> TableState:
        return table_state(self.meta, {p: files.items() for p, files in self.files.items()}, self.write_ids)

    def partition(self, name: str, location: str | None = None) -> dict[str, str]:
        if location:
            self.locations[name] = location
        return self.files.setdefault(name, {})

    def base(self, name: str) -> str | None:
        return self.locations.get(name) if name != UNPARTITIONED else self.location

    def add(self, name: str, refs: Iterable[FileRef], base: str | None = None) -> None:
        files = self.partition(name)
        for ref in refs:
            path, checksum = file_key(ref, base or self.base(name))
            files[path] = checksum
            self.refs[(name, path)] = ref

    def ref(self, name: str, path: str) -> FileRef | None:
        """The reference of a file the table holds now (None when it holds no such file)."""
        return self.refs.get((name, path)) if path in self.files.get(name, {}) else None


class SourceStateMachine:
    """Replays source events over table states; ``apply`` returns the keys it may have changed."""

    def __init__(self) -> None:
        self.tables: dict[str, _Live] = {}
        self._pending: dict[int, list[AcidWrite]] = {}  # open transactions' writes
        self._allocated: dict[int, list[tuple[str, int]]] = {}  # open transactions' (table, write id)

    def state(self, key: str) -> TableState | None:
        live = self.tables.get(key)
        return live.state() if live else None

    def file_ref(self, key: str, partition: str, path: str) -> FileRef | None:
        """The event's reference of a file table ``key`` holds now (checksum, algorithm, size, cm copy)."""
        live = self.tables.get(key)
        return live.ref(partition, path) if live else None

    def apply(self, event: Event) -> set[str]:
        p = event.payload
        if isinstance(p, CreateTablePayload):
            key = table_key(p.table.db, p.table.name)
            live = self.tables[key] = _Live.of(p.table)
            if not live.meta.partition_keys and not live.meta.is_view:
                live.add(UNPARTITIONED, p.files)
            return {key}
        if isinstance(p, AlterTablePayload):
            return self._alter_table(p)
        if isinstance(p, DropTablePayload):
            key = self._key(event, p.table)
            self.tables.pop(key, None)
            return {key}
        if event.event_type == EventType.DROP_DATABASE and isinstance(p, DatabasePayload):
            name = (p.database.name if p.database else event.db or "").lower()
            gone = {k for k in self.tables if k.startswith(name + ".")}
            for key in gone:
                del self.tables[key]
            return gone
        if isinstance(p, AddPartitionPayload | AlterPartitionPayload | AlterPartitionsPayload):
            return self._partitions(event, p)
        if isinstance(p, DropPartitionPayload):
            key, found = self._live(event, p.table)
            if found is not None:
                self._drop_partitions(found, p.partition_values)
            return {key}
        if isinstance(p, InsertPayload):
            return self._insert(event, p)
        if isinstance(p, BootstrapObjectPayload):
            return self._bootstrap(p)
        if isinstance(p, AllocWriteIdPayload):
            for txn in p.txn_write_ids:
                self._allocated.setdefault(txn.txn_id, []).append((table_key(p.db, p.table), txn.write_id))
        elif isinstance(p, AcidWritePayload):
            self._pending.setdefault(p.txn_id, []).append(p.write)
        elif isinstance(p, CommitTxnPayload):
            return self._commit(p)
        elif isinstance(p, AbortTxnPayload):
            self._pending.pop(p.txn_id, None)
            self._allocated.pop(p.txn_id, None)
        return set()

    def _key(self, event: Event, table: TableSnapshot | None) -> str:
        if table is not None:
            return table_key(table.db, table.name)
        if not event.db or not event.table:
            raise ValueError(f"event {event.event_id} ({event.event_type}) names no table")
        return table_key(event.db, event.table)

    def _live(self, event: Event, table: TableSnapshot | None) -> tuple[str, _Live | None]:
        key = self._key(event, table)
        live = self.tables.get(key)
        if live is None and table is not None:  # a log that starts mid-way: adopt the snapshot
            live = self.tables[key] = _Live.of(table)
        return key, live

    @staticmethod
    def _name(live: _Live, values: Sequence[str]) -> str:
        return partition_name(live.meta.key_names, list(values)) if values else UNPARTITIONED

    def _drop_partitions(self, live: _Live, partition_values: list[list[str]]) -> None:
        for values in partition_values:
            name = self._name(live, values)
            live.files.pop(name, None)

    def _alter_table(self, p: AlterTablePayload) -> set[str]:
        old, new = table_key(p.before.db, p.before.name), table_key(p.after.db, p.after.name)
        live = self.tables.pop(old, None) or _Live.of(p.after)
        live.meta, live.location = table_meta(p.after), p.after.sd.location
        if p.is_rename:
            live.locations.clear()  # partition locations moved with the table; events carry new ones
        if p.is_truncate:
            for files in live.files.values():
                files.clear()
        self.tables[new] = live
        return {old, new}

    def _partitions(
        self, event: Event, p: AddPartitionPayload | AlterPartitionPayload | AlterPartitionsPayload
    ) -> set[str]:
        key, live = self._live(event, p.table)
        if live is None:
            return {key}
        parts: list[PartitionSnapshot]
        parts = [p.after] if isinstance(p, AlterPartitionPayload) else list(p.partitions)
        names = []
        for part in parts:
            name = self._name(live, part.values)
            files = live.partition(name, part.sd.location)
            if not isinstance(p, AddPartitionPayload) and p.is_truncate:
                files.clear()
            names.append(name)
        if isinstance(p, AddPartitionPayload):
            self._add_files(live, names, p.files)
        return {key}

    @staticmethod
    def _add_files(live: _Live, names: Sequence[str], refs: Iterable[FileRef]) -> None:
        """Files of an event that adds partitions ``names``: each into the partition it names, else
        into the only one added."""
        for ref in refs:
            live.add(ref.partition or (names[0] if len(names) == 1 else UNPARTITIONED), [ref])

    def _insert(self, event: Event, p: InsertPayload) -> set[str]:
        key, live = self._live(event, p.table)
        if live is None:
            return {key}
        name = self._name(live, p.partition_values)
        location = p.partition.sd.location if p.partition else None
        if name == UNPARTITIONED and p.table is not None:
            live.location = p.table.sd.location or live.location
        files = live.partition(name, location)
        if p.replace:
            files.clear()
        live.add(name, p.files)
        return {key}

    def _bootstrap(self, p: BootstrapObjectPayload) -> set[str]:
        """A bootstrap record: the source's object as of the bootstrap's event id (a TABLE record
        replaces any table of that name, as the target's bootstrap does)."""
        if p.table is None:
            return set()
        key = table_key(p.table.db, p.table.name)
        if p.kind is BootstrapKind.DROP_TABLE:
            self.tables.pop(key, None)
            return {key}
        if p.kind is BootstrapKind.TABLE or key not in self.tables:
            self.tables[key] = _Live.of(p.table)
        live = self.tables[key]
        if p.kind not in (BootstrapKind.TABLE, BootstrapKind.PARTITIONS):
            return {key}
        if live.meta.transactional:
            live.write_ids.update(p.write_ids)
        names = []
        for part in p.partitions:
            name = self._name(live, part.values)
            live.partition(name, part.sd.location)
            names.append(name)
        if live.meta.partition_keys:
            self._add_files(live, names, p.files)
        else:
            for ref in p.files:  # per file: no files must add no "" partition (a view has none)
                live.add(UNPARTITIONED, [ref])
        return {key}

    def _commit(self, p: CommitTxnPayload) -> set[str]:
        writes = self._pending.pop(p.txn_id, [])
        seen = {(w.db, w.table, w.partition, w.write_id) for w in writes}
        writes += [w for w in p.writes if (w.db, w.table, w.partition, w.write_id) not in seen]
        changed = set()
        allocated = self._allocated.pop(p.txn_id, [])
        allocated += [(table_key(w.db, w.table), w.write_id) for w in writes]
        for key, write_id in allocated:
            live = self.tables.get(key)
            if live is not None and live.meta.transactional:
                live.write_ids.add(write_id)
                changed.add(key)
        for write in writes:
            snap = write.table_snapshot
            key = table_key(snap.db, snap.name) if snap else table_key(write.db, write.table)
            live = self.tables.get(key)
            if live is None:
                continue
            name = write.partition or UNPARTITIONED
            part_snap = write.partition_snapshot
            base = part_snap.sd.location if part_snap else (snap.sd.location if snap else None)
            live.partition(name, part_snap.sd.location if part_snap else None)
            live.add(name, write.files, base)
            changed.add(key)
        return changed


@dataclass(frozen=True)
class Change:
    """A table's state from ``event_id`` on (None: the table does not exist)."""

    event_id: int
    state: TableState | None

    @property
    def fingerprint(self) -> str | None:
        return self.state.fingerprint if self.state else None


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
    ) -> None:
        self.base_event_id = base_event_id
        self._step_of = dict(step_of or {})
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
        for event in events:
            seen.append(event)
            if ids and event.event_id <= ids[-1]:
                raise ValueError(f"event {event.event_id} follows {ids[-1]}: events must be in id order")
            if base_event_id is None:
                base_event_id = event.event_id - 1
            ids.append(event.event_id)
            times.append(event.source.event_time)
            for key in machine.apply(event):
                state = machine.state(key)
                points = changes.setdefault(key, [])
                previous = points[-1].fingerprint if points else None
                if (state.fingerprint if state else None) != previous:
                    points.append(Change(event.event_id, state))
        return cls(base_event_id or 0, ids, times, changes, step_of=_widest_steps(seen))

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
    from streamer.target.plan import GLOBAL_DB, plan, step_db

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
