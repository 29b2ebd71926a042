"""Drift of a replica from the *live* source (``streamer verify --against-source``). Pure: no I/O.

The topic-based ``verify`` cannot see a divergence the events themselves carry (a file written into a
table's directory without an event, as Spark's datasource writes do). This compares the replica with
the source's metastore and storage as they are now, for the objects the source has not changed since
the replica's position (:func:`changed_since`), so a source that moved on raises no false alarm.
Objects are judged per partition: an event that names partitions (ADD/ALTER/DROP_PARTITION, INSERT
into a partition, partition statistics) moves only those, so a busy table's quiet partitions are
still compared; an event of the table itself (CREATE/ALTER/DROP_TABLE, an unpartitioned INSERT, one
that cannot be decoded) moves the whole table. :func:`missing_on_replica` plans what ``--repair``
creates: tables and partitions the replica lacks; :func:`still_safe` keeps, at repair time, only the
drifts and creations whose objects no event named since; :class:`CoverageBook` remembers when each
partition was last compared (the coverage gauges).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from streamer.events.model import (
    AddPartitionPayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    DeleteColumnStatsPayload,
    DropPartitionPayload,
    Event,
    EventType,
    FileRef,
    InsertPayload,
    UpdateColumnStatsPayload,
)
from streamer.hive.notification import NotificationRow
from streamer.replay.state import UNPARTITIONED
from streamer.target.dr.drift import (
    CHECKSUM,
    FILE,
    PARTITION,
    SCHEMA,
    SIZE,
    TABLE,
    Counts,
    Drift,
    ObservedTable,
    Repair,
)

WHOLE_DATABASE = "*"
"""In :func:`changed_since`'s answer: an event of the database that names no table (or drops it)."""

REPAIRABLE = frozenset({FILE, SIZE, CHECKSUM})

PARTITION_EVENTS = frozenset(t.value.upper() for t in (
    EventType.ADD_PARTITION, EventType.ALTER_PARTITION, EventType.ALTER_PARTITIONS, EventType.DROP_PARTITION,
    EventType.INSERT, EventType.UPDATE_PARTITION_COLUMN_STAT, EventType.DELETE_PARTITION_COLUMN_STAT,
))
"""Event types that may name partitions only (:func:`partitions_of` says which, or the whole table)."""

Decoder = Callable[[NotificationRow], Event]


def unit(table: str, part: str) -> str:
    """The name a partition (or an unpartitioned table: ``part`` empty) is judged and counted by."""
    return table if part == UNPARTITIONED else f"{table}/{part}"


def partitions_of(event: Event) -> list[str] | None:
    """Hive names (lower-case keys) of the partitions a decoded partition-level event names, or None
    when it names the table as a whole (no partition, or no table definition to name them by)."""
    p = event.payload
    table = getattr(p, "table", None)
    keys = [k.name.lower() for k in table.partition_keys] if table is not None else []
    values: list[list[str]] = []
    if isinstance(p, AddPartitionPayload | AlterPartitionsPayload):
        values = [list(x.values) for x in p.partitions]
    elif isinstance(p, AlterPartitionPayload):
        values = [list(p.before.values), list(p.after.values)]
    elif isinstance(p, DropPartitionPayload):
        values = [list(v) for v in p.partition_values]
    elif isinstance(p, InsertPayload | UpdateColumnStatsPayload | DeleteColumnStatsPayload):
        values = [list(p.partition_values)] if p.partition_values else []
    if not keys or not values or any(len(v) != len(keys) for v in values):
        return None
    return sorted({"/".join(f"{k}={v}" for k, v in zip(keys, vs, strict=True)) for vs in values})


def changed_since(rows: Iterable[NotificationRow], positions: Mapping[str, int],
                  decode: Decoder | None = None) -> dict[str, frozenset[str]]:
    """Per source database of ``positions``, what its events after that position name: (lower-case)
    tables, ``table/partition`` units (with ``decode``, for partition-level events whose partitions
    :func:`partitions_of` names), :data:`WHOLE_DATABASE` when such an event names no table. Renames
    name both tables in the message only, so any ALTER_TABLE also marks the database's table set as
    moved. An event ``decode`` cannot decode moves its whole table (never a false verdict)."""
    out: dict[str, set[str]] = {}
    for row in rows:
        db = (row.db_name or "").lower()
        if db not in positions or row.event_id <= positions[db]:
            continue
        names = out.setdefault(db, set())
        kind = row.event_type.upper()
        if row.table_name:
            table = row.table_name.lower()
            parts = _decoded_partitions(row, decode) if decode and kind in PARTITION_EVENTS else None
            names.update([unit(table, p) for p in parts] if parts else [table])
        else:
            names.add(WHOLE_DATABASE)
        if kind in ("ALTER_TABLE", "DROP_DATABASE"):
            names.add(WHOLE_DATABASE)
    return {db: frozenset(names) for db, names in out.items()}


def _decoded_partitions(row: NotificationRow, decode: Decoder) -> list[str] | None:
    try:
        return partitions_of(decode(row))
    except Exception:  # an undecodable message moves its whole table: judged later, never wrongly
        return None


def is_moved(moved: Collection[str], table: str, part: str = UNPARTITIONED) -> bool:
    """Whether the table (or, ``part`` given, that partition of it) is among the ``moved`` objects."""
    return table in moved or (part != UNPARTITIONED and unit(table, part) in moved)


@dataclass(frozen=True)
class TablePair:
    """One table as the source shows it now and as its replica does (None: absent there)."""

    name: str
    source: ObservedTable | None
    replica: ObservedTable | None


def compare_tables(db: str, pairs: Iterable[TablePair], moved: frozenset[str]) -> list[Drift]:
    """Every difference of the replica from the source, for tables not in ``moved``.

    Files are compared by relative path and size; content by the digests already in the
    :class:`~streamer.target.dr.drift.ObservedFile` (sha256 on both sides), where both have one.
    A table-set difference is judged only when the database as a whole has not moved.
    """
    out: list[Drift] = []
    for pair in sorted(pairs, key=lambda p: p.name):
        if pair.name in moved:
            continue
        obj = f"{db}.{pair.name}"
        if pair.source is None or pair.replica is None:
            if WHOLE_DATABASE in moved:
                continue
            where = "replica" if pair.replica is None else "source"
            out.append(Drift(db, TABLE, obj, f"table missing on the {where}", unit=pair.name))
            continue
        found = _compare_table(db, obj, pair.source, pair.replica, pair.name, moved)
        out.extend(dataclasses.replace(d, unit=d.unit or pair.name) for d in found)
    return out


def counts(pairs: Iterable[TablePair], moved: frozenset[str]) -> Counts:
    """What was compared: tables on both sides, their partitions and files (the source's), leaving
    out the partitions that moved."""
    total = Counts()
    for pair in pairs:
        if pair.name in moved or pair.source is None or pair.replica is None:
            continue
        kept = {p: fs for p, fs in pair.source.partitions.items() if not is_moved(moved, pair.name, p)}
        files = [f for part in kept.values() for f in part.values()]
        parts = sum(p != UNPARTITIONED for p in kept)
        total += Counts(1, parts, len(files), sum(f.size for f in files))
    return total


def units(pairs: Iterable[TablePair]) -> set[str]:
    """Every partition (and unpartitioned table, view) of the source's tables: what coverage counts."""
    out: set[str] = set()
    for pair in pairs:
        if pair.source is None:
            continue
        out.update(unit(pair.name, p) for p in pair.source.partitions or {UNPARTITIONED: {}})
    return out


def checked_units(pairs: Iterable[TablePair], moved: frozenset[str]) -> set[str]:
    """The :func:`units` a comparison with ``moved`` judged (a table missing on the replica is judged
    only when the database's table set did not move)."""
    out: set[str] = set()
    for pair in pairs:
        if pair.source is None or pair.name in moved:
            continue
        if pair.replica is None and WHOLE_DATABASE in moved:
            continue
        out.update(unit(pair.name, p) for p in pair.source.partitions or {UNPARTITIONED: {}}
                   if not is_moved(moved, pair.name, p))
    return out


def _compare_table(db: str, obj: str, source: ObservedTable, replica: ObservedTable, table: str,
                   moved: frozenset[str]) -> list[Drift]:
    out: list[Drift] = []
    for attr in ("columns", "partition_keys"):
        want, got = getattr(source.meta, attr), getattr(replica.meta, attr)
        if want != got:
            out.append(Drift(db, SCHEMA, obj, f"{attr} differ: replica {got!r}, source {want!r}"[:500]))
    if source.meta.is_view or source.meta.transactional:
        return out  # a view has no files; an ACID table's directories are judged by write ids (verify)

    def quiet(parts: Iterable[str]) -> list[str]:
        return sorted(p for p in parts if not is_moved(moved, table, p))

    for part in quiet(set(source.partitions) - set(replica.partitions)):
        out.append(Drift(db, PARTITION, _part_obj(obj, part), "partition missing on the replica",
                         unit=unit(table, part)))
    for part in quiet(set(replica.partitions) - set(source.partitions)):
        out.append(Drift(db, PARTITION, _part_obj(obj, part), "partition on the replica, not on the source",
                         unit=unit(table, part)))
    for part in quiet(set(source.partitions) & set(replica.partitions)):
        found = _compare_files(db, _part_obj(obj, part), source, replica, part)
        out.extend(dataclasses.replace(d, unit=unit(table, part)) for d in found)
    return out


def _compare_files(
    db: str, where: str, source: ObservedTable, replica: ObservedTable, part: str
) -> list[Drift]:
    out: list[Drift] = []
    want, have = source.partitions[part], replica.partitions[part]
    directory = replica.locations.get(part)
    src_dir = source.locations.get(part)

    def fix(path: str) -> Repair | None:
        if directory is None:
            return None
        f = want[path]
        ref = FileRef(f.url, checksum=f.digest, checksum_algorithm=f.algorithm if f.digest else None,
                      size=f.size, partition=None if part == UNPARTITIONED else part)
        head = path.rpartition("/")[0]
        return Repair(ref, directory.rstrip("/") + ("/" + head if head else ""), src_dir)

    for path in sorted(set(want) - set(have)):
        out.append(Drift(db, FILE, f"{where}/{path}", f"file {path} missing on the replica", fix(path)))
    for path in sorted(set(have) - set(want)):
        remove = Repair(FileRef(have[path].url), directory) if directory and src_dir else None
        out.append(Drift(db, FILE, f"{where}/{path}", f"file {path} on the replica, not on the source",
                         remove))
    for path in sorted(set(want) & set(have)):
        s, r = want[path], have[path]
        if s.size != r.size:
            text = f"size differs: replica {r.size} bytes, source {s.size}"
            out.append(Drift(db, SIZE, f"{where}/{path}", text, fix(path)))
        elif s.digest and r.digest and s.algorithm == r.algorithm and s.digest.lower() != r.digest.lower():
            text = f"content differs: replica {s.algorithm} {r.digest}, source {s.digest}"
            out.append(Drift(db, CHECKSUM, f"{where}/{path}", text, fix(path)))
    return out


@dataclass(frozen=True)
class Creation:
    """A table (``partitions`` empty: the whole table, its partitions with it) or some partitions of
    an existing table that the replica lacks and the source has, unchanged since the replica's
    position: ``--repair`` creates them from the source's metastore and copies their files."""

    table: str
    partitions: tuple[str, ...] = ()


def missing_on_replica(pairs: Iterable[TablePair], moved: frozenset[str]) -> tuple[list[Creation], list[str]]:
    """(what to create, why the rest of the missing objects is not created), for tables not in
    ``moved``. A missing table is judged only when the database as a whole has not moved, as in
    :func:`compare_tables`; transactional tables are left out (their files are judged by write ids,
    which only the events carry), as are partitions of a table whose partition keys differ."""
    plan: list[Creation] = []
    skipped: list[str] = []
    for pair in sorted(pairs, key=lambda p: p.name):
        if pair.name in moved or pair.source is None:
            continue
        if pair.source.meta.transactional:
            if pair.replica is None or set(pair.source.partitions) - set(pair.replica.partitions):
                skipped.append(f"{pair.name}: transactional, not created (its write ids come with events)")
            continue
        if pair.replica is None:
            if WHOLE_DATABASE not in moved:
                plan.append(Creation(pair.name))
            continue
        if pair.source.meta.is_view or pair.source.meta.partition_keys != pair.replica.meta.partition_keys:
            continue
        missing = tuple(sorted(p for p in set(pair.source.partitions) - set(pair.replica.partitions)
                               if p != UNPARTITIONED and not is_moved(moved, pair.name, p)))
        if missing:
            plan.append(Creation(pair.name, missing))
    return plan, skipped


def still_safe(drifts: Iterable[Drift], creations: Iterable[Creation], moved: frozenset[str]
               ) -> tuple[list[Drift], list[Creation]]:
    """The drifts and creations a repair may still make after the log named ``moved`` objects since
    the replica position they were judged at: only those of objects no later event named (the
    source and the replica both still hold what was compared)."""
    whole = WHOLE_DATABASE in moved  # the table set moved: a table missing on a side is not judged
    kept_drifts = [d for d in drifts
                   if d.unit and not _unit_moved(moved, d.unit) and not (whole and d.kind == TABLE)]
    kept: list[Creation] = []
    for c in creations:
        if not c.partitions:
            if c.table not in moved and WHOLE_DATABASE not in moved:
                kept.append(c)
            continue
        parts = tuple(p for p in c.partitions if not is_moved(moved, c.table, p))
        if parts:
            kept.append(Creation(c.table, parts))
    return kept_drifts, kept


def _unit_moved(moved: frozenset[str], name: str) -> bool:
    table, _, part = name.partition("/")
    return is_moved(moved, table, part)


@dataclass(frozen=True)
class Coverage:
    """How much of one database the last check judged: ``checked`` of ``total`` units (partitions,
    unpartitioned tables), and ``full_pass``: every unit present was judged at or after that time, or
    first seen after it (a partition busy since it appeared holds it back to when it appeared)."""

    checked: int
    total: int
    full_pass: float

    @property
    def ratio(self) -> float:
        return self.checked / self.total if self.total else 1.0


@dataclass
class CoverageBook:
    """When each unit of each database was last judged, across checks (continuous verification)."""

    last: dict[str, dict[str, float]] = field(default_factory=dict)  # db -> unit -> last judged
    first: dict[str, dict[str, float]] = field(default_factory=dict)  # db -> unit -> first seen

    def record(self, db: str, present: Collection[str], checked: Collection[str], now: float) -> Coverage:
        """Note that ``checked`` units were judged at ``now``; forget units no longer ``present``."""
        judged = {u: t for u, t in self.last.get(db, {}).items() if u in present}
        judged.update((u, now) for u in checked if u in present)
        first = {u: self.first.get(db, {}).get(u, now) for u in present}
        self.last[db], self.first[db] = judged, first
        full = min((judged.get(u, first[u]) for u in present), default=now)
        return Coverage(len(set(checked) & set(present)), len(present), full)


def is_creation(drift: Drift) -> bool:
    """A drift ``--repair`` fixes by creating the object (table or partition) from the source."""
    return drift.kind in (TABLE, PARTITION) and drift.detail.endswith("missing on the replica")


def is_removal(drift: Drift) -> bool:
    """A repair that deletes a replica file the source does not have (its ref is the replica's)."""
    return drift.kind == FILE and drift.detail.endswith("on the replica, not on the source")


def _part_obj(table_obj: str, part: str) -> str:
    return f"{table_obj}/{part}" if part != UNPARTITIONED else table_obj
