"""What a handler may know of the target: its objects as the batch sees them, and how names map.

Handlers (``databases``, ``tables``, ``catalog_objects``) take a ``View`` and return effects
(``effects``); they never write. ``ApplyContext`` is the view the applier hands them (its reads go
through what the batch remembers and refuse objects this source does not own); a unit test hands them
a few dictionaries (``tests/unit/target/apply/test_decide.py``). Design: docs/design/apply.md.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from streamer.errors import ApplyError
from streamer.events.model import DatabaseSnapshot, Event, FunctionSnapshot, PartitionSnapshot, TableSnapshot
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.target.apply.paths import EXTERNAL_TYPES, VIEW_TYPES, TargetPaths
from streamer.target.state.visibility import Txn

P = TypeVar("P")


class View(Protocol):
    """Reads only: a handler given this cannot change the target."""

    @property
    def paths(self) -> TargetPaths: ...
    @property
    def source_id(self) -> str: ...
    def target_db(self, source_db: str) -> str:
        """The target database of source database ``source_db`` (``--db-map``)."""
        ...
    def replica_marks(self) -> dict[str, str]:
        """Parameters every replicated database carries."""
        ...
    def database(self, name: str) -> DatabaseSnapshot | None:
        """Target database ``name`` as it is (the door judges ownership when it is changed)."""
        ...
    def check_owned(self, name: str) -> DatabaseSnapshot | None:
        """Target database ``name``; refuses one this source does not own."""
        ...
    def known_table(self, db: str, name: str) -> TableSnapshot | None:
        """Target table ``db.name``; refuses one not created by replication from this source."""
        ...
    def existing_table(self, db: str, name: str) -> TableSnapshot | None:
        """``known_table``, always read from the catalog (not from what the batch remembers)."""
        ...
    def partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None: ...
    def function(self, db: str, name: str) -> FunctionSnapshot | None: ...
    def txn(self, txn_id: int) -> Txn | None:
        """The source's transaction ``txn_id`` as this target's visibility file has it."""
        ...
    def partitions(self, db: str, table: str) -> list[PartitionSnapshot]: ...


# --- reading events and objects ----------------------------------------------------------------
def payload_of(event: Event, kind: type[P]) -> P:
    """The event's payload, which must be a ``kind``."""
    if not isinstance(event.payload, kind):
        raise ApplyError(
            f"payload is {type(event.payload).__name__}, expected {kind.__name__}", obj=object_name(event)
        )
    return event.payload


def object_name(event: Event) -> str | None:
    """``db.table`` or ``db`` of an event, as errors and halts name it."""
    if event.db and event.table:
        return f"{event.db}.{event.table}"
    return event.db


def last_id(db: DatabaseSnapshot | None) -> int | None:
    """The database's ``repl.last.id`` (None if absent or unreadable)."""
    if db is None:
        return None
    try:
        return int(db.parameters[LAST_ID_PARAM])
    except (KeyError, ValueError):
        return None


def is_managed(table: TableSnapshot) -> bool:
    return table.table_type not in EXTERNAL_TYPES and table.table_type not in VIEW_TYPES


def table_for(
    view: View, event: Event, snap: TableSnapshot | None
) -> tuple[TableSnapshot, TableSnapshot | None]:
    """(target table, source snapshot if the event carried one); the table must exist on the target."""
    db = view.target_db(snap.db if snap else event.db or "")
    name = (snap.name if snap else event.table or "").lower()
    current = view.known_table(db, name)  # a batch reads a table once for its data events
    if current is None:
        raise ApplyError("table is missing on the target", obj=f"{db}.{name}")
    return current, snap
