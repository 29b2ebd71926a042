"""The source's table states, replayed from its ordered change events. Pure: events in, states out.

:class:`SourceStateMachine` applies events the way a perfect replica would (INSERT adds files,
INSERT OVERWRITE and truncates replace them, drops remove, renames move a table's whole state,
transactional writes become visible at their COMMIT_TXN and never after an ABORT_TXN). ``verify``
and ``drift`` compare a replica with it; the consistency checker builds its history on it.
"""

from __future__ import annotations

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
from streamer.replay.live import LiveTable, file_key, table_key
from streamer.replay.state import UNPARTITIONED, TableState, table_meta

__all__ = ["SourceStateMachine", "file_key", "table_key"]

Tables = dict[str, LiveTable]


class SourceStateMachine:
    """Replays source events over table states; ``apply`` returns the keys it may have changed."""

    def __init__(self) -> None:
        self.tables: Tables = {}
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
            created = self.tables[key] = LiveTable.of(p.table)
            if not created.meta.partition_keys and not created.meta.is_view:
                created.add(UNPARTITIONED, p.files)
            return {key}
        if isinstance(p, AlterTablePayload):
            return _alter_table(self.tables, p)
        if isinstance(p, DropTablePayload):
            key = self._key(event, p.table)
            self.tables.pop(key, None)
            return {key}
        if event.event_type == EventType.DROP_DATABASE and isinstance(p, DatabasePayload):
            return _drop_database(self.tables, (p.database.name if p.database else event.db or "").lower())
        if isinstance(p, AddPartitionPayload | AlterPartitionPayload | AlterPartitionsPayload):
            key, live = self._live(event, p.table)
            if live is not None:
                _partitions(live, p)
            return {key}
        if isinstance(p, DropPartitionPayload):
            key, live = self._live(event, p.table)
            if live is not None:
                live.drop_partitions(p.partition_values)
            return {key}
        if isinstance(p, InsertPayload):
            key, live = self._live(event, p.table)
            if live is not None:
                _insert(live, p)
            return {key}
        if isinstance(p, BootstrapObjectPayload):
            return _bootstrap(self.tables, p)
        return self._transaction(p)

    def _transaction(self, p: object) -> set[str]:
        """Transaction events: writes wait for their COMMIT_TXN, and vanish with an ABORT_TXN."""
        if isinstance(p, AllocWriteIdPayload):
            for txn in p.txn_write_ids:
                self._allocated.setdefault(txn.txn_id, []).append((table_key(p.db, p.table), txn.write_id))
        elif isinstance(p, AcidWritePayload):
            self._pending.setdefault(p.txn_id, []).append(p.write)
        elif isinstance(p, CommitTxnPayload):
            writes = self._pending.pop(p.txn_id, [])
            seen = {(w.db, w.table, w.partition, w.write_id) for w in writes}
            writes += [w for w in p.writes if (w.db, w.table, w.partition, w.write_id) not in seen]
            return _commit(self.tables, writes, self._allocated.pop(p.txn_id, []))
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

    def _live(self, event: Event, table: TableSnapshot | None) -> tuple[str, LiveTable | None]:
        key = self._key(event, table)
        live = self.tables.get(key)
        if live is None and table is not None:  # a log that starts mid-way: adopt the snapshot
            live = self.tables[key] = LiveTable.of(table)
        return key, live


# --- one family of events each ------------------------------------------------------------------


def _alter_table(tables: Tables, p: AlterTablePayload) -> set[str]:
    old, new = table_key(p.before.db, p.before.name), table_key(p.after.db, p.after.name)
    live = tables.pop(old, None) or LiveTable.of(p.after)
    live.meta, live.location = table_meta(p.after), p.after.sd.location
    if p.is_rename:
        live.locations.clear()  # partition locations moved with the table; events carry new ones
    if p.is_truncate:
        for files in live.files.values():
            files.clear()
    tables[new] = live
    return {old, new}


def _drop_database(tables: Tables, name: str) -> set[str]:
    gone = {k for k in tables if k.startswith(name + ".")}
    for key in gone:
        del tables[key]
    return gone


def _partitions(
    live: LiveTable, p: AddPartitionPayload | AlterPartitionPayload | AlterPartitionsPayload
) -> None:
    parts: list[PartitionSnapshot]
    parts = [p.after] if isinstance(p, AlterPartitionPayload) else list(p.partitions)
    names = []
    for part in parts:
        name = live.name(part.values)
        files = live.partition(name, part.sd.location)
        if not isinstance(p, AddPartitionPayload) and p.is_truncate:
            files.clear()
        names.append(name)
    if isinstance(p, AddPartitionPayload):
        live.add_files(names, p.files)


def _insert(live: LiveTable, p: InsertPayload) -> None:
    name = live.name(p.partition_values)
    location = p.partition.sd.location if p.partition else None
    if name == UNPARTITIONED and p.table is not None:
        live.location = p.table.sd.location or live.location
    files = live.partition(name, location)
    if p.replace:
        files.clear()
    live.add(name, p.files)


def _bootstrap(tables: Tables, p: BootstrapObjectPayload) -> set[str]:
    """A bootstrap record: the source's object as of the bootstrap's event id (a TABLE record
    replaces any table of that name, as the target's bootstrap does)."""
    if p.table is None:
        return set()
    key = table_key(p.table.db, p.table.name)
    if p.kind is BootstrapKind.DROP_TABLE:
        tables.pop(key, None)
        return {key}
    if p.kind is BootstrapKind.TABLE or key not in tables:
        tables[key] = LiveTable.of(p.table)
    live = tables[key]
    if p.kind not in (BootstrapKind.TABLE, BootstrapKind.PARTITIONS):
        return {key}
    if live.meta.transactional:
        live.write_ids.update(p.write_ids)
    names = []
    for part in p.partitions:
        name = live.name(part.values)
        live.partition(name, part.sd.location)
        names.append(name)
    if live.meta.partition_keys:
        live.add_files(names, p.files)
    else:
        for ref in p.files:  # per file: no files must add no "" partition (a view has none)
            live.add(UNPARTITIONED, [ref])
    return {key}


def _commit(tables: Tables, writes: list[AcidWrite], allocated: list[tuple[str, int]]) -> set[str]:
    """A COMMIT_TXN: its allocated write ids become committed and its writes' files visible."""
    changed = set()
    allocated += [(table_key(w.db, w.table), w.write_id) for w in writes]
    for key, write_id in allocated:
        live = tables.get(key)
        if live is not None and live.meta.transactional:
            live.write_ids.add(write_id)
            changed.add(key)
    for write in writes:
        snap = write.table_snapshot
        key = table_key(snap.db, snap.name) if snap else table_key(write.db, write.table)
        live = tables.get(key)
        if live is None:
            continue
        name = write.partition or UNPARTITIONED
        part_snap = write.partition_snapshot
        base = part_snap.sd.location if part_snap else (snap.sd.location if snap else None)
        live.partition(name, part_snap.sd.location if part_snap else None)
        live.add(name, write.files, base)
        changed.add(key)
    return changed
