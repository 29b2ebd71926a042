"""Drift between a replica and its source, judged at the replica's own position. Pure: no I/O.

:func:`expected_at` replays the source's events from the topic through
:class:`~streamer.replay.machine.SourceStateMachine` and captures each database at its cut-off;
:func:`compare` reports each difference from the replica as a :class:`Drift` of one of :data:`KINDS`
(a drifted data file of an existing partition carries a :class:`Repair`). Cut-offs and
normalisation: docs/design/dr.md.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamer.events.model import (
    AlterDatabasePayload,
    AlterTablePayload,
    BootstrapKind,
    BootstrapObjectPayload,
    CommitTxnPayload,
    DatabasePayload,
    Event,
    EventType,
    FileRef,
)
from streamer.replay.machine import SourceStateMachine
from streamer.replay.state import UNPARTITIONED, TableMeta, TableState, stable_params
from streamer.target.apply.plan import GLOBAL_DB, step_db

DATABASE, TABLE, SCHEMA, PARAMETERS, PARTITION, FILE, CHECKSUM, SIZE, WRITE_IDS = (
    "database", "table", "schema", "parameters", "partition", "file", "checksum", "size", "write_ids",
)
KINDS = (DATABASE, TABLE, SCHEMA, PARAMETERS, PARTITION, FILE, CHECKSUM, SIZE, WRITE_IDS)
"""Drift kinds, the label values of ``streamer_verify_drift_objects{db,kind}``."""

Params = tuple[tuple[str, str], ...]


# --- the expected side: the source at a database's cut-off ------------------------------------


@dataclass(frozen=True)
class ExpectedDatabase:
    """The source's database ``name`` right after event ``event_id`` (lower-case source names).

    ``parameters`` is None when the database did not exist then. ``refs`` holds the event's
    reference of every file of ``tables`` by (table, partition, relative path).
    """

    name: str
    event_id: int
    parameters: Params | None
    tables: Mapping[str, TableState] = field(default_factory=dict)
    refs: Mapping[tuple[str, str, str], FileRef] = field(default_factory=dict)
    later_events: int = 0  # events of this database after the cut-off that the topic holds
    # tables the source changed after the cut-off: their current source files are not the expected
    # ones, so a file without a recorded checksum cannot be re-hashed on the source for them
    moving: frozenset[str] = frozenset()
    # (table, partition, path) -> sha256 of the source file now, for files the events recorded no
    # checksum of, in tables not moving (filled in by the I/O side: ``with_recomputed``)
    recomputed: Mapping[tuple[str, str, str], str] = field(default_factory=dict)

    def with_recomputed(self, digests: Mapping[tuple[str, str, str], str]) -> ExpectedDatabase:
        return dataclasses.replace(self, recomputed=dict(digests))

    def unchecked_files(self) -> list[tuple[str, str, str, FileRef]]:
        """Files without a recorded checksum in tables the source has not changed since the cut-off:
        the source's current copy is the expected one, so it can be hashed instead."""
        out = []
        for (table, part, path), ref in sorted(self.refs.items()):
            if ref.checksum or table in self.moving or "*" in self.moving:
                continue
            out.append((table, part, path, ref))
        return out


def expected_at(events: Iterable[Event], cutoffs: Mapping[str, int]) -> dict[str, ExpectedDatabase]:
    """Every database of ``cutoffs`` (source name -> event id) as the source had it after its cut-off.

    ``events`` in id order, as the topic holds them (bootstrap records share their bootstrap's id).
    One pass: a database is captured before the first event past its cut-off is applied.
    """
    wanted = {db.lower(): cut for db, cut in cutoffs.items()}
    machine = SourceStateMachine()
    databases: dict[str, Params] = {}
    pending = sorted(wanted.items(), key=lambda kv: kv[1])
    out: dict[str, ExpectedDatabase] = {}
    later: dict[str, int] = {}
    moving: dict[str, set[str]] = {}
    last_id: int | None = None
    for event in events:
        if last_id is not None and event.event_id < last_id:
            raise ValueError(f"event {event.event_id} follows {last_id}: events must be in id order")
        last_id = event.event_id
        while pending and pending[0][1] < event.event_id:
            db, cut = pending.pop(0)
            out[db] = _capture(machine, databases, db, cut)
        own = step_db(event)
        if own != GLOBAL_DB and own.lower() in out:
            later[own.lower()] = later.get(own.lower(), 0) + 1
        for db, table in _touched(event):
            if db in out:
                moving.setdefault(db, set()).add(table)
        _track_database(event, databases, machine)
        machine.apply(event)
    for db, cut in pending:
        out[db] = _capture(machine, databases, db, cut)
    return {
        db: dataclasses.replace(e, later_events=later.get(db, 0), moving=frozenset(moving.get(db, ())))
        for db, e in out.items()
    }


def _touched(event: Event) -> set[tuple[str, str]]:
    """(db, table) an event changes, lower case; ``(db, "*")`` for a whole database."""
    p = event.payload
    out: set[tuple[str, str]] = set()
    if isinstance(p, CommitTxnPayload):
        out.update((w.db.lower(), w.table.lower()) for w in p.writes)
    elif isinstance(p, AlterTablePayload):
        out.update({(p.before.db.lower(), p.before.name.lower()), (p.after.db.lower(), p.after.name.lower())})
    elif event.db and event.table:
        out.add((event.db.lower(), event.table.lower()))
    elif event.db and event.event_type in (EventType.DROP_DATABASE, EventType.BOOTSTRAP):
        out.add((event.db.lower(), "*"))
    return out


def _track_database(event: Event, databases: dict[str, Params], machine: SourceStateMachine) -> None:
    p = event.payload
    if isinstance(p, DatabasePayload):
        name = (p.database.name if p.database else event.db or "").lower()
        if event.event_type == EventType.CREATE_DATABASE:
            databases[name] = stable_params(p.database.parameters if p.database else {})
        elif event.event_type == EventType.DROP_DATABASE:
            databases.pop(name, None)
    elif isinstance(p, AlterDatabasePayload):
        databases[p.after.name.lower()] = stable_params(p.after.parameters)
    elif isinstance(p, BootstrapObjectPayload) and p.kind is BootstrapKind.DATABASE and p.database:
        name = p.database.name.lower()
        databases[name] = stable_params(p.database.parameters)
        for key in [k for k in machine.tables if k.startswith(name + ".")]:
            del machine.tables[key]  # a full bootstrap recreates the database from its records


def _capture(
    machine: SourceStateMachine, databases: Mapping[str, Params], db: str, cut: int
) -> ExpectedDatabase:
    tables: dict[str, TableState] = {}
    refs: dict[tuple[str, str, str], FileRef] = {}
    prefix = db + "."
    for key in machine.tables:
        if not key.startswith(prefix):
            continue
        state = machine.state(key)
        if state is None:
            continue
        name = key[len(prefix) :]
        tables[name] = state
        for partition, files in state.partitions:
            for path, _ in files:
                ref = machine.file_ref(key, partition, path)
                if ref is not None:
                    refs[(name, partition, path)] = ref
    return ExpectedDatabase(db, cut, databases.get(db), tables, refs)


# --- the observed side: what the target holds -----------------------------------------------


@dataclass(frozen=True)
class ObservedFile:
    """A visible data file of the target: its URL, size, and digest (by the algorithm the expected
    file's checksum used; None when there was nothing to compare it with)."""

    url: str
    size: int
    digest: str | None = None
    algorithm: str | None = None  # what ``digest`` was computed with


@dataclass(frozen=True)
class ObservedTable:
    """A target table: its comparable metadata (source parameter names restored), committed write
    ids (ACID replicas), and per partition name its directory and visible files by relative path."""

    meta: TableMeta
    partitions: Mapping[str, Mapping[str, ObservedFile]] = field(default_factory=dict)
    locations: Mapping[str, str] = field(default_factory=dict)
    write_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class ObservedDatabase:
    """A target database as read, under its *source* name; ``event_id`` is its ``repl.last.id``."""

    name: str
    event_id: int
    parameters: Params
    tables: Mapping[str, ObservedTable] = field(default_factory=dict)


# --- comparing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Repair:
    """How to fix a file drift: copy ``ref`` (verified by the copier) into target ``directory``.

    ``source_location``: where the file's object (table or partition) lives on the source, which the
    read rules hold the copy to when no ``--source-prefix`` is declared (None: not known, refused)."""

    ref: FileRef
    directory: str
    source_location: str | None = None


@dataclass(frozen=True)
class Drift:
    """One object of the replica that differs from the source at the database's cut-off."""

    db: str
    kind: str
    obj: str
    detail: str
    repair: Repair | None = None
    # the table or ``table/partition`` the drift is in (the check against the live source sets it:
    # a repair re-checks that no event named it since), empty when not known
    unit: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"db": self.db, "kind": self.kind, "object": self.obj, "detail": self.detail,
                "repairable": self.repair is not None}


@dataclass(frozen=True)
class Counts:
    tables: int = 0
    partitions: int = 0
    files: int = 0
    bytes: int = 0
    unverified: int = 0  # files whose content was not compared (no recorded or recomputable checksum)

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.tables + other.tables, self.partitions + other.partitions,
                      self.files + other.files, self.bytes + other.bytes, self.unverified + other.unverified)


@dataclass(frozen=True)
class DatabaseReport:
    """The verdict on one database: compared at ``event_id`` (its cut-off)."""

    db: str
    event_id: int
    drifts: tuple[Drift, ...] = ()
    counts: Counts = Counts()
    later_events: int = 0  # source events of this database after the cut-off (not compared: moving)
    note: str | None = None  # why the database was not judged (unsettled), if it was not

    def by_kind(self) -> dict[str, int]:
        return {k: n for k in KINDS if (n := sum(d.kind == k for d in self.drifts))}


def compare(expected: ExpectedDatabase, observed: ObservedDatabase | None) -> DatabaseReport:
    """Every drift of ``observed`` from ``expected``; both under source names."""
    db = expected.name
    drifts: list[Drift] = []
    if observed is None or expected.parameters is None:
        if observed is None and expected.parameters is not None:
            drifts.append(Drift(db, DATABASE, db, f"missing on the target (the source had it after event "
                                                 f"{expected.event_id})"))
        elif observed is not None:
            drifts.append(Drift(db, DATABASE, db, f"on the target, but the source had no such database "
                                                 f"after event {expected.event_id}"))
        return DatabaseReport(db, expected.event_id, tuple(drifts), later_events=expected.later_events)
    if observed.parameters != expected.parameters:
        drifts.append(Drift(db, DATABASE, db, "parameters " + _param_diff(observed.parameters,
                                                                         expected.parameters)))
    counts = Counts()
    for name in sorted(set(expected.tables) - set(observed.tables)):
        drifts.append(Drift(db, TABLE, f"{db}.{name}", "missing on the target"))
    for name in sorted(set(observed.tables) - set(expected.tables)):
        drifts.append(Drift(db, TABLE, f"{db}.{name}", "on the target, but not on the source"))
    for name in sorted(set(expected.tables) & set(observed.tables)):
        counts += _compare_table(expected, name, observed.tables[name], drifts)
    return DatabaseReport(db, expected.event_id, tuple(drifts), counts, expected.later_events)


def _compare_table(expected: ExpectedDatabase, name: str, seen: ObservedTable, out: list[Drift]) -> Counts:
    db, want = expected.name, expected.tables[name]
    obj = f"{db}.{name}"
    schema = [f for f in ("table_type", "columns", "partition_keys", "view_text")
              if getattr(seen.meta, f) != getattr(want.meta, f)]
    if schema:
        details = "; ".join(f"{f}: target {getattr(seen.meta, f)!r} source {getattr(want.meta, f)!r}"
                            for f in schema)
        out.append(Drift(db, SCHEMA, obj, details[:500]))
    if seen.meta.parameters != want.meta.parameters:
        out.append(Drift(db, PARAMETERS, obj, "parameters " + _param_diff(seen.meta.parameters,
                                                                         want.meta.parameters)))
    if want.meta.transactional and seen.write_ids != want.write_ids:
        out.append(Drift(db, WRITE_IDS, obj, f"committed write ids: target {_ids(seen.write_ids)} "
                                            f"source {_ids(want.write_ids)}"))
    if want.meta.is_view:
        return Counts(tables=1)
    files_want = want.files()
    n_parts = n_files = n_bytes = unverified = 0
    for part in sorted(set(files_want) - set(seen.partitions)):
        out.append(Drift(db, PARTITION, _part_obj(obj, part), "missing on the target"))
    for part in sorted(set(seen.partitions) - set(files_want)):
        out.append(Drift(db, PARTITION, _part_obj(obj, part), "on the target, but not on the source"))
    for part in sorted(set(files_want) & set(seen.partitions)):
        n_parts += part != UNPARTITIONED
        have = seen.partitions[part]
        wanted = dict(files_want[part])
        where = _part_obj(obj, part)
        directory = seen.locations.get(part)
        for path in sorted(set(wanted) - set(have)):
            ref = expected.refs.get((name, part, path))
            fix = _repair(ref, directory, path)
            out.append(Drift(db, FILE, f"{where}/{path}", "missing on the target", fix))
        for path in sorted(set(have) - set(wanted)):
            out.append(Drift(db, FILE, f"{where}/{path}", "on the target, but not on the source"))
        for path in sorted(set(wanted) & set(have)):
            n_files += 1
            got = have[path]
            n_bytes += got.size
            ref = expected.refs.get((name, part, path))
            checksum = wanted[path]
            fix = _repair(ref, directory, path)
            if checksum:
                if (got.digest or "").lower() != checksum.lower():
                    out.append(Drift(db, CHECKSUM, f"{where}/{path}",
                                     f"content {got.digest} != source checksum {checksum}", fix))
            elif (name, part, path) in expected.recomputed:
                source_digest = expected.recomputed[(name, part, path)]
                if (got.digest or "").lower() != source_digest.lower():
                    text = f"content {got.digest} != the source file's sha256 {source_digest} (recomputed)"
                    out.append(Drift(db, CHECKSUM, f"{where}/{path}", text, fix))
            else:
                unverified += 1  # content unknown: the size, where recorded, is all there is
                if ref is not None and ref.size is not None and got.size != ref.size:
                    text = f"{got.size} bytes != source {ref.size}"
                    out.append(Drift(db, SIZE, f"{where}/{path}", text, fix))
    return Counts(1, n_parts, n_files, n_bytes, unverified)


def checksum_algorithm(expected: ExpectedDatabase, table: str, partition: str, path: str) -> str | None:
    """The algorithm to hash a target file with: the one its source checksum was made with."""
    ref = expected.refs.get((table, partition, path))
    if ref is not None and ref.checksum:
        return (ref.checksum_algorithm or "sha256").lower()
    return "sha256" if (table, partition, path) in expected.recomputed else None


def _repair(ref: FileRef | None, directory: str | None, path: str) -> Repair | None:
    """Copy ``ref`` to ``path`` below the target ``directory``; read from below the source location
    the event's snapshot gave its object (``ref``'s URI less ``path``, as
    ``streamer.replay.live.file_key`` derived it)."""
    if ref is None or not directory:
        return None
    head, _, _ = path.rpartition("/")
    uri = ref.uri.rstrip("/")
    location = uri[: -len(path) - 1] if uri.endswith("/" + path) else None
    return Repair(ref, directory.rstrip("/") + ("/" + head if head else ""), location)


def _part_obj(table_obj: str, part: str) -> str:
    return f"{table_obj}/{part}" if part != UNPARTITIONED else table_obj


def _param_diff(seen: Params, want: Params, limit: int = 5) -> str:
    a, b = dict(seen), dict(want)
    parts = [f"{k}: target {a.get(k)!r} source {b.get(k)!r}"
             for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    more = f" (+{len(parts) - limit} more)" if len(parts) > limit else ""
    return "; ".join(parts[:limit]) + more


def _ids(ids: tuple[int, ...]) -> str:
    return f"{len(ids)} ids up to {ids[-1]}" if len(ids) > 5 else str(list(ids))


# --- the report ------------------------------------------------------------------------------


@dataclass
class VerifyReport:
    """The verdict on every verified database; ``repaired`` lists the files ``--repair`` re-copied,
    ``refused`` the repairs the door refused (``object: cause``), which changed nothing."""

    databases: list[DatabaseReport] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    started: float = 0.0
    seconds: float = 0.0

    @property
    def drifts(self) -> list[Drift]:
        return [d for r in self.databases for d in r.drifts]

    @property
    def ok(self) -> bool:
        return not self.drifts

    def by_db_kind(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for d in self.drifts:
            out[(d.db, d.kind)] = out.get((d.db, d.kind), 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "started": self.started,
            "seconds": round(self.seconds, 3),
            "databases": [
                {"db": r.db, "event_id": r.event_id, "later_source_events": r.later_events,
                 "drift": r.by_kind(), "note": r.note,
                 "compared": {"tables": r.counts.tables, "partitions": r.counts.partitions,
                              "files": r.counts.files, "bytes": r.counts.bytes,
                              "unverified_files": r.counts.unverified}}
                for r in self.databases
            ],
            "drifts": [d.to_json() for d in self.drifts],
            "repaired": list(self.repaired),
            "refused": list(self.refused),
        }

    def render(self, limit: int = 50) -> str:
        """A table per database, then the drifted objects (up to ``limit``)."""
        head = f"{'database':<24} {'at event':>9} {'later':>6} {'tables':>6} {'parts':>6} {'files':>7}  drift"
        lines = [head]
        for r in self.databases:
            drift = ", ".join(f"{k} {n}" for k, n in r.by_kind().items()) or (r.note or "none")
            lines.append(f"{r.db:<24} {r.event_id:>9} {r.later_events:>6} {r.counts.tables:>6} "
                         f"{r.counts.partitions:>6} {r.counts.files:>7}  {drift}")
        drifts = self.drifts
        if drifts:
            lines.append("")
            lines.append(f"{'kind':<10} object: detail")
            for d in drifts[:limit]:
                fix = " [repairable]" if d.repair is not None else ""
                lines.append(f"{d.kind:<10} {d.obj}: {d.detail}{fix}")
            if len(drifts) > limit:
                lines.append(f"... and {len(drifts) - limit} more (use --output json for all)")
        for path in self.repaired:
            lines.append(f"repaired   {path}")
        for refusal in self.refused:
            lines.append(f"refused    {refusal}")
        unverified = sum(r.counts.unverified for r in self.databases)
        if unverified:
            lines.append(f"{unverified} file(s) unverified: the source recorded no checksum or size")
        lines.append("no drift" if self.ok else f"{len(drifts)} drifted object(s)")
        return "\n".join(lines)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)
