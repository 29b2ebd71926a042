"""The progress journal: the job's own record of each applied step while a batch defers its markers.

With markers per batch (``Applier.batch``) a database's ``repl.last.id`` is written once, after the
batch's last step of it; the journal records every step as it is applied (one appended line, in the
state dir), so a job killed mid-batch restarts after its last applied step exactly as it did when
every step wrote its marker. Lines are flushed to the OS per step (a killed process loses none);
they reach the disk (``fdatasync``) before a step changes an object that an unsynced step changed
(only there could re-applying that step after a host crash show an older state), and before the
batch's markers. Design: docs/design/apply.md ("Progress per batch").
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from streamer.target.apply.effects import ANY_OBJECT, ObjectKey

JOURNAL_FILE = "applied-journal.log"


class ProgressJournal:
    """Append-only lines, each a JSON array ``[db, event id]`` (a name's tab or newline is escaped, so
    no name forges a line); ``read`` gives the newest id per database. The file is opened without
    following a symlink (one planted in the state dir would be written through)."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / JOURNAL_FILE
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._unsynced: set[ObjectKey] = set()  # objects changed by steps not yet on disk
        self._written = False  # a line went to the OS since the last sync (else a sync makes nothing durable)

    def before_step(self, objects: Iterable[ObjectKey]) -> None:
        """Sync first when the step changes an object an unsynced step changed (or any object)."""
        keys = set(objects)
        with self._lock:
            if self._unsynced and (
                ANY_OBJECT in keys or ANY_OBJECT in self._unsynced or keys & self._unsynced
            ):
                self._sync_locked()
            self._unsynced |= keys

    def record(self, db: str, event_id: int) -> None:
        """``db``'s step through ``event_id`` is applied (flushed to the OS, not yet to the disk)."""
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = _open_no_follow(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                self._file = os.fdopen(fd, "a", encoding="utf-8")  # kept open per batch
            self._written = True  # before the write: a failed flush may still have handed part of it over
            self._file.write(json.dumps([db, event_id]) + "\n")
            self._file.flush()

    def sync(self) -> None:
        with self._lock:
            self._sync_locked()

    def _sync_locked(self) -> None:
        if self._file is not None and self._written:
            os.fdatasync(self._file.fileno())
        self._written = False
        self._unsynced.clear()

    def read(self) -> dict[str, int]:
        """Newest recorded id per database; a torn last line (no newline: a crash mid-write) is ignored."""
        try:
            with os.fdopen(_open_no_follow(self.path, os.O_RDONLY), encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return {}
        out: dict[str, int] = {}
        for line in text.split("\n")[:-1]:
            entry = _entry(line)
            if entry is not None:
                out[entry[0]] = max(out.get(entry[0], 0), entry[1])
        return out

    def clear(self) -> None:
        """Every recorded step is covered by a marker (or the state file): start empty."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            self._unsynced.clear()
            self._written = False
            if self.path.exists() or self.path.is_symlink():
                with os.fdopen(_open_no_follow(self.path, os.O_WRONLY | os.O_TRUNC), "w") as f:
                    f.flush()
                    os.fsync(f.fileno())


def _open_no_follow(path: Path, flags: int) -> int:
    """``path`` opened with ``flags``, refusing a symlink (``OSError`` ELOOP names it)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if path.is_symlink():
            raise OSError(exc.errno, f"{path} is a symlink; the state dir's files are never followed (one "
                                     "was planted: remove it and check who can write the state dir)") from exc
        raise


def _entry(line: str) -> tuple[str, int] | None:
    """One line's (db, event id); None for a torn or foreign line. Lines of versions before JSON
    (``<db>\\t<id>``) are read too, so a job upgraded mid-batch resumes where it was."""
    try:
        value = json.loads(line)
    except ValueError:
        db, sep, raw = line.rpartition("\t")
        return (db, int(raw)) if sep and raw.isdigit() else None
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and type(value[1]) is int:
        return value[0], value[1]
    return None
