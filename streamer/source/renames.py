"""Where a table went: its renames and its drop, read ahead in the notification log.

An INSERT without files is resolved into a listing of its table's directory when the agent publishes it
(``streamer.source.insert_files``). If the table was renamed meanwhile, the metastore no longer knows
it by the event's name, yet its rows are the ones the event must bring: published as an empty append,
the replica would be renamed with the rows it had before the event and keep them. So the agent follows
the table through the ALTER_TABLE renames logged after the event to the name it has now (or to the
DROP_TABLE that ended it).

Reading ahead is cheap in the common case (a table that is simply there is never looked for here) and
bounded otherwise: each table's fate is remembered for the following events of the same table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from streamer.events.model import AlterTablePayload, EventType
from streamer.hive.decode import decode_row
from streamer.hive.notification import NotificationRow
from streamer.source.reader import NotificationReader

log = logging.getLogger(__name__)

Name = tuple[str, str]
BATCH = 500


@dataclass(frozen=True)
class Fate:
    """What happened to a table after ``after``: renamed to ``to`` at ``event_id``, or dropped
    (``to`` is None) at ``event_id``."""

    after: int
    event_id: int
    to: Name | None


def _key(db: str | None, table: str | None) -> Name:
    return (db or "").lower(), (table or "").lower()


def fate_in(rows: list[NotificationRow], name: Name) -> tuple[int, Name | None] | None:
    """The first rename or drop of ``name`` among ``rows`` (event id, new name or None), if any."""
    for row in rows:
        if row.event_type == EventType.DROP_TABLE.value and _key(row.db_name, row.table_name) == name:
            return row.event_id, None
        if row.event_type != EventType.ALTER_TABLE.value:
            continue
        try:
            payload = decode_row(row).payload
        except Exception as exc:  # a damaged event halts the agent when it gets there, not here
            log.debug("event %d not read ahead: %s", row.event_id, exc)
            continue
        if not isinstance(payload, AlterTablePayload) or not payload.is_rename:
            continue
        if _key(payload.before.db, payload.before.name) == name:
            return row.event_id, _key(payload.after.db, payload.after.name)
    return None


class Renames:
    """``current(after, db, table)``: the name the table named ``db.table`` at event ``after`` has at
    the log's head, None if it was dropped (or is nowhere in the log after ``after``)."""

    def __init__(self, reader: NotificationReader, max_hops: int = 20) -> None:
        self.reader = reader
        self.max_hops = max_hops
        self._fates: dict[Name, Fate] = {}

    def current(self, after: int, db: str, table: str) -> Name | None:
        name: Name | None = _key(db, table)
        for _ in range(self.max_hops):
            if name is None:
                return None
            fate = self._fate(after, name)
            if fate is None:
                return name
            after, name = fate.event_id, fate.to
        return None

    def _fate(self, after: int, name: Name) -> Fate | None:
        known = self._fates.get(name)
        if known is not None and known.after <= after < known.event_id:
            return known  # nothing happened to the table between the two events
        last = after
        while rows := self.reader.read_after(last, BATCH):
            found = fate_in(rows, name)
            if found is not None:
                fate = Fate(after, found[0], found[1])
                self._fates[name] = fate
                return fate
            last = rows[-1].event_id
        return None
