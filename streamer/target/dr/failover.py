"""Failover: turn a replica into a primary at a recorded cut, and keep the target job from applying.

Three durable facts, written in order so that running it again finishes an interrupted one:
``failover.json`` pending (target jobs stop applying), the cut (once no job holds the state dir),
then each replicated database's replica marks swapped for ``repl.failover.cut``. The cut is pure
(``compute_cut``); the rest is I/O at the edges. Details: docs/design/dr.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from streamer.errors import StreamerError
from streamer.metastore.catalog import (
    FAILOVER_CUT_PARAM,
    FAILOVER_TIME_PARAM,
    FENCE_PARAM,
    LAST_ID_PARAM,
    READONLY_PARAM,
    REPL_SOURCE_PARAM,
    REPL_TARGET_PARAM,
    Catalog,
)
from streamer.target.state.files import (
    StateFileError,
    expect_list,
    expect_object,
    expect_opt_str,
    expect_str,
    field,
    read_json,
    write_json,
)
from streamer.target.state.lock import state_lock
from streamer.target.state.status import replicated_through

FAILOVER_FILE = "failover.json"
LOCK_FILE = "job.lock"


class FailedOverError(StreamerError):
    """The target was failed over: it is a primary now and no target job applies to it."""


class FailoverError(StreamerError):
    """The failover cannot be done as asked (nothing replicated from that source, a database left
    mid-batch out of event-id order)."""


class JobRunningError(StreamerError):
    """Another target job holds this state dir."""


# --- the cut (pure) -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DatabaseCut:
    db: str  # target database name
    last_applied_event_id: int  # its repl.last.id
    replicated_through_event_id: int  # every source event up to here is applied (or not its own)
    halted_at: int | None = None  # a halted database's first unapplied event


@dataclass(frozen=True)
class Cut:
    """Where the replica stands at failover; everything the source wrote after ``event_id`` is not on
    the new primary (``unreplicated``)."""

    event_id: int  # every replicated database is replicated through this source event id
    source_head_event_id: int | None  # newest source event id the topic announced (None: unknown)
    consumed_event_id: int  # newest event id the job consumed
    databases: tuple[DatabaseCut, ...]
    new_primary_event_id: int | None = None  # the new primary's own notification-log head

    @property
    def unreplicated(self) -> int | None:
        """Source events the topic announced that the replica never applied (None: head unknown)."""
        if self.source_head_event_id is None:
            return None
        return max(0, self.source_head_event_id - self.event_id)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "unreplicated": self.unreplicated}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cut:
        return cls(
            event_id=int(data["event_id"]),
            source_head_event_id=_opt_int(data.get("source_head_event_id")),
            consumed_event_id=int(data.get("consumed_event_id", 0)),
            databases=tuple(DatabaseCut(**d) for d in data.get("databases", [])),
            new_primary_event_id=_opt_int(data.get("new_primary_event_id")),
        )


def compute_cut(
    applied: Mapping[str, int],
    consumed_event_id: int,
    halted: Mapping[str, int],
    stuck: Collection[str],
    source_head: int | None,
    new_primary_event_id: int | None = None,
) -> Cut:
    """The cut from each database's ``repl.last.id`` (``applied``), the consumed id, the halted
    databases (db -> halted event id) and those with held events (``stuck``).

    A database that is neither halted nor holding events is replicated through everything the job
    consumed; the cut is the smallest such point, so "the new primary equals the source after event
    ``cut``" holds for every database. With nothing replicated the cut is the consumed id.
    """
    through = replicated_through(applied, consumed_event_id, set(stuck) | set(halted))
    dbs = tuple(
        DatabaseCut(db, applied[db], through[db], halted.get(db)) for db in sorted(applied)
    )
    event_id = min(through.values()) if through else consumed_event_id
    return Cut(event_id, source_head, consumed_event_id, dbs, new_primary_event_id)


# --- failover.json ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailoverRecord:
    state: str  # "pending" (job fenced, cut not yet taken) or "done"
    started: str
    completed: str | None = None
    cut: Cut | None = None
    changed: tuple[str, ...] = ()  # databases whose replica marks this failover removed
    source_ids: tuple[str, ...] = ()  # their streamer.source.id (empty in records of older releases)

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state, "started": self.started, "completed": self.completed,
            "cut": self.cut.to_json() if self.cut else None, "changed": list(self.changed),
            "source_ids": list(self.source_ids),
        }


def read_record(state_dir: str | Path) -> FailoverRecord | None:
    """The failover recorded in the state dir (None: never failed over); ``StateFileError`` when
    ``failover.json`` is of the wrong shape."""
    path = Path(state_dir) / FAILOVER_FILE
    raw = read_json(path)
    if raw is None:
        return None
    body = expect_object(raw, path, "the record")
    try:
        cut_raw = body.get("cut")
        cut = Cut.from_json(expect_object(cut_raw, path, "'cut'")) if cut_raw else None
        return FailoverRecord(
            expect_str(field(body, "state", path, "the record"), path, "state"),
            expect_str(field(body, "started", path, "the record"), path, "started"),
            expect_opt_str(body.get("completed"), path, "completed"), cut,
            tuple(expect_str(n, path, "changed[]")
                  for n in expect_list(body.get("changed", []), path, "changed")),
            tuple(expect_str(n, path, "source_ids[]")
                  for n in expect_list(body.get("source_ids", []), path, "source_ids")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StateFileError(f"state file {path} is malformed: {type(exc).__name__}: {exc}") from exc


def write_record(state_dir: str | Path, record: FailoverRecord) -> None:
    """Replace ``failover.json`` atomically, under the state dir's lock."""
    with state_lock(state_dir):
        write_json(Path(state_dir) / FAILOVER_FILE, record.to_json())


def refuse_if_failed_over(state_dir: str | Path) -> None:
    """Raise ``FailedOverError`` when this target was (or is being) failed over."""
    record = read_record(state_dir)
    if record is None:
        return
    at = f" at source event {record.cut.event_id}" if record.cut else ""
    raise FailedOverError(
        f"this target was failed over{at} ({FAILOVER_FILE} in its state dir, {record.state} since "
        f"{record.started}); it is a primary now and no target job applies to it: fail back first "
        "(docs/failover.md)"
    )


# --- the job lock -------------------------------------------------------------------------------


class JobLock:
    """An exclusive ``flock`` on ``<state-dir>/job.lock``: held by a running target job, taken by a
    failover before it reads the cut (so no batch is applied while the cut is taken)."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / LOCK_FILE
        self._fh: IO[str] | None = None

    def acquire(self, timeout: float = 0.0) -> bool:
        """Take the lock, waiting up to ``timeout`` seconds; False when another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    fh.close()
                    return False
                time.sleep(0.2)
                continue
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()}\n")
            fh.flush()
            self._fh = fh
            return True

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()

    @contextlib.contextmanager
    def held(self, timeout: float = 0.0, what: str = "") -> Iterator[None]:
        if not self.acquire(timeout):
            raise JobRunningError(
                f"a target job holds {self.path}{what}; stop it (or wait for it to stop) and retry"
            )
        try:
            yield
        finally:
            self.release()


# --- the failover (I/O) -------------------------------------------------------------------------


def replicated_databases(catalog: Catalog, source_id: str | None) -> dict[str, dict[str, str]]:
    """Target databases replicated by streamer (from ``source_id`` when given): name -> parameters."""
    out: dict[str, dict[str, str]] = {}
    for name in sorted(catalog.list_databases()):
        db = catalog.get_database(name)
        if db is None:
            continue
        owner = db.parameters.get(REPL_SOURCE_PARAM)
        if owner is None or (source_id is not None and owner != source_id):
            continue
        out[name] = dict(db.parameters)
    return out


def promote(catalog: Catalog, names: Collection[str], cut: Cut, when: str) -> list[str]:
    """Remove the replica marks of ``names`` and record the cut on each; returns those changed."""
    through = {d.db: d.replicated_through_event_id for d in cut.databases}
    changed: list[str] = []
    for name in sorted(names):
        db = catalog.get_database(name)
        if db is None:
            continue
        params = dict(db.parameters)
        set_readonly = params.get(REPL_TARGET_PARAM) is not None and params.get(READONLY_PARAM) == "true"
        params.pop(REPL_TARGET_PARAM, None)
        if set_readonly:
            params.pop(READONLY_PARAM, None)
        params[FAILOVER_CUT_PARAM] = str(through.get(name, cut.event_id))
        params.setdefault(FAILOVER_TIME_PARAM, when)
        if params != db.parameters:
            catalog.alter_database(name, dataclasses.replace(db, parameters=params))
            changed.append(name)
    return changed


def failover(
    state_dir: str | Path,
    catalog: Catalog,
    *,
    source_id: str | None = None,
    source_head: int | None = None,
    new_primary_event_id: int | None = None,
    new_primary_head: Callable[[], int] | None = None,
    wait_seconds: float = 60.0,
) -> FailoverRecord:
    """Fence the target job, take the cut, promote the replicated databases. Idempotent.

    ``new_primary_head`` reads the new primary's notification-log head; it is called once the job
    has stopped (under its lock), so the events the job itself caused on the new primary (a
    metastore that logs its changes logs the replication's creates and alters too) are all at or
    before it, and a reverse stream started after it carries only what happened after the cut.
    """
    from streamer.target.state.state_file import TargetState
    from streamer.target.state.status import read_progress

    if read_record(state_dir) is None and not replicated_databases(catalog, source_id):
        owners = sorted({p[REPL_SOURCE_PARAM] for p in replicated_databases(catalog, None).values()})
        raise FailoverError(
            f"no database on this target is replicated from source {source_id!r} "
            f"(sources found: {', '.join(owners) or 'none'}); check --source-id"
        )
    with state_lock(state_dir):  # re-read under the lock: a concurrent failover's record is kept
        record = read_record(state_dir)
        if record is not None and record.state == "done":
            return record
        started = record.started if record is not None else _now()
        if record is None:
            write_record(state_dir, FailoverRecord("pending", started))
    # the job takes the state lock to finish a batch: wait for it to stop without holding that lock
    with JobLock(state_dir).held(wait_seconds, f" after {wait_seconds:.0f} s"):
        if new_primary_head is not None:
            new_primary_event_id = new_primary_head()
        dbs = replicated_databases(catalog, source_id)
        with state_lock(state_dir):
            record = read_record(state_dir)
            if record is not None and record.cut is not None:
                cut = record.cut  # an interrupted failover keeps the cut it took first
            else:
                state = TargetState(state_dir)
                halts = {h.db: h.event_id for h in state.halts().values()}
                refuse_fenced(state_dir, dbs, halts)
                _, consumed = read_progress(state_dir)
                applied = {name: int(p.get(LAST_ID_PARAM, "0") or 0) for name, p in dbs.items()}
                cut = compute_cut(applied, consumed, halts, set(state.pending_replays()), source_head,
                                  new_primary_event_id)
                write_record(state_dir, FailoverRecord("pending", started, cut=cut))
        changed = promote(catalog, dbs, cut, started)
        sources = tuple(sorted({p[REPL_SOURCE_PARAM] for p in dbs.values()}))
        done = FailoverRecord("done", started, _now(), cut, tuple(changed), sources)
        write_record(state_dir, done)
    return done


def refuse_fenced(
    state_dir: str | Path, dbs: Mapping[str, Mapping[str, str]], halted: Collection[str]
) -> None:
    """Refuse (``FailoverError``) while a database carries the apply fence: a batch applying it out
    of event-id order did not finish, so its tables may show a state the source never had, and no
    cut describes it. Called before the cut is taken: the pending record is removed (nothing was
    changed), so a restarted target job can finish the batch, which removes the fence."""
    fenced = {name: params[FENCE_PARAM] for name, params in sorted(dbs.items()) if FENCE_PARAM in params}
    if not fenced:
        return
    (Path(state_dir) / FAILOVER_FILE).unlink(missing_ok=True)
    found = "; ".join(
        f"database {name} carries {FENCE_PARAM}={value} (a micro-batch from event {value} applied it out "
        "of event-id order and did not finish" + (", and the database is halted" if name in halted else "")
        + ")"
        for name, value in fenced.items()
    )
    stuck = sorted(set(fenced) & set(halted))
    retries = ", ".join(f"`streamer target retry --db {name}`" for name in stuck)
    retry = f"retry the halted database{'s' if len(stuck) > 1 else ''} ({retries}), then " if stuck else ""
    raise FailoverError(
        f"cannot fail over: {found}: its tables may show a state the source never had. "
        f"Nothing was changed; {retry}restart the target job so the batch finishes (that removes the "
        "fence), then fail over again"
    )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
