"""Drift of a replica from the *live* source (``streamer verify --against-source``). Pure: no I/O.

The topic-based ``verify`` cannot see a divergence the events themselves carry (a file written into a
table's directory without an event, as Spark's datasource writes do). This compares the replica with
the source's metastore and storage as they are now, for the objects the source has not changed since
the replica's position (:func:`changed_since`), so a source that moved on raises no false alarm.
:func:`missing_on_replica` plans what ``--repair`` creates: tables and partitions the replica lacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamer.events.model import FileRef
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


def changed_since(rows: Iterable[NotificationRow], positions: Mapping[str, int]) -> dict[str, frozenset[str]]:
    """Per source database of ``positions``, the (lower-case) tables its events after that position
    name; :data:`WHOLE_DATABASE` when such an event names none. Renames name both tables in the
    message only, so any ALTER_TABLE also marks the database's table set as moved."""
    out: dict[str, set[str]] = {}
    for row in rows:
        db = (row.db_name or "").lower()
        if db not in positions or row.event_id <= positions[db]:
            continue
        names = out.setdefault(db, set())
        if row.table_name:
            names.add(row.table_name.lower())
        else:
            names.add(WHOLE_DATABASE)
        if row.event_type.upper() in ("ALTER_TABLE", "DROP_DATABASE"):
            names.add(WHOLE_DATABASE)
    return {db: frozenset(names) for db, names in out.items()}


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
            out.append(Drift(db, TABLE, obj, f"table missing on the {where}"))
            continue
        out.extend(_compare_table(db, obj, pair.source, pair.replica))
    return out


def counts(pairs: Iterable[TablePair], moved: frozenset[str]) -> Counts:
    """What was compared: tables on both sides, their partitions and files (the source's)."""
    total = Counts()
    for pair in pairs:
        if pair.name in moved or pair.source is None or pair.replica is None:
            continue
        files = [f for part in pair.source.partitions.values() for f in part.values()]
        parts = sum(p != UNPARTITIONED for p in pair.source.partitions)
        total += Counts(1, parts, len(files), sum(f.size for f in files))
    return total


def _compare_table(db: str, obj: str, source: ObservedTable, replica: ObservedTable) -> list[Drift]:
    out: list[Drift] = []
    for attr in ("columns", "partition_keys"):
        want, got = getattr(source.meta, attr), getattr(replica.meta, attr)
        if want != got:
            out.append(Drift(db, SCHEMA, obj, f"{attr} differ: replica {got!r}, source {want!r}"[:500]))
    if source.meta.is_view or source.meta.transactional:
        return out  # a view has no files; an ACID table's directories are judged by write ids (verify)
    for part in sorted(set(source.partitions) - set(replica.partitions)):
        out.append(Drift(db, PARTITION, _part_obj(obj, part), "partition missing on the replica"))
    for part in sorted(set(replica.partitions) - set(source.partitions)):
        out.append(Drift(db, PARTITION, _part_obj(obj, part), "partition on the replica, not on the source"))
    for part in sorted(set(source.partitions) & set(replica.partitions)):
        out.extend(_compare_files(db, _part_obj(obj, part), source, replica, part))
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
        return Repair(ref, directory.rstrip("/") + ("/" + head if head else ""))

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
                               if p != UNPARTITIONED))
        if missing:
            plan.append(Creation(pair.name, missing))
    return plan, skipped


def is_creation(drift: Drift) -> bool:
    """A drift ``--repair`` fixes by creating the object (table or partition) from the source."""
    return drift.kind in (TABLE, PARTITION) and drift.detail.endswith("missing on the replica")


def is_removal(drift: Drift) -> bool:
    """A repair that deletes a replica file the source does not have (its ref is the replica's)."""
    return drift.kind == FILE and drift.detail.endswith("on the replica, not on the source")


def _part_obj(table_obj: str, part: str) -> str:
    return f"{table_obj}/{part}" if part != UNPARTITIONED else table_obj
