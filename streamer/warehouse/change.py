"""One open change of the warehouse: its SQL transaction, its events, and the file work to undo or
finish (see ``docs/design/warehouse.md``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamer.events.model import AcidWrite, Column, Event, EventType, Payload, Source
from streamer.hive.encode import encode_event, encode_txn_write
from streamer.warehouse.files import ChangeManager, remove_files, write_parquet
from streamer.warehouse.layout import remove_empty_dirs
from streamer.warehouse.objects import CATALOG
from streamer.warehouse.store import Store, Tx

log = logging.getLogger(__name__)

Row = Mapping[str, object]


@dataclass
class Change:
    """An open change: its SQL transaction, its clock reading, and file work to undo or finish."""

    tx: Tx
    now: int
    cm: ChangeManager
    source_id: str
    message_format: str
    undo: list[Callable[[], None]] = field(default_factory=list)
    after_commit: list[Callable[[], None]] = field(default_factory=list)

    def ex(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self.tx.execute(sql, params)

    def emit(self, event_type: EventType, payload: Payload, db: str | None, table: str | None = None) -> int:
        """Encode one event and append its ``NOTIFICATION_LOG`` row inside this transaction."""
        event_id = self.tx.take_event_id()
        source = Source(self.source_id, event_id, self.now, self.message_format, CATALOG)
        event = Event(source=source, event_type=event_type, payload=payload, db=db, table=table)
        self.tx.append_notification(encode_event(event, self.message_format), event_id)
        return event_id

    def record_txn_write(self, txn: int, written: AcidWrite) -> None:
        """Record an ACID write of ``txn`` in ``TXN_WRITE_NOTIFICATION_LOG`` inside this transaction."""
        self.tx.merge_txn_write(encode_txn_write(txn, written, self.now))

    def retire(self, paths: Sequence[Path]) -> None:
        """Files this change deletes: retained in cmroot now, removed once the change committed."""
        self.cm.retain(paths)
        self.after_commit.append(lambda: remove_files(paths))

    def write(
        self,
        directory: Path,
        columns: Sequence[Column],
        rows: Sequence[Row],
        n_files: int,
        file_name: Callable[[int], str] | None = None,
    ) -> list[Path]:
        self.mkdir(directory)  # undone after the files: undo runs in reverse
        paths = write_parquet(directory, columns, rows, n_files, file_name=file_name) if rows else []
        self.undo.append(lambda: remove_files(paths))
        return paths

    def mkdir(self, directory: Path) -> None:
        if not directory.exists():
            directory.mkdir(parents=True)
            self.undo.append(lambda: remove_empty_dirs(directory))


@contextmanager
def open_change(
    store: Store, cm: ChangeManager, source_id: str, message_format: str, clock: Callable[[], float]
) -> Iterator[Change]:
    """One change: committed with its events if the block succeeds; otherwise nothing is committed,
    no event id is used, and its new files are removed. Retired files go once it committed."""
    change: Change | None = None
    try:
        with store.change() as tx:
            change = Change(tx, int(clock()), cm, source_id, message_format)
            yield change
    except BaseException:
        for fn in reversed(change.undo if change else []):
            try:
                fn()
            except OSError:
                log.warning("could not undo a file change after a failed operation", exc_info=True)
        raise
    for fn in change.after_commit:
        fn()
