"""The target's small durable state: halted databases, operator skips, progress kept off the catalog.

A database whose event cannot be applied halts here while other databases go on (``retry`` clears a
halt, ``skip`` passes exactly the halted event); the transaction pseudo-database's progress and
dropped databases' last ids live here too. One JSON file, replaced atomically. See
docs/design/consistency.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from streamer import metrics
from streamer.errors import StreamerError

STATE_FILE = "target-state.json"


class StateError(StreamerError):
    """The state file is unreadable, or an operator command does not match the recorded halt."""


@dataclass(frozen=True)
class Halt:
    db: str
    event_id: int
    event_type: str | None
    object: str | None
    cause: str
    time: str  # ISO-8601, UTC
    offset: int | None = None  # Kafka offset of the halted event: held events are re-read from here


@dataclass(frozen=True)
class Skip:
    db: str
    event_id: int
    time: str


class TargetState:
    """Halts, skips and off-catalog progress of one target, in ``<state_dir>/target-state.json``."""

    def __init__(self, state_dir: str | Path) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / STATE_FILE
        self._lock = threading.Lock()
        self._halts: dict[str, Halt] = {}
        self._skips: list[Skip] = []
        self._applied: dict[str, int] = {}
        self._replay_from: dict[str, int] = {}
        self._load()
        for db in self._halts:
            metrics.TARGET_HALTED.labels(db=db).set(1)

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

    # --- changing -------------------------------------------------------------------------
    def set_offset(self, db: str, offset: int) -> None:
        """Remember where in the topic the halted event of ``db`` is, so nothing held is lost."""
        with self._lock:
            halt = self._halts.get(db)
            if halt is None or halt.offset == offset:
                return
            self._halts[db] = replace(halt, offset=offset)
            self._save()

    def replay_done(self, db: str) -> None:
        """The held events of ``db`` were re-read and applied (or held again)."""
        with self._lock:
            if self._replay_from.pop(db, None) is not None:
                self._save()

    def halt(
        self, db: str, event_id: int, cause: str, *, event_type: str | None = None, obj: str | None = None
    ) -> Halt:
        """Halt ``db`` at ``event_id``; an existing halt is kept (the stream stopped at the first one)."""
        with self._lock:
            current = self._halts.get(db)
            if current is not None:
                return current
            halt = Halt(db, event_id, event_type, obj, cause, _now())
            self._halts[db] = halt
            self._save()
        metrics.TARGET_HALTED.labels(db=db).set(1)
        return halt

    def retry(self, db: str) -> Halt | None:
        """Clear the halt of ``db`` so the job applies its held events again, from the halted one."""
        with self._lock:
            halt = self._halts.pop(db, None)
            if halt is not None:
                if halt.offset is not None:
                    self._replay_from[db] = halt.offset
                self._save()
        metrics.TARGET_HALTED.labels(db=db).set(0)
        return halt

    def skip(self, db: str, event_id: int) -> Skip:
        """Pass exactly the halted event: progress of ``db`` becomes ``event_id`` and the halt clears."""
        with self._lock:
            halt = self._halts.get(db)
            if halt is None:
                raise StateError(f"database {db!r} is not halted; only a halted event can be skipped")
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
            self._save()
        metrics.TARGET_HALTED.labels(db=db).set(0)
        return skip

    def record_applied(self, db: str, event_id: int) -> None:
        """Keep progress of a database that has no catalog entry to hold it; never goes backwards."""
        with self._lock:
            if self._applied.get(db, -1) >= event_id:
                return
            self._applied[db] = event_id
            self._save()

    # --- file -----------------------------------------------------------------------------
    def _load(self) -> None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise StateError(f"cannot read target state {self.path}: {exc}") from exc
        try:
            self._halts = {h["db"]: Halt(**h) for h in raw.get("halts", [])}
            self._skips = [Skip(**s) for s in raw.get("skips", [])]
            self._applied = {str(k): int(v) for k, v in raw.get("applied", {}).items()}
            self._replay_from = {str(k): int(v) for k, v in raw.get("replay_from", {}).items()}
        except (TypeError, KeyError, ValueError) as exc:
            raise StateError(f"target state {self.path} is malformed: {exc}") from exc

    def _save(self) -> None:
        body = {
            "halts": [asdict(h) for h in sorted(self._halts.values(), key=lambda h: h.db)],
            "skips": [asdict(s) for s in self._skips],
            "applied": dict(sorted(self._applied.items())),
            "replay_from": dict(sorted(self._replay_from.items())),
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{STATE_FILE}.", dir=self.dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(body, fh, indent=2, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
