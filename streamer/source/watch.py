"""Tables whose writers log nothing, watched by the agent and published as replaces of their directories.

Spark writes a datasource table (``CREATE TABLE ... USING parquet``) and, under its defaults
(``spark.sql.hive.convertMetastoreParquet/Orc=true``), a Hive Parquet/ORC table it created, with its
own writer: the metastore logs no INSERT for an append or an overwrite (only a new partition, as
ADD_PARTITION). The agent therefore watches such tables (``watch_reason``): every ``--watch-seconds``
it lists each watched directory (an unpartitioned table's, each partition's: file names, sizes and
modification times), and for every directory whose listing changed since it last published one it
checksums the files it had not checksummed at that size and time (``enrich.enrich_ref``, the code
that checksums an INSERT's files) and publishes an INSERT OVERWRITE of the directory by that listing
(``InsertPayload.watch``), in the topic's event order: right after the last event it published, with
that event's id. Targets apply it as any INSERT OVERWRITE, verifying each file against the record's
checksum, in one directory swap; none lists or hashes the source itself.

What a replica shows: a state the directory had when the agent listed it (docs/features.md,
"Writers"). A listing is published only when it fits the event position it goes out at: the agent
lists, reads the log's head, publishes the log up to that head, and keeps a table's listings only
when none of the events it published meanwhile names the table (a drop, a rename, a new partition,
an ALTER); otherwise it lists the table again in the next cycle, with the metastore's view of it
refreshed. A file that vanishes between listing and checksum (a write in progress) leaves its
directory for the next cycle too. The agent keeps what it published in memory only: after a start it
publishes every watched directory once (targets copy only the files they lack).

Which tables: found through the metastore's Thrift API (``--hms-uri``) at the first cycle, then kept
current from the log's own events (a table or database an event names is read again). Without a
Thrift metastore (``--notification-db`` alone) nothing is watched, and the agent says so at start.

``watch_reason``, ``signature`` and ``watch_event`` are pure; the metastore sits behind
``WatchCatalog``, the filesystem behind a ``Lister``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from streamer import metrics
from streamer.events.model import (
    Event,
    EventType,
    FileRef,
    InsertPayload,
    PartitionSnapshot,
    Source,
    TableSnapshot,
)
from streamer.hive.files import partition_name
from streamer.hive.notification import NotificationRow
from streamer.metastore.transport import HmsAuth
from streamer.source.enrich import EnrichSettings, FileInspector, FsspecInspector, enrich_ref
from streamer.source.listing import list_entries
from streamer.source.policy import PolicySet

log = logging.getLogger(__name__)

WATCH_SECONDS = 5.0
"""``source run --watch-seconds``' default: the longest a watched directory's change waits to be listed."""
PROVIDER_PARAM = "spark.sql.sources.provider"
SPARK_CREATED_PARAM = "spark.sql.create.version"
SPARK_SCHEMA_PREFIX = "spark.sql.sources.schema"  # the schema Spark keeps in a table it created
_CONVERTED_FORMATS = ("parquet", "orc")

Entry = tuple[FileRef, object]
"""A listed file and its modification time as its filesystem reports it (``listing.list_entries``)."""
Lister = Callable[[str | None, str | None], list[Entry]]
Signature = tuple[tuple[str, int | None, str], ...]
TableKey = tuple[str, str]


class WatchCatalog(Protocol):
    """The metastore calls watching needs (``streamer.metastore.thrift.HmsCatalog`` has them)."""

    def list_databases(self) -> list[str]: ...

    def list_tables(self, db: str) -> list[str]: ...

    def get_tables(self, db: str, names: list[str]) -> list[TableSnapshot]: ...

    def list_partitions(self, db: str, table: str) -> list[PartitionSnapshot]: ...

    def close(self) -> None: ...


# --- pure -----------------------------------------------------------------------------------------


def watch_reason(table: TableSnapshot) -> str | None:
    """Why the agent watches ``table`` (its writers log no INSERT), or None. Managed tables only:
    external tables are mirrored by a target's external sync, views hold no data, and transactional
    tables log every write (ACID events)."""
    if table.table_type != "MANAGED_TABLE" or table.is_transactional:
        return None
    provider = table.parameters.get(PROVIDER_PARAM, "")
    if provider and provider.lower() != "hive":
        return f"a Spark datasource table (USING {provider})"
    text = " ".join(x or "" for x in (table.sd.input_format, table.sd.serde.serialization_lib)).lower()
    fmt = next((f for f in _CONVERTED_FORMATS if f in text), None)
    spark_made = SPARK_CREATED_PARAM in table.parameters or any(
        k.startswith(SPARK_SCHEMA_PREFIX) for k in table.parameters)
    if fmt is not None and spark_made:
        return f"a Hive {fmt} table Spark created (written logging no INSERT under its conversion)"
    return None


def signature(entries: Iterable[Entry]) -> Signature:
    """What a directory's listing is compared by: each file's URI, size and modification time."""
    return tuple(sorted((ref.uri, ref.size, repr(mtime)) for ref, mtime in entries))


@dataclass(frozen=True)
class Dir:
    """A watched directory: an unpartitioned table's, or one partition's (``partition``)."""

    table: TableSnapshot
    partition: PartitionSnapshot | None
    location: str
    name: str | None  # the partition's name (``dt=1``), None for a table

    @property
    def key(self) -> tuple[str, str, tuple[str, ...]]:
        values = tuple(self.partition.values) if self.partition is not None else ()
        return (self.table.db.lower(), self.table.name.lower(), values)

    @property
    def shown(self) -> str:
        return self.table.qualified_name + (f" partition {self.name}" if self.name else "")


def dirs_of(table: TableSnapshot, partitions: list[PartitionSnapshot]) -> list[Dir]:
    """The directories of a watched table: its own, or each partition's (its location, else the
    table's location and the partition's name)."""
    base = table.sd.location or table.sd.serde.parameters.get("path")
    if not table.partition_keys:
        return [Dir(table, None, base, None)] if base else []
    keys = [k.name for k in table.partition_keys]
    out = []
    for p in partitions:
        name = partition_name(keys, list(p.values))
        location = p.sd.location or (base.rstrip("/") + "/" + name if base else None)
        if location:
            out.append(Dir(table, p, location, name))
    return out


def watch_event(found: Dir, files: list[FileRef], *, source_id: str, after: int, number: int,
                event_time: int, ts_ms: int) -> Event:
    """The replace of ``found``'s directory by ``files`` (checksummed), published after event ``after``."""
    payload = InsertPayload(
        table=found.table, partition=found.partition,
        partition_values=list(found.partition.values) if found.partition is not None else [],
        replace=True, files=sorted(files, key=lambda f: f.uri), watch=number,
    )
    return Event(Source(source_id, after, event_time), EventType.INSERT, payload, db=found.table.db,
                 table=found.table.name, ts_ms=ts_ms)


@dataclass(frozen=True)
class Change:
    """A watched directory whose listing differs from the one last published."""

    dir: Dir
    entries: list[Entry]
    signature: Signature


# --- the metastore and the filesystem -------------------------------------------------------------


class HmsWatchCatalog:
    """``WatchCatalog`` over a metastore's Thrift API, connected on first use."""

    def __init__(self, uri: str, *, timeout_s: float = 60.0, auth: HmsAuth | None = None) -> None:
        self.uri, self.timeout_s, self.auth = uri, timeout_s, auth
        self._catalog: Any = None

    def _hms(self) -> Any:
        if self._catalog is None:
            from streamer.metastore.thrift import HmsCatalog

            self._catalog = HmsCatalog(self.uri, timeout_s=self.timeout_s, auth=self.auth)
        return self._catalog

    def list_databases(self) -> list[str]:
        return list(self._hms().list_databases())

    def list_tables(self, db: str) -> list[str]:
        return list(self._hms().list_tables(db))

    def get_tables(self, db: str, names: list[str]) -> list[TableSnapshot]:
        return list(self._hms().get_tables(db, names))

    def list_partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        return list(self._hms().list_partitions(db, table))

    def close(self) -> None:
        if self._catalog is not None:
            try:
                self._catalog.close()
            finally:
                self._catalog = None


class Watcher:
    """The watched tables and what was last published of each directory; one cycle is ``scan`` (what
    changed), ``events`` (those of them checksummed, as records) and, once published, ``commit``."""

    def __init__(self, catalog: WatchCatalog, policy: PolicySet, settings: EnrichSettings, *,
                 lister: Lister = list_entries, files: FileInspector | None = None) -> None:
        self.catalog = catalog
        self.policy = policy
        self.settings = settings
        self.lister = lister
        self.files = files or FsspecInspector()
        self.tables: dict[TableKey, TableSnapshot] = {}
        self.partitions: dict[TableKey, list[PartitionSnapshot]] = {}
        self.published: dict[tuple[str, str, tuple[str, ...]], Signature] = {}
        self.checksums: dict[tuple[str, int | None, str], FileRef] = {}
        self.enumerated = False
        self.stale: set[TableKey] = set()
        self.stale_dbs: set[str] = set()
        self.touched: set[TableKey] = set()
        self.touched_dbs: set[str] = set()
        self.number = 0  # the last watch record's number (``InsertPayload.watch``)
        self.listed: set[tuple[str, int | None, str]] = set()  # every file of the last scan

    # --- the log's events ---

    def note(self, rows: Iterable[NotificationRow]) -> None:
        """Rows the agent read: the tables (databases) they name are read again from the metastore,
        and a listing of them made before they were published is not published."""
        for row in rows:
            db = (row.db_name or "").strip().lower()
            table = (row.table_name or "").strip().lower()
            if not db or db == "null":
                continue
            if table and table != "null":
                self.stale.add((db, table))
                self.touched.add((db, table))
            else:
                self.stale_dbs.add(db)
                self.touched_dbs.add(db)

    def begin(self) -> None:
        self.touched.clear()
        self.touched_dbs.clear()

    # --- one cycle ---

    def refresh(self) -> None:
        """The watched tables as the metastore has them, read again where the log named them."""
        if not self.enumerated:
            self.stale_dbs = set(self.catalog.list_databases())
            self.enumerated = True
        for db in sorted(self.stale_dbs):
            for key in [k for k in self.tables if k[0] == db.lower()]:
                self._forget(key)
            if self.policy.includes_db(db):
                names = [t for t in self.catalog.list_tables(db) if self.policy.includes_table(db, t)]
                self._read(db, names)
        self.stale_dbs.clear()
        by_db: dict[str, list[str]] = {}
        for db, name in sorted(self.stale):
            self._forget((db, name))
            if self.policy.includes_table(db, name):
                by_db.setdefault(db, []).append(name)
        for db, names in by_db.items():
            self._read(db, names)
        self.stale.clear()

    def _read(self, db: str, names: list[str]) -> None:
        for start in range(0, len(names), 100):
            for table in self.catalog.get_tables(db, names[start:start + 100]):
                if watch_reason(table) is None:
                    continue
                key = (table.db.lower(), table.name.lower())
                self.tables[key] = table
                self.partitions[key] = (self.catalog.list_partitions(table.db, table.name)
                                        if table.partition_keys else [])

    def _forget(self, key: TableKey) -> None:
        self.tables.pop(key, None)
        self.partitions.pop(key, None)

    def dirs(self) -> list[Dir]:
        out = [d for key, t in sorted(self.tables.items()) for d in dirs_of(t, self.partitions.get(key, []))]
        metrics.SOURCE_WATCHED_DIRS.set(len(out))
        return out

    def scan(self) -> list[Change]:
        """Every watched directory whose listing differs from the one last published."""
        self.refresh()
        dirs = self.dirs()
        keys = {d.key for d in dirs}
        for gone in [k for k in self.published if k not in keys]:
            del self.published[gone]  # dropped: one made again under its name is published afresh
        changes = []
        self.listed = set()
        for found in dirs:
            entries = self.lister(found.location, found.name)
            sig = signature(entries)
            self.listed.update(sig)
            if self.published.get(found.key) != sig:
                changes.append(Change(found, entries, sig))
        return changes

    def untouched(self, changes: list[Change]) -> list[Change]:
        """The changes whose table no event published since ``begin`` named (the others are listed
        again next cycle, their metastore view refreshed)."""
        kept = [c for c in changes
                if c.dir.key[:2] not in self.touched and c.dir.key[0] not in self.touched_dbs]
        if len(kept) < len(changes):
            log.debug("watch: %d listings left for the next cycle (events named their tables meanwhile)",
                      len(changes) - len(kept))
        return kept

    def checksummed(self, change: Change) -> list[FileRef] | None:
        """The listing's files with checksums (read once per URI, size and modification time); None
        when one vanished before it was read (a write in progress: listed again next cycle)."""
        out = []
        for ref, mtime in change.entries:
            key = (ref.uri, ref.size, repr(mtime))
            known = self.checksums.get(key)
            if known is None:
                done = enrich_ref(dataclasses.replace(ref, size=None), self.settings, self.files)
                if not done.checksum or done.size != ref.size:
                    log.debug("watch: %s changed or vanished while %s was read", ref.uri, change.dir.shown)
                    return None
                self.checksums[key] = known = done
            out.append(dataclasses.replace(known, partition=change.dir.name))
        return out

    def events(self, changes: list[Change], *, source_id: str, after: int, now: float
               ) -> tuple[list[Event], list[Change]]:
        """Records for the changes whose files could all be checksummed, and those changes."""
        events, ready = [], []
        for change in changes:
            files = self.checksummed(change)
            if files is None:
                continue
            self.number = max(self.number + 1, int(now * 1_000_000))  # never reused after a restart
            events.append(watch_event(change.dir, files, source_id=source_id, after=after,
                                      number=self.number, event_time=int(now), ts_ms=int(now * 1000)))
            ready.append(change)
        if len(self.checksums) > 2 * max(len(self.listed), 1000):  # files gone or rewritten since
            self.checksums = {k: v for k, v in self.checksums.items() if k in self.listed}
        return events, ready

    def commit(self, changes: list[Change]) -> None:
        """The changes are in the topic."""
        for change in changes:
            self.published[change.dir.key] = change.signature
        metrics.SOURCE_WATCH_REPLACES.inc(len(changes))

    def close(self) -> None:
        self.catalog.close()
