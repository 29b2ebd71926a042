"""INSERTs that do not say which files they wrote, resolved into a listing of the object's directory.

Hive 2.3's clients (Spark SQL with Hive support among them: ``Hive.loadTable``, ``loadPartition``,
``loadDynamicPartitions``) log every INSERT OVERWRITE (of a table, of a static partition, of each
partition of a dynamic-partition overwrite) as an INSERT without files and without ``replace``:
``InsertEventRequestData`` has no ``replace`` field, and ``Hive.replaceFiles`` hands
``fireInsertEvent`` no list of the files it moved in. Read as it stands such an event is an empty
append, and a replica would keep the old rows. An INSERT that wrote no rows looks the same, so the
event cannot tell them apart; the directory can. The agent therefore publishes every INSERT without
files as a replace whose files are the object's visible files when it publishes
(``streamer.source.listing``); enrichment checksums them and targets apply the event as any INSERT
OVERWRITE, in one directory swap. A replica then shows the object as it was when the agent published
it: possibly newer than the event, but a state the source had (docs/features.md, "Writers").

The object is located through the metastore: its table and partition as they are now, asked over
Thrift (``--hms-uri``) or read from the tables of the metastore database the log is read from
(``--notification-db``: ``streamer.source.sql_locator``). Their snapshots also go into INSERTs that
carry files but no snapshots (Hive 2.3's never do), so a target knows where the event's files may be
read from; when the partition is gone by then, its table's snapshot alone (a target reads the
partition as part of its table's location, finds the files gone, and applies the INSERT with the
later drop), and when the table is gone too, the table as the log's events before showed it
(``streamer.source.table_memory``). Without a metastore to ask, the message's own snapshots locate
the object (Hive 3 and later carry them), else the log's. A table renamed after the event is
followed to its new name through the log (``streamer.source.renames``) and listed
there, under the event's names. An object that is gone by then (a later event dropped it), or whose
name now belongs to an object created after the event, is not listed: the event goes out as it came,
and the later events bring the replica to the source's state. An INSERT without files that still
cannot be located (no metastore to ask and no snapshot in the message; values that fit no partition
of its table) goes out marked ``unlocated``: what it wrote is unknown, and a target re-syncs its object
from the source or halts at it (``streamer.target.apply.data``), never applies it as an empty append.
Transactional tables are never listed: their data is a set of write ids, carried by ACID events.

``locate``, ``as_replace`` and ``with_snapshots`` are pure; the metastore sits behind ``Locator``, the
filesystem behind a ``Lister``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from streamer.events.model import Event, FileRef, InsertPayload, PartitionSnapshot, TableSnapshot
from streamer.hive.files import partition_name
from streamer.metastore.transport import HmsAuth
from streamer.source.listing import exists, list_files
from streamer.source.reader import SqlNotificationReader
from streamer.source.table_memory import TableMemory
from streamer.source.thrift_reader import ThriftNotificationReader

log = logging.getLogger(__name__)

Lister = Callable[[str | None, str | None], list[FileRef]]
"""(location, partition name) -> the visible files below the location (``list_files``)."""
Renamed = Callable[[int, str, str], "tuple[str, str] | None"]
"""(event id, db, table) -> the table's (db, name) now, None when dropped (``Renames.current``)."""

VIEW_TYPES = frozenset({"VIRTUAL_VIEW", "MATERIALIZED_VIEW"})


class Unknown(str):
    """Why an INSERT's object cannot be located where nothing later brings its replica to the
    source's state (no metastore to ask, values that fit no partition): the INSERT goes out marked
    ``unlocated``, never as an empty append."""


class Locator(Protocol):
    """The metastore's current objects, ``None`` for one that does not exist."""

    def table(self, db: str, name: str) -> TableSnapshot | None: ...

    def partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Located:
    """Where an INSERT's object is: its table, its partition (if it has one), their directory."""

    table: TableSnapshot
    partition: PartitionSnapshot | None
    location: str | None
    partition_name: str | None


# --- pure -----------------------------------------------------------------------------------------


def unlocated(p: InsertPayload) -> bool:
    """The message carries no snapshot to locate the INSERT's object by (Hive 2.3's never do)."""
    return p.table is None or (bool(p.partition_values) and p.partition is None)


def _created_after(event: Event, message_time: int | None, live_time: int | None) -> bool:
    """The live object is not the event's: another create time than the message's snapshot says, or
    (without one) created after the event was logged."""
    if not live_time:
        return False
    if message_time:
        return live_time != message_time
    return live_time > event.source.event_time


def locate(
    event: Event,
    p: InsertPayload,
    live_table: TableSnapshot | None,
    live_partition: PartitionSnapshot | None,
    *,
    asked: bool,
    listing: bool = True,
) -> Located | str:
    """Where the INSERT's object is now, or why that cannot be said.

    ``asked``: ``live_table`` and ``live_partition`` are the metastore's answers (``None``: there is no
    such object); otherwise the message's own snapshots are all there is. ``listing``: the object is
    to be listed (an INSERT without files), so it must still be there; an INSERT with files into a
    managed table needs only its table, to say where its files may be read from, so a partition
    dropped since leaves the partition unlocated (a target reads it as part of its table's location
    and writes it where it derives every managed partition). An external table's partition must
    be found: its own location is where a target puts its files."""
    values = list(p.partition_values)
    if asked:
        if live_table is None:
            return "its table is gone (a later event dropped it)"
        if _created_after(event, p.table.create_time if p.table else None, live_table.create_time):
            return "its table's name belongs to a table created after the event"
        table, partition = live_table, live_partition
        if values and len(values) != len(table.partition_keys):
            keys = [k.name for k in table.partition_keys]
            return Unknown(f"partition values {values} do not match the table's keys {keys}")
        if values:
            if live_partition is None and (listing or not _own_partitions(table)):
                return f"its partition {values} is gone (a later event dropped it)"
            made = p.partition.create_time if p.partition else None
            if live_partition is not None and _created_after(event, made, live_partition.create_time):
                return f"its partition {values} was created again after the event"
    else:
        if p.table is None:
            return Unknown("the event carries no table snapshot and the agent has no metastore to ask "
                           "(--hms-uri, --notification-db)")
        table, partition = p.table, p.partition if values else None
    keys = [k.name for k in table.partition_keys]
    name = partition_name(keys, values) if values and len(keys) == len(values) else None
    if values and name is None:
        return Unknown(f"partition values {values} do not match the table's keys {keys}")
    location = partition.sd.location if partition is not None else None
    if not location and table.sd.location:
        location = table.sd.location.rstrip("/") + (f"/{name}" if name else "")
    return Located(table, partition, location, name)


def _own_partitions(table: TableSnapshot) -> bool:
    """A managed table: a target derives its partitions' directories, whatever the source's were."""
    return table.table_type not in ("EXTERNAL_TABLE", *VIEW_TYPES)


def as_replace(event: Event, found: Located, files: list[FileRef]) -> Event:
    """The INSERT as a replace of its object's files by ``files`` (a listing of ``found.location``),
    with the snapshots the listing was located by; sizes are left for enrichment to read after the
    checksum, so both describe one content."""
    p = event.payload
    assert isinstance(p, InsertPayload)
    listed = [dataclasses.replace(f, size=None, partition=found.partition_name) for f in files]
    partition = found.partition if p.partition_values else None
    payload = dataclasses.replace(p, table=found.table, partition=partition, replace=True,
                                  files=sorted(listed, key=lambda f: f.uri))
    return dataclasses.replace(event, payload=payload)


def with_snapshots(event: Event, found: Located) -> Event:
    """The INSERT with the snapshots its message lacks (its files stay the event's)."""
    p = event.payload
    assert isinstance(p, InsertPayload)
    table = p.table or found.table
    partition = p.partition or (found.partition if p.partition_values else None)
    if table is p.table and partition is p.partition:
        return event
    return dataclasses.replace(event, payload=dataclasses.replace(p, table=table, partition=partition))


def drop_vanished(event: Event) -> Event:
    """A listed INSERT without the files that were gone before enrichment could read them (a later
    write removed them: they are no part of the object's state any more)."""
    p = event.payload
    if not isinstance(p, InsertPayload) or all(f.checksum for f in p.files):
        return event
    kept = [f for f in p.files if f.checksum]
    return dataclasses.replace(event, payload=dataclasses.replace(p, files=kept))


# --- the metastore and the filesystem -------------------------------------------------------------


class HmsLocator:
    """``Locator`` over a metastore's Thrift API, connected on first use."""

    def __init__(self, uri: str, *, timeout_s: float = 60.0, auth: HmsAuth | None = None) -> None:
        self.uri = uri
        self.timeout_s = timeout_s
        self.auth = auth
        self._catalog: Any = None

    def _hms(self) -> Any:
        if self._catalog is None:
            from streamer.metastore.thrift import HmsCatalog

            self._catalog = HmsCatalog(self.uri, timeout_s=self.timeout_s, auth=self.auth)
        return self._catalog

    def table(self, db: str, name: str) -> TableSnapshot | None:
        found: TableSnapshot | None = self._hms().get_table(db, name)
        return found

    def partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None:
        found: PartitionSnapshot | None = self._hms().get_partition(db, table, values)
        return found

    def close(self) -> None:
        if self._catalog is not None:
            try:
                self._catalog.close()
            finally:
                self._catalog = None


def locator_for(reader: object) -> Locator | None:
    """The metastore a reader reads through: its Thrift API (``--hms-uri``), or the tables of the
    database it reads the log from (``--notification-db``: ``streamer.source.sql_locator``); None for
    any other reader (the messages' own snapshots are all the agent has)."""
    if isinstance(reader, ThriftNotificationReader):
        return HmsLocator(reader.uri, timeout_s=reader.timeout_seconds, auth=reader.auth)
    if isinstance(reader, SqlNotificationReader):
        from streamer.source.sql_locator import SqlLocator

        return SqlLocator(reader.url)
    return None


class InsertResolver:
    """Resolves INSERTs without files into listings (``as_replace``) and fills in the snapshots of
    INSERTs that carry none (``with_snapshots``); every other event passes unchanged."""

    def __init__(self, locator: Locator | None, lister: Lister = list_files,
                 exists: Callable[[str], bool] = exists, renames: Renamed | None = None) -> None:
        """``renames``: the name a table has now, given an event id and its name then (None: dropped;
        ``streamer.source.renames``), to list a table renamed after the event under its new name."""
        self.locator = locator
        self.lister = lister
        self.exists = exists
        self.renames = renames
        self.logged = TableMemory()  # the tables as the log's events before this one had them

    def __call__(self, event: Event) -> tuple[Event, bool]:
        """The event to publish, and whether its files are a listing made now."""
        p = event.payload
        if not isinstance(p, InsertPayload):
            self.logged.see(event)
            return event, False
        if p.files and not unlocated(p):
            return event, False
        found = self._locate(event, p) if self.locator is not None or not p.files else "no metastore to ask"
        if isinstance(found, str):
            if p.files:  # a table gone (or made again) since: as the log had it at the event
                return self._as_logged(event, p), False
            return self._not_listed(event, p, found), False
        if p.files:
            return with_snapshots(event, found), False
        if found.table.is_transactional or found.table.table_type in VIEW_TYPES:
            return event, False
        listing = self.lister(found.location, found.partition_name)
        if not listing and not self._holds_nothing(event, p, found):
            return self._not_listed(event, p, f"its directory {found.location} is gone"), False
        log.debug("event %d: INSERT without files into %s listed at %s: %d files", event.event_id,
                  found.table.qualified_name, found.location, len(listing))
        return as_replace(event, found, listing), True

    def _locate(self, event: Event, p: InsertPayload) -> Located | str:
        if self.locator is None:
            return locate(event, p, None, None, asked=False)
        db = p.table.db if p.table else event.db or ""
        name = p.table.name if p.table else event.table or ""
        now = (db, name)
        table = self.locator.table(db, name)
        stale = table is None or _created_after(event, p.table.create_time if p.table else None,
                                                table.create_time)
        if stale and not p.files and self.renames is not None:  # renamed away (another may have its name)
            now = self.renames(event.event_id, db, name) or now
            table = self.locator.table(*now) if now != (db, name) else table
        values = list(p.partition_values)
        partition = self.locator.partition(*now, values) if table is not None and values else None
        if now != (db, name):  # renamed after the event: its files under the new name, the event's names
            table = dataclasses.replace(table, db=db, name=name) if table else None
            partition = dataclasses.replace(partition, db=db, table=name) if partition else None
        return locate(event, p, table, partition, asked=True, listing=not p.files)

    def _as_logged(self, event: Event, p: InsertPayload) -> Event:
        """An INSERT with files and no table snapshot, given the table the log's events before it
        last showed under its name (``TableMemory``): where its files may be read from, for a target
        (into a partition: only for a managed table, as ``locate`` says)."""
        table = p.table or self.logged.get(event.db or "", event.table or "", before=event.event_id)
        if table is None or table is p.table or (p.partition_values and not _own_partitions(table)):
            return event
        return with_snapshots(event, Located(table, None, None, None))

    def _holds_nothing(self, event: Event, p: InsertPayload, found: Located) -> bool:
        """An empty listing is the object's state (an empty replace) when its directory exists, or
        when the metastore, asked again, still has the object where it was (it holds no rows). A
        directory gone with its object (a later drop or rename) says nothing of the object's state."""
        if found.location and self.exists(found.location):
            return True
        if self.locator is None:
            return False
        again = self._locate(event, p)
        return isinstance(again, Located) and again.location == found.location

    def _not_listed(self, event: Event, p: InsertPayload, why: str) -> Event:
        """The INSERT as it came when a later event brings its object's replica to the source's state
        (a drop, a create again); else marked ``unlocated``: a target re-syncs its object or halts."""
        obj = ".".join(n for n in (event.db, event.table) if n)
        if isinstance(why, Unknown):
            log.warning("event %d: INSERT without files into %s cannot be located: %s; published marked "
                        "unlocated: a target re-syncs the object from the source or halts at it",
                        event.event_id, obj, why)
            return dataclasses.replace(event, payload=dataclasses.replace(p, unlocated=True))
        log.info("event %d: INSERT without files into %s not listed: %s; the later events bring "
                 "its replica to the source's state", event.event_id, obj, why)
        return event

    def close(self) -> None:
        if self.locator is not None:
            self.locator.close()
