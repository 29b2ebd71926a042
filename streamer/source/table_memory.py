"""The tables the agent last saw in the log, by name: where an INSERT that carries no snapshot (Hive
2.3's never do) was written, when the metastore no longer has its table. Pure.

A table dropped right after a write (``INSERT INTO t ...; DROP TABLE t`` faster than the agent
reads) is gone from the metastore when the agent enriches the INSERT, but the log's CREATE_TABLE and
ALTER_TABLE events before it carry the table as it was at that point, which is the event's own
state. Bounded: the most recently seen ``capacity`` tables; one evicted or never seen (the agent
started after its last change) is simply not known, and so is one last seen at or after the event
asking (the agent re-reading the log after a failed publish has seen later events already).
"""

from __future__ import annotations

from collections import OrderedDict

from streamer.events.model import (
    AlterTablePayload,
    CreateTablePayload,
    DropTablePayload,
    Event,
    TableSnapshot,
)

TableKey = tuple[str, str]  # (database, table), lower case


class TableMemory:
    """The latest snapshot of each table the log's table events named, as they pass in log order."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._tables: OrderedDict[TableKey, tuple[int, TableSnapshot]] = OrderedDict()

    def see(self, event: Event) -> None:
        """Take what ``event`` says of a table: created or altered (renamed: under its new name), dropped."""
        p = event.payload
        if isinstance(p, CreateTablePayload):
            self._put(event.event_id, p.table)
        elif isinstance(p, AlterTablePayload):
            if p.is_rename:
                self._tables.pop(_key(p.before), None)
            self._put(event.event_id, p.after)
        elif isinstance(p, DropTablePayload) and event.db and event.table:
            self._tables.pop((event.db.lower(), event.table.lower()), None)

    def get(self, db: str, name: str, *, before: int | None = None) -> TableSnapshot | None:
        """The table last seen under that name, if seen before event ``before``."""
        seen = self._tables.get((db.lower(), name.lower()))
        if seen is None or (before is not None and seen[0] >= before):
            return None
        return seen[1]

    def _put(self, event_id: int, table: TableSnapshot) -> None:
        key = _key(table)
        self._tables[key] = (event_id, table)
        self._tables.move_to_end(key)
        while len(self._tables) > self.capacity:
            self._tables.popitem(last=False)


def _key(table: TableSnapshot) -> TableKey:
    return (table.db.lower(), table.name.lower())
