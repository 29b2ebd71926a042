"""Bootstrap consolidation: a dump read while the source changed + the events of that time -> the
source state at the last of those events. Pure: no I/O.

Tables the events cannot repair come back as ``torn`` or ``unresolved``, for the caller to re-read.
Why replaying works, and its limits: ``docs/design/source.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from streamer.events.model import (
    AddConstraintsPayload,
    AddPartitionPayload,
    AlterDatabasePayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
    ColumnStatistic,
    CommitTxnPayload,
    Constraint,
    CreateFunctionPayload,
    CreateTablePayload,
    DatabasePayload,
    DatabaseSnapshot,
    DeleteColumnStatsPayload,
    DropConstraintPayload,
    DropFunctionPayload,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    InsertPayload,
    PartitionSnapshot,
    ReloadPayload,
    TableSnapshot,
    UpdateColumnStatsPayload,
)
from streamer.hive.files import parse_partition_name, partition_name
from streamer.source.policy import Scope

TableKey = tuple[str, str]  # (db, table), lower case
Values = tuple[str, ...]  # partition values in key order; () for an unpartitioned table


@dataclass
class TableDump:
    """One table as dumped: metadata, partitions, files per partition, constraints, statistics.

    ``read_from``/``read_to`` are the source event ids just before and just after the table was
    read; an event on the table in between means its parts may not agree (the table is torn).
    Statistics change only through events after ``read_from``: older ones are in the read already.
    """

    table: TableSnapshot
    partitions: dict[Values, PartitionSnapshot] = field(default_factory=dict)
    files: dict[Values, dict[str, FileRef]] = field(default_factory=dict)  # values -> uri -> file
    constraints: dict[str, list[Constraint]] = field(default_factory=dict)  # by constraint name
    statistics: dict[str, ColumnStatistic] = field(default_factory=dict)  # table level, by column
    # partition level: values -> column (lower case) -> statistics
    partition_statistics: dict[Values, dict[str, ColumnStatistic]] = field(default_factory=dict)
    write_ids: set[int] = field(default_factory=set)
    read_from: int = 0
    read_to: int = 0

    def copy(self) -> TableDump:
        return dataclasses.replace(
            self,
            partitions=dict(self.partitions),
            files={k: dict(v) for k, v in self.files.items()},
            constraints=dict(self.constraints),
            statistics=dict(self.statistics),
            partition_statistics={k: dict(v) for k, v in self.partition_statistics.items()},
            write_ids=set(self.write_ids),
        )

    def add_files(self, refs: Iterable[FileRef]) -> None:
        for ref in refs:
            self.files.setdefault(file_values(self.table, ref), {})[ref.uri] = ref


@dataclass
class Dump:
    """Every object of a policy, by key; see the module docstring."""

    databases: dict[str, DatabaseSnapshot] = field(default_factory=dict)
    tables: dict[TableKey, TableDump] = field(default_factory=dict)
    functions: dict[TableKey, FunctionSnapshot] = field(default_factory=dict)  # (db, function name)

    def copy(self) -> Dump:
        return Dump(
            dict(self.databases), {k: t.copy() for k, t in self.tables.items()}, dict(self.functions)
        )


@dataclass(frozen=True)
class Consolidated:
    """The dump at ``event_id`` if ``torn`` and ``unresolved`` are empty; else what to re-read."""

    dump: Dump
    event_id: int
    torn: frozenset[TableKey] = frozenset()
    unresolved: frozenset[TableKey] = frozenset()

    @property
    def complete(self) -> bool:
        return not self.torn and not self.unresolved


def key(db: str, name: str) -> TableKey:
    return (db.lower(), name.lower())


def file_values(table: TableSnapshot, ref: FileRef) -> Values:
    """The partition a file belongs to, as values in key order (``()`` for an unpartitioned table)."""
    if not table.partition_keys or not ref.partition:
        return ()
    spec = {k.lower(): v for k, v in parse_partition_name(ref.partition).items()}
    return tuple(spec.get(k.name.lower(), "") for k in table.partition_keys)


def consolidate(dump: Dump, events: Iterable[Event], scope: Scope, until: int) -> Consolidated:
    """Replay ``events`` (ids in (E0, ``until``], in order) on a copy of ``dump``."""
    state = _Replay(dump.copy(), scope)
    for event in events:
        if event.event_id > until:
            break
        state.apply(event)
    return Consolidated(state.dump, until, frozenset(state.torn), frozenset(state.unresolved))


class _Replay:
    """The dump being brought forward event by event, and the tables the events cannot repair.

    What each kind of event does is in the handlers below (``_HANDLERS``), by event family."""

    def __init__(self, dump: Dump, scope: Scope) -> None:
        self.dump = dump
        self.scope = scope
        self.torn: set[TableKey] = set()
        self.unresolved: set[TableKey] = set()

    def apply(self, event: Event) -> None:
        for k in self._touched(event):
            t = self.dump.tables.get(k)
            if t is not None and t.read_from < event.event_id <= t.read_to:
                self.torn.add(k)
        handler = _HANDLERS.get(type(event.payload))
        if handler is not None:
            handler(self, event, event.payload)

    def _touched(self, event: Event) -> list[TableKey]:
        p = event.payload
        if isinstance(p, AlterTablePayload):
            return [key(p.before.db, p.before.name), key(p.after.db, p.after.name)]
        if isinstance(p, CommitTxnPayload):
            return [key(w.db, w.table) for w in p.writes]
        if isinstance(p, DatabasePayload) and event.db:
            return [k for k in self.dump.tables if k[0] == event.db.lower()]
        k = _event_key(event)
        return [k] if k[0] and k[1] else []

    def in_scope(self, k: TableKey) -> bool:
        return k[0] in self.dump.databases and self.scope.includes_table(*k)

    def table(self, event: Event, snap: TableSnapshot | None) -> TableDump | None:
        """The dumped table an event changes; a missing in-scope table is marked unresolved."""
        k = key(snap.db, snap.name) if snap else _event_key(event)
        t = self.dump.tables.get(k)
        if t is None and self.in_scope(k):
            self.unresolved.add(k)
        return t

    def read_after(self, k: TableKey, event: Event) -> bool:
        """The dump read the table after ``event``: a create or drop before it is in the read already.

        (Replacing such a read with the event's bare table would lose what only the read has, the
        statistics' parameters among them, and re-reading it would not help: it would be replaced
        again on every round.)"""
        t = self.dump.tables.get(k)
        return t is not None and t.read_to > 0 and event.event_id <= t.read_from

    def drop_table(self, k: TableKey) -> None:
        self.dump.tables.pop(k, None)
        self.unresolved.discard(k)
        for t in self.dump.tables.values():  # foreign keys to a dropped table go with it, as in Hive
            t.constraints = {
                name: cs
                for name, cs in t.constraints.items()
                if not any(c.ref_db and c.ref_table and key(c.ref_db, c.ref_table) == k for c in cs)
            }


# --- databases and functions ----------------------------------------------------------------


def _database(r: _Replay, event: Event, p: DatabasePayload) -> None:
    name = (p.database.name if p.database else event.db or "").lower()
    if event.event_type is EventType.CREATE_DATABASE:
        if p.database is not None and r.scope.includes_db(name):
            r.dump.databases[name] = p.database
        return
    r.dump.databases.pop(name, None)
    for k in [k for k in r.dump.tables if k[0] == name]:
        r.drop_table(k)
    for k in [k for k in r.dump.functions if k[0] == name]:
        del r.dump.functions[k]
    r.unresolved = {k for k in r.unresolved if k[0] != name}


def _alter_database(r: _Replay, event: Event, p: AlterDatabasePayload) -> None:
    if p.after.name.lower() in r.dump.databases:
        r.dump.databases[p.after.name.lower()] = p.after


def _create_function(r: _Replay, event: Event, p: CreateFunctionPayload) -> None:
    fn = p.function
    if r.scope.includes_db(fn.db) and fn.db.lower() in r.dump.databases:
        r.dump.functions[key(fn.db, fn.name)] = fn


def _drop_function(r: _Replay, event: Event, p: DropFunctionPayload) -> None:
    if event.db:
        r.dump.functions.pop(key(event.db, p.function_name), None)


# --- tables and constraints -----------------------------------------------------------------


def _create_table(r: _Replay, event: Event, p: CreateTablePayload) -> None:
    k = key(p.table.db, p.table.name)
    if not r.in_scope(k) or r.read_after(k, event):
        return
    t = TableDump(p.table)
    t.add_files(p.files)
    r.dump.tables[k] = t
    r.unresolved.discard(k)


def _alter_table(r: _Replay, event: Event, p: AlterTablePayload) -> None:
    old, new = key(p.before.db, p.before.name), key(p.after.db, p.after.name)
    if old == new:
        t = r.dump.tables.get(new)
        if t is None:
            if r.in_scope(new):
                r.unresolved.add(new)
            return
        if _newer(event, t):
            t.table = p.after
        if p.is_truncate:
            t.files.pop((), None)
        return
    _rename_references(r.dump, old, p.after)
    moved = r.dump.tables.pop(old, None)
    was_unresolved = old in r.unresolved
    r.unresolved.discard(old)
    if not r.in_scope(new):
        r.dump.tables.pop(new, None)
        r.unresolved.discard(new)
        return
    if new in r.dump.tables:  # read under the new name, after the rename
        if _newer(event, r.dump.tables[new]):
            r.dump.tables[new].table = p.after
    elif moved is not None and not was_unresolved:
        r.dump.tables[new] = _relocated(moved, p.before, p.after)
    else:  # renamed into the policy (or its dump is missing): no event carries its partitions
        r.unresolved.add(new)


def _rename_references(dump: Dump, old: TableKey, after: TableSnapshot) -> None:
    """Foreign keys name their parent table: a renamed parent is renamed in them, as in Hive."""
    for t in dump.tables.values():
        t.constraints = {
            name: [
                dataclasses.replace(c, ref_db=after.db, ref_table=after.name)
                if c.ref_db and c.ref_table and key(c.ref_db, c.ref_table) == old
                else c
                for c in cs
            ]
            for name, cs in t.constraints.items()
        }


def _drop_table(r: _Replay, event: Event, p: DropTablePayload) -> None:
    k = key(p.table.db, p.table.name) if p.table else _event_key(event)
    if not r.read_after(k, event):
        r.drop_table(k)


def _add_constraints(r: _Replay, event: Event, p: AddConstraintsPayload) -> None:
    added: dict[tuple[TableKey, str], list[Constraint]] = {}
    for c in p.constraints:  # one event carries every column of its constraints
        added.setdefault((key(c.db, c.table), c.name), []).append(c)
    for (k, name), cs in added.items():
        t = r.dump.tables.get(k)
        if t is not None:  # set, not append: the dump may have read it already
            t.constraints[name] = cs


def _drop_constraint(r: _Replay, event: Event, p: DropConstraintPayload) -> None:
    t = r.dump.tables.get(key(p.db, p.table))
    if t is not None:
        t.constraints.pop(p.constraint_name, None)


# --- partitions and files -------------------------------------------------------------------


def _set_partition(event: Event, t: TableDump, part: PartitionSnapshot, *, clear: bool) -> None:
    values = tuple(part.values)
    if _newer(event, t):
        t.partitions[values] = part
    if clear:
        t.files.pop(values, None)


def _add_partitions(r: _Replay, event: Event, p: AddPartitionPayload) -> None:
    t = r.table(event, p.table)
    if t is None:
        return
    for part in p.partitions:
        values = tuple(part.values)
        t.files.pop(values, None)  # a new partition holds exactly the files the event lists
        if _newer(event, t):  # and no column statistics
            t.partitions[values] = part
            t.partition_statistics.pop(values, None)
    t.add_files(p.files)


def _alter_partition(r: _Replay, event: Event, p: AlterPartitionPayload) -> None:
    t = r.table(event, p.table)
    if t is None:
        return
    before, after = tuple(p.before.values), tuple(p.after.values)
    if before != after:  # a partition rename moves its files with it
        if _newer(event, t):
            t.partitions.pop(before, None)
        moved = t.files.pop(before, {})
        old_dir, new_dir = p.before.sd.location, p.after.sd.location
        t.files[after] = {
            (ref2 := _moved_ref(ref, old_dir, new_dir, t.table, after)).uri: ref2 for ref in moved.values()
        }
        if _newer(event, t):  # Hive moves the column statistics to the new name
            stats = t.partition_statistics.pop(before, None)
            t.partition_statistics.pop(after, None)
            if stats:
                t.partition_statistics[after] = stats
    _set_partition(event, t, p.after, clear=p.is_truncate)


def _alter_partitions(r: _Replay, event: Event, p: AlterPartitionsPayload) -> None:
    t = r.table(event, p.table)
    if t is not None:
        for part in p.partitions:
            _set_partition(event, t, part, clear=p.is_truncate)


def _drop_partitions(r: _Replay, event: Event, p: DropPartitionPayload) -> None:
    t = r.table(event, p.table)
    if t is not None:
        for values in p.partition_values:
            t.files.pop(tuple(values), None)
            if _newer(event, t):  # its statistics go with it
                t.partitions.pop(tuple(values), None)
                t.partition_statistics.pop(tuple(values), None)


def _insert(r: _Replay, event: Event, p: InsertPayload) -> None:
    if p.unlocated:  # what it wrote is unknown: only a read of the table after it says
        k = _event_key(event)
        if r.in_scope(k) and not r.read_after(k, event):
            r.unresolved.add(k)
        return
    t = r.table(event, p.table)
    if t is None:
        return
    values = tuple(p.partition_values)
    if p.partition is not None and values and _newer(event, t):
        t.partitions[values] = p.partition
    if p.replace:
        t.files.pop(values, None)
    for ref in p.files:
        ref_values = file_values(t.table, ref) if ref.partition else values
        t.files.setdefault(ref_values, {})[ref.uri] = ref


def _commit(r: _Replay, event: Event, p: CommitTxnPayload) -> None:
    for w in p.writes:
        t = r.dump.tables.get(key(w.db, w.table))
        if t is None:
            if r.in_scope(key(w.db, w.table)):
                r.unresolved.add(key(w.db, w.table))
            continue
        t.write_ids.add(w.write_id)
        values: Values = ()
        if w.partition:
            values = file_values(t.table, FileRef(uri="", partition=w.partition))
            if w.partition_snapshot is not None and _newer(event, t):
                t.partitions.setdefault(values, w.partition_snapshot)
        for ref in w.files:
            t.files.setdefault(values, {})[ref.uri] = ref


def _reload(r: _Replay, event: Event, p: ReloadPayload) -> None:
    if p.table is None:
        return
    t = r.table(event, p.table)
    if t is not None:
        t.table = p.table
        for part in p.partitions:
            _set_partition(event, t, part, clear=False)


# --- column statistics ----------------------------------------------------------------------


def _update_stats(r: _Replay, event: Event, p: UpdateColumnStatsPayload) -> None:
    t = r.dump.tables.get(key(p.db, p.table))
    if t is None or event.event_id <= t.read_from:
        # a read after the event shows it already, and a later DELETE_*_COL_STAT (which carries
        # no parameters) may have changed the parameters it would set back
        return
    if p.partition_values or not p.is_table_level:  # the partition's parameters change with them
        values = tuple(p.partition_values)
        part = t.partitions.get(values)
        if part is not None and p.parameters:
            t.partitions[values] = dataclasses.replace(part, parameters=dict(p.parameters))
        stats = t.partition_statistics.setdefault(values, {})
        for s in p.statistics:
            stats[s.column.lower()] = s
        return
    for s in p.statistics:
        t.statistics[s.column.lower()] = s
    if p.parameters:
        t.table = dataclasses.replace(t.table, parameters=dict(p.parameters))


def _delete_stats(r: _Replay, event: Event, p: DeleteColumnStatsPayload) -> None:
    k = key(p.db, p.table)
    t = r.dump.tables.get(k)
    if t is not None and _newer(event, t):
        where = tuple(p.partition_values)
        stats = t.partition_statistics.get(where, {}) if where else t.statistics
        for col in [p.column] if p.column else list(stats):
            stats.pop(col.lower(), None)
        if where and not stats:
            t.partition_statistics.pop(where, None)
    if t is not None and event.event_id > t.read_to:
        # the source also rewrote the owner's COLUMN_STATS_ACCURATE, which the event does not
        # carry: a dump read before it is read again
        r.unresolved.add(k)


# Events of other types (transactions opened or aborted, write ids, compactions) change nothing a
# dump holds.
_HANDLERS: dict[type, Callable[[_Replay, Event, Any], None]] = {
    DatabasePayload: _database,
    AlterDatabasePayload: _alter_database,
    CreateFunctionPayload: _create_function,
    DropFunctionPayload: _drop_function,
    CreateTablePayload: _create_table,
    AlterTablePayload: _alter_table,
    DropTablePayload: _drop_table,
    AddConstraintsPayload: _add_constraints,
    DropConstraintPayload: _drop_constraint,
    AddPartitionPayload: _add_partitions,
    AlterPartitionPayload: _alter_partition,
    AlterPartitionsPayload: _alter_partitions,
    DropPartitionPayload: _drop_partitions,
    InsertPayload: _insert,
    CommitTxnPayload: _commit,
    ReloadPayload: _reload,
    UpdateColumnStatsPayload: _update_stats,
    DeleteColumnStatsPayload: _delete_stats,
}


def _newer(event: Event, t: TableDump) -> bool:
    """Whether ``event`` happened after ``t`` was read. Partition metadata and statistics change only by
    newer events: a read shows the older ones already, and replaying an older partition snapshot
    over it would undo what came between (statistics' parameters set by events that are not replayed).
    Files are replayed either way (set by URI, so replaying is harmless)."""
    return event.event_id > t.read_from


def _event_key(event: Event) -> TableKey:
    return ((event.db or "").lower(), (event.table or "").lower())


def _relocated(t: TableDump, before: TableSnapshot, after: TableSnapshot) -> TableDump:
    """A renamed table's dump: new metadata, partitions and files re-pointed if its directory moved."""
    moved = t.copy()
    moved.table = after
    old_dir, new_dir = before.sd.location, after.sd.location
    moved.partitions = {
        v: dataclasses.replace(
            part,
            db=after.db,
            table=after.name,
            sd=dataclasses.replace(part.sd, location=_moved(part.sd.location, old_dir, new_dir)),
        )
        for v, part in t.partitions.items()
    }
    moved.files = {
        v: {(r := _moved_ref(ref, old_dir, new_dir, after, v)).uri: r for ref in refs.values()}
        for v, refs in t.files.items()
    }
    moved.constraints = {
        name: [dataclasses.replace(c, db=after.db, table=after.name) for c in cs]
        for name, cs in t.constraints.items()
    }
    return moved


def _moved(location: str | None, old_dir: str | None, new_dir: str | None) -> str | None:
    if not location or not old_dir or not new_dir or old_dir == new_dir:
        return location
    old = old_dir.rstrip("/")
    if location == old:
        return new_dir
    if location.startswith(old + "/"):
        return new_dir.rstrip("/") + location[len(old) :]
    return location


def _moved_ref(
    ref: FileRef, old_dir: str | None, new_dir: str | None, table: TableSnapshot, values: Values
) -> FileRef:
    uri = _moved(ref.uri, old_dir, new_dir) or ref.uri
    if uri == ref.uri and (not values or ref.partition is None):
        return ref
    partition = ref.partition
    if values and table.partition_keys:
        partition = partition_name([k.name for k in table.partition_keys], list(values))
    return dataclasses.replace(ref, uri=uri, partition=partition)
