"""The source's table states, replayed from its ordered change events. Pure: events in, states out.

:class:`SourceStateMachine` applies events the way a perfect replica would (INSERT adds files,
INSERT OVERWRITE and truncates replace them, drops remove, renames move a table's whole state,
transactional writes become visible at their COMMIT_TXN and never after an ABORT_TXN). ``verify``
and ``drift`` compare a replica with it; the consistency checker builds its history on it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
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
from streamer.hive.files import partition_name
from streamer.replay.state import UNPARTITIONED, FileKey, TableMeta, TableState, table_meta, table_state


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
