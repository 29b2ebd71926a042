"""The target's small durable state: halted databases, operator skips, progress kept off the catalog.

A database whose event cannot be applied halts here while other databases go on (``retry`` clears a
halt, ``skip`` passes exactly the halted event); the transaction pseudo-database's progress and
dropped databases' last ids live here too. One JSON file, replaced atomically, changed only under
the state dir's lock (read-modify-write). See docs/design/consistency.md.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from streamer import metrics
from streamer.errors import StreamerError
from streamer.target.state.files import (
    StateFileError,
    expect_int,
    expect_list,
    expect_object,
    expect_opt_int,
    expect_opt_str,
    expect_str,
    field,
    read_json,
    write_json,
)
from streamer.target.state.lock import state_lock

STATE_FILE = "target-state.json"
# The cause of a halt in a batch applied out of event-id order (streamer.target.apply.reorder): the
# halt is at the database's first regrouped event, where the stream is re-read, not at the failed one
REGROUPED_HALT = "failed in a batch regrouped per table"
VOIDING_RUN_HALT = "failed while a voiding run was pending"


class HaltKind(StrEnum):
    """Where a halt sits relative to the event that failed."""

    EVENT = "event"  # at the failed event itself
    VOIDING_RUN = "voiding-run"  # at the start of a voiding run the failure left pending
    REGROUPED = "regrouped"  # at the first event of a batch applied out of event-id order


class StateError(StreamerError):
    """An operator command does not match the recorded halt (an unreadable file: ``StateFileError``)."""


__all__ = ["STATE_FILE", "Halt", "HaltKind", "Skip", "StateError", "StateFileError", "TargetState"]


@dataclass(frozen=True)
class Halt:
    db: str
    event_id: int
    event_type: str | None
    object: str | None
    cause: str
    time: str  # ISO-8601, UTC
    offset: int | None = None  # Kafka offset of the halted event: held events are re-read from here
    kind: HaltKind = HaltKind.EVENT
    failed_event_id: int | None = None  # the event that failed, where the halt sits elsewhere (``kind``)

    @property
    def failed(self) -> int:
        """The id of the event whose failure halted the database."""
        return self.failed_event_id if self.failed_event_id is not None else self.event_id


@dataclass(frozen=True)
class Skip:
    db: str
    event_id: int
    time: str


class TargetState:
    """Halts, skips and off-catalog progress of one target, in ``<state_dir>/target-state.json``.

    Reads answer from the copy loaded last (at construction, ``reload`` or the last change). Every
    change takes the state dir's lock (``streamer.target.state.lock``), re-reads the file, applies
    its delta and writes: a retry in another process is never undone by the job's next halt, and an
    operator's stale copy never erases the job's recorded progress.
    """

    def __init__(self, state_dir: str | Path, label: Callable[[str], str] | None = None) -> None:
        self.dir = Path(state_dir)
        # the ``db`` label of its metrics: the target's name of a source database (``--db-map``)
        self._label: Callable[[str], str] = label or (lambda db: db)
        self.path = self.dir / STATE_FILE
        self._halts: dict[str, Halt] = {}
        self._skips: list[Skip] = []
        self._applied: dict[str, int] = {}
        self._replay_from: dict[str, int] = {}
        # the job sets it per batch (event id -> Kafka offset): a halt records its offset in the same
        # change, so a retry can never find a halt that does not yet say where to re-read from
        self.offset_of: Callable[[int], int | None] | None = None
        self.reload()
        for db in self._halts:
            metrics.TARGET_HALTED.labels(db=self._label(db)).set(1)

    def reload(self) -> None:
        """Read the file again (changes other processes made)."""
        self._halts, self._skips, self._applied, self._replay_from = _parse(self.path, read_json(self.path))

    # --- reading --------------------------------------------------------------------------
    def halts(self) -> dict[str, Halt]:
        return dict(self._halts)

    def is_halted(self, db: str) -> bool:
        return db in self._halts

    def skips(self) -> list[Skip]:
        return list(self._skips)

    def applied(self) -> dict[str, int]:
        """Progress recorded here (pseudo-database, dropped databases, operator skips)."""
        return dict(self._applied)

    def pending_replays(self) -> dict[str, int]:
        """Databases released by retry/skip whose held events must be re-read from these offsets."""
        return dict(self._replay_from)

    # --- changing: each one a read-modify-write under the state dir's lock -----------------
    @contextlib.contextmanager
    def _change(self) -> Iterator[None]:
        """Hold the lock, re-read the file, let the caller change the copy, write it if it changed."""
        with state_lock(self.dir):
            self.reload()
            before = self._body()
            yield
            if self._body() != before:
                write_json(self.path, self._body())

    def set_offset(self, db: str, offset: int) -> None:
        """Remember where in the topic the halted event of ``db`` is, so nothing held is lost."""
        with self._change():
            halt = self._halts.get(db)
            if halt is not None and halt.offset != offset:
                self._halts[db] = replace(halt, offset=offset)

    def replay_done(self, db: str, offset: int | None = None) -> None:
        """The held events of ``db`` were re-read from ``offset`` and applied (or held again); a
        release recorded since (another retry, from another offset) stays pending."""
        with self._change():
            if offset is None or self._replay_from.get(db) == offset:
                self._replay_from.pop(db, None)

    def halt(
        self, db: str, event_id: int, cause: str, *, event_type: str | None = None, obj: str | None = None,
        kind: HaltKind = HaltKind.EVENT, failed_event_id: int | None = None,
    ) -> Halt:
        """Halt ``db`` at ``event_id``; an existing halt is kept (the stream stopped at the first one).
        ``kind`` and ``failed_event_id``: a halt placed before the event that failed, and that event."""
        with self._change():
            current = self._halts.get(db)
            if current is not None:
                return current
            offset = self.offset_of(event_id) if self.offset_of is not None else None
            halt = Halt(db, event_id, event_type, obj, cause, _now(), offset, kind,
                        None if failed_event_id == event_id else failed_event_id)
            self._halts[db] = halt
        metrics.TARGET_HALTED.labels(db=self._label(db)).set(1)
        return halt

    def retry(self, db: str) -> Halt | None:
        """Clear the halt of ``db`` so the job applies its held events again, from the halted one."""
        with self._change():
            halt = self._halts.pop(db, None)
            if halt is not None and halt.offset is not None:
                self._replay_from[db] = halt.offset
        metrics.TARGET_HALTED.labels(db=self._label(db)).set(0)
        return halt

    def skip(self, db: str, event_id: int) -> Skip:
        """Pass exactly the halted event: progress of ``db`` becomes ``event_id`` and the halt clears."""
        with self._change():
            halt = self._halts.get(db)
            if halt is None:
                raise StateError(f"database {db!r} is not halted; only a halted event can be skipped")
            if halt.kind is HaltKind.REGROUPED:
                raise StateError(
                    f"database {db!r} halted in a batch applied out of event-id order (its halt at event "
                    f"{halt.event_id} is where the stream is re-read, not the event that failed: "
                    f"{halt.cause}); retry it: the retry applies those events in order, and if the event "
                    "fails again the database halts at that event itself, which can then be skipped"
                )
            if halt.event_id != event_id:
                raise StateError(
                    f"database {db!r} is halted at event {halt.event_id}, not {event_id}; "
                    f"skip {halt.event_id} or retry"
                )
            skip = Skip(db, event_id, _now())
            del self._halts[db]
            if halt.offset is not None:
                self._replay_from[db] = halt.offset
            self._skips.append(skip)
            self._applied[db] = max(self._applied.get(db, 0), event_id)
        metrics.TARGET_HALTED.labels(db=self._label(db)).set(0)
        return skip

    def record_applied(self, db: str, event_id: int) -> None:
        """Keep progress of a database that has no catalog entry to hold it; never goes backwards."""
        if self._applied.get(db, -1) >= event_id:
            return  # progress only grows, so the file holds at least as much
        with self._change():
            if self._applied.get(db, -1) < event_id:
                self._applied[db] = event_id

    def _body(self) -> dict[str, Any]:
        return {
            "halts": [asdict(h) for h in sorted(self._halts.values(), key=lambda h: h.db)],
            "skips": [asdict(s) for s in self._skips],
            "applied": dict(sorted(self._applied.items())),
            "replay_from": dict(sorted(self._replay_from.items())),
        }


_Parsed = tuple[dict[str, Halt], list[Skip], dict[str, int], dict[str, int]]


def _parse(path: Path, raw: Any) -> _Parsed:
    """The file's content, or ``StateFileError`` naming what is of the wrong shape."""
    if raw is None:
        return {}, [], {}, {}
    body = expect_object(raw, path, "the file")
    halts: dict[str, Halt] = {}
    for i, item in enumerate(expect_list(body.get("halts", []), path, "'halts'")):
        what = f"halts[{i}]"
        h = expect_object(item, path, what)
        halt = Halt(
            db=expect_str(field(h, "db", path, what), path, f"{what}.db"),
            event_id=expect_int(field(h, "event_id", path, what), path, f"{what}.event_id"),
            event_type=expect_opt_str(h.get("event_type"), path, f"{what}.event_type"),
            object=expect_opt_str(h.get("object"), path, f"{what}.object"),
            cause=expect_str(field(h, "cause", path, what), path, f"{what}.cause"),
            time=expect_str(field(h, "time", path, what), path, f"{what}.time"),
            offset=expect_opt_int(h.get("offset"), path, f"{what}.offset"),
        )
        kind = expect_opt_str(h.get("kind"), path, f"{what}.kind")
        if kind is None:
            halt = _legacy(halt)
        else:
            if kind not in HaltKind.__members__.values():
                raise StateFileError(f"{path}: {what}.kind must be one of {[k.value for k in HaltKind]}, "
                                     f"not {kind!r}")
            failed = expect_opt_int(h.get("failed_event_id"), path, f"{what}.failed_event_id")
            halt = replace(halt, kind=HaltKind(kind), failed_event_id=failed)
        halts[halt.db] = halt
    skips: list[Skip] = []
    for i, item in enumerate(expect_list(body.get("skips", []), path, "'skips'")):
        what = f"skips[{i}]"
        s = expect_object(item, path, what)
        skips.append(Skip(
            db=expect_str(field(s, "db", path, what), path, f"{what}.db"),
            event_id=expect_int(field(s, "event_id", path, what), path, f"{what}.event_id"),
            time=expect_str(field(s, "time", path, what), path, f"{what}.time"),
        ))
    return halts, skips, _ids(path, body, "applied"), _ids(path, body, "replay_from")


_LEGACY_FAILED = re.compile(rf"^event (\d+) ({VOIDING_RUN_HALT}|{REGROUPED_HALT})")


def _legacy(halt: Halt) -> Halt:
    """A halt a version before structured halts wrote (no ``kind``): its kind and failed event were
    only in the cause's first words. Read once, when such a file is loaded; written back structured."""
    found = _LEGACY_FAILED.match(halt.cause)
    if found is None:
        return halt
    kind = HaltKind.REGROUPED if found.group(2) == REGROUPED_HALT else HaltKind.VOIDING_RUN
    return replace(halt, kind=kind, failed_event_id=int(found.group(1)))


def _ids(path: Path, body: Mapping[str, Any], key: str) -> dict[str, int]:
    entries = expect_object(body.get(key, {}), path, repr(key))
    return {str(k): expect_int(v, path, f"{key}[{k!r}]") for k, v in entries.items()}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
