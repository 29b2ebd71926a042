"""Bootstrap, source side: dump a policy's objects as of one event id and turn them into records.

``snapshot`` reads the policy's objects through a ``SourceCatalog`` and consolidates the events of that
time into them (the source state at the newest event id E1, writers never blocked); ``records`` turns
that state into bootstrap records. Publishing lives in ``streamer.source.publish_bootstrap``; the
design is in ``docs/design/source.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict, Unpack

from streamer import metrics
from streamer.errors import StreamerError
from streamer.events.model import (
    BootstrapKind,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    BootstrapScope,
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    PartitionStatistics,
    Source,
    TableSnapshot,
)
from streamer.hive.decode import decode_row, is_known_type
from streamer.hive.files import parse_partition_name, partition_name
from streamer.hive.notification import DEFAULT_CATALOG, in_catalog
from streamer.source.consolidate import Consolidated, Dump, TableDump, Values, consolidate, key
from streamer.source.enrich import Enricher, EnrichSettings, FsspecInspector, enrich_event
from streamer.source.gaps import ContiguousReader
from streamer.source.policy import Scope
from streamer.source.reader import NotificationReader

log = logging.getLogger(__name__)

VIEW_TYPES = frozenset({"VIRTUAL_VIEW", "MATERIALIZED_VIEW"})


class BootstrapError(StreamerError):
    """The dump could not be made consistent (the source kept changing the same tables)."""


class Vanished(StreamerError):
    """An object disappeared while it was being read (dropped or renamed meanwhile)."""


class SourceCatalog(Protocol):
    """Reads of the source's committed metadata a dump needs; missing objects raise ``Vanished``."""

    def current_event_id(self) -> int: ...

    def databases(self) -> list[str]: ...

    def database(self, name: str) -> DatabaseSnapshot: ...

    def tables(self, db: str) -> list[str]: ...

    def table(self, db: str, name: str) -> TableSnapshot: ...

    def partitions(self, db: str, table: str) -> list[PartitionSnapshot]: ...

    def files(self, db: str, table: str) -> list[FileRef]: ...

    def write_ids(self, db: str, table: str) -> list[int]: ...

    def functions(self, db: str) -> list[str]: ...

    def function(self, db: str, name: str) -> FunctionSnapshot: ...

    def constraints(self, db: str, table: str) -> list[Constraint]: ...

    def statistics(self, db: str, table: str) -> list[ColumnStatistic]:
        """Table-level column statistics."""
        ...

    def partition_statistics(self, db: str, table: str, partition_names: list[str]
                             ) -> dict[str, list[ColumnStatistic]]:
        """Column statistics of the named partitions, by Hive partition name (none: absent)."""
        ...


# --- reading --------------------------------------------------------------------------------------

ObjectCallback = Callable[[str, str], None]  # (kind, qualified name): called after each object read


def read_table(source: SourceCatalog, db: str, name: str) -> TableDump | None:
    """One table with partitions, files, write ids, constraints and table- and partition-level column
    statistics, and the event ids around the read (None: gone)."""
    before = source.current_event_id()
    try:
        table = source.table(db, name)
        dump = TableDump(table, read_from=before)
        if table.table_type not in VIEW_TYPES:
            dump.partitions = {tuple(p.values): p for p in source.partitions(db, name)}
            dump.add_files(source.files(db, name))
            if table.is_transactional:
                dump.write_ids = set(source.write_ids(db, name))
            for c in source.constraints(db, name):
                dump.constraints.setdefault(c.name, []).append(c)
            dump.statistics = {st.column.lower(): st for st in source.statistics(db, name)}
            if table.partition_keys and dump.partitions:
                dump.partition_statistics = _partition_statistics(source, table, list(dump.partitions))
    except Vanished:
        return None
    dump.read_to = source.current_event_id()
    return dump


def _partition_statistics(source: SourceCatalog, table: TableSnapshot, values: list[Values]
                          ) -> dict[Values, dict[str, ColumnStatistic]]:
    """Column statistics of the table's partitions, by values (partitions without any left out)."""
    keys = [k.name for k in table.partition_keys]
    by_name = {partition_name(keys, list(v)): v for v in values}
    found = source.partition_statistics(table.db, table.name, list(by_name))
    out: dict[Values, dict[str, ColumnStatistic]] = {}
    for name, stats in found.items():
        v = by_name.get(name)
        if v is None:  # spelled differently by the source: its values still say which partition
            spec = {k.lower(): x for k, x in parse_partition_name(name).items()}
            v = tuple(spec.get(k.lower(), "") for k in keys)
        if stats:
            out[v] = {st.column.lower(): st for st in stats}
    return out


def read_dump(source: SourceCatalog, scope: Scope, on_object: ObjectCallback | None = None) -> Dump:
    """Every object of ``scope``, read one after another while the source may change."""
    dump = Dump()
    tick = on_object or (lambda kind, name: None)
    for db in source.databases():
        if not scope.includes_db(db):
            continue
        try:
            dump.databases[db.lower()] = source.database(db)
            names = source.tables(db)
            functions = source.functions(db)
        except Vanished:
            continue
        tick("database", db)
        for fn in functions:
            try:
                dump.functions[key(db, fn)] = source.function(db, fn)
            except Vanished:
                continue
            tick("function", f"{db}.{fn}")
        for name in names:
            if not scope.includes_table(db, name):
                continue
            table = read_table(source, db, name)
            if table is not None:
                dump.tables[key(db, name)] = table
            tick("table", f"{db}.{name}")
    return dump


def source_events(reader: NotificationReader, source_id: str, enrich: EnrichSettings,
                  after: int, until: int, batch: int = 1000,
                  catalog_name: str = DEFAULT_CATALOG) -> Iterator[Event]:
    """Decoded, enriched events ``after < id <= until`` (contiguous, as the agent reads them).

    Events of other metastore catalogs are passed over, as the agent does. An event of a type this
    streamer does not know cannot be consolidated: it is passed over with a WARNING and counted in
    ``streamer_source_events_skipped_total`` (the dump read the objects' state from the source, which
    includes its effect when the object was read after it)."""
    contiguous = ContiguousReader(reader)
    enricher = Enricher(enrich, reader)
    last = after
    while last < until:
        rows = contiguous.read_after(last, min(batch, until - last))
        if not rows:
            return
        for row in rows:
            if not in_catalog(row, catalog_name):
                continue
            if not is_known_type(row.event_type):
                metrics.SOURCE_EVENTS_SKIPPED.inc()
                log.warning("bootstrap: event %d of unknown type %r (%s) cannot be consolidated; passed "
                            "over", row.event_id, row.event_type,
                            ".".join(n for n in (row.db_name, row.table_name) if n) or "no database")
                continue
            yield enricher(decode_row(row, source_id))
        last = rows[-1].event_id


class SettleOptions(TypedDict, total=False):
    """``settle``'s keyword arguments, which ``snapshot`` passes on."""

    enrich: EnrichSettings | None
    at_least: int
    max_rounds: int
    on_object: ObjectCallback | None
    catalog_name: str


def snapshot(
    source: SourceCatalog, reader: NotificationReader, scope: Scope, source_id: str,
    **options: Unpack[SettleOptions],
) -> Consolidated:
    """The policy's objects as of one event id E1 >= ``at_least`` (see the module docstring)."""
    start = source.current_event_id()
    dump = read_dump(source, scope, options.get("on_object"))
    return settle(source, reader, scope, source_id, start, dump, **options)


def settle(
    source: SourceCatalog,
    reader: NotificationReader,
    scope: Scope,
    source_id: str,
    start: int,
    dump: Dump,
    *,
    enrich: EnrichSettings | None = None,
    at_least: int = 0,
    max_rounds: int = 20,
    on_object: ObjectCallback | None = None,
    catalog_name: str = DEFAULT_CATALOG,
) -> Consolidated:
    """Consolidate ``dump`` (read after event ``start``) up to the newest event, re-reading torn and
    unresolved tables until the result is complete."""
    settings = enrich or EnrichSettings()
    for _ in range(max_rounds):
        until = max(source.current_event_id(), reader.head_event_id(), at_least)
        events = list(source_events(reader, source_id, settings, start, until, catalog_name=catalog_name))
        result = consolidate(dump, events, scope, until)
        if result.complete:
            log.info("bootstrap dump: %d databases, %d tables, %d functions as of event %d (read from %d)",
                     len(result.dump.databases), len(result.dump.tables), len(result.dump.functions),
                     until, start)
            return result
        log.info("re-reading %d torn and %d unresolved tables", len(result.torn), len(result.unresolved))
        for k in sorted(result.torn | result.unresolved):
            table = read_table(source, *k)
            if table is None:
                dump.tables.pop(k, None)
            else:
                dump.tables[k] = table
            if on_object is not None:
                on_object("table", ".".join(k))
    raise BootstrapError(
        f"the dump did not settle after {max_rounds} rounds: tables kept changing while being read "
        f"({sorted(result.torn | result.unresolved)[:5]}); retry when the source is quieter"
    )


# --- records ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordLimits:
    """How much one record carries: many partitions and files of one table are split across records."""

    partitions: int = 200
    files: int = 2000


def records(
    state: Consolidated,
    source_id: str,
    *,
    scope: BootstrapScope = BootstrapScope.FULL,
    drops: Sequence[TableSnapshot] = (),
    policy: str | None = None,
    event_time: int = 0,
    limits: RecordLimits = RecordLimits(),
    databases: Collection[str] | None = None,
) -> list[Event]:
    """Bootstrap records of ``state`` (and table drops, for a policy change), then the marker.

    ``databases`` get DATABASE and FUNCTION records (default: every one of a FULL bootstrap, none of
    a TABLES one, whose databases exist on the targets already)."""
    dump = state.dump
    full = databases is None and scope is BootstrapScope.FULL
    whole = set(dump.databases) if full else set(databases or ())
    items: list[tuple[BootstrapKind, str, dict[str, object]]] = []
    for dropped in drops:
        items.append((BootstrapKind.DROP_TABLE, dropped.db, {"table": dropped}))
    for db in sorted(dump.databases):
        if db in whole:
            items.append((BootstrapKind.DATABASE, db, {"database": dump.databases[db]}))
        for (fdb, _), fn in sorted(dump.functions.items(), key=lambda kv: kv[0]):
            if fdb == db and db in whole:
                items.append((BootstrapKind.FUNCTION, db, {"function": fn}))
        for (tdb, _), table in sorted(dump.tables.items(), key=lambda kv: kv[0]):
            if tdb == db:
                items.extend((kind, db, fields) for kind, fields in _table_items(table, limits))
    total = len(items)
    bid = state.event_id

    def envelope(event_type: EventType, payload: BootstrapObjectPayload | BootstrapMarkerPayload,
                 db: str | None, table: str | None = None) -> Event:
        return Event(Source(source_id, bid, event_time), event_type, payload, db=db, table=table)

    out = []
    for seq, (kind, db, fields) in enumerate(items, start=1):
        payload = BootstrapObjectPayload(bid, seq, total, kind, scope, **fields)  # type: ignore[arg-type]
        out.append(envelope(EventType.BOOTSTRAP, payload, db, payload.table.name if payload.table else None))
    databases = sorted(dump.databases) if scope is BootstrapScope.FULL else sorted({db for _, db, _ in items})
    marker = BootstrapMarkerPayload(bid, total, scope, databases, policy)
    out.append(envelope(EventType.BOOTSTRAP_END, marker, None))
    return out


def _table_items(t: TableDump, limits: RecordLimits) -> Iterator[tuple[BootstrapKind, dict[str, object]]]:
    """The TABLE record, then PARTITIONS records, each within ``limits``; each partition's column
    statistics travel with it."""
    values = sorted(t.partitions) if t.table.partition_keys else [()]
    chunk_parts: list[PartitionSnapshot] = []
    chunk_files: list[FileRef] = []
    first = True

    def emit() -> tuple[BootstrapKind, dict[str, object]]:
        fields: dict[str, object] = {
            "table": t.table, "partitions": list(chunk_parts), "files": list(chunk_files),
            "partition_statistics": [
                PartitionStatistics(list(p.values), [stats[c] for c in sorted(stats)])
                for p in chunk_parts
                if (stats := t.partition_statistics.get(tuple(p.values)))
            ],
        }
        if first:
            fields.update(
                constraints=[c for cs in t.constraints.values() for c in cs],
                statistics=list(t.statistics.values()),
                write_ids=sorted(t.write_ids),
            )
        return (BootstrapKind.TABLE if first else BootstrapKind.PARTITIONS, fields)

    for v in values:
        files = list(t.files.get(v, {}).values())
        full = len(chunk_parts) >= limits.partitions or len(chunk_files) + len(files) > limits.files
        if full and (chunk_parts or chunk_files):
            yield emit()
            first = False
            chunk_parts, chunk_files = [], []
        if v in t.partitions:
            chunk_parts.append(t.partitions[v])
        chunk_files.extend(files)
    if first or chunk_parts or chunk_files:
        yield emit()


def enrich_records(events: list[Event], settings: EnrichSettings) -> list[Event]:
    """Checksum algorithm, size and cm fallback of every file, as the agent fills them for events."""
    inspector = FsspecInspector()
    return [enrich_event(e, settings, inspector) for e in events]
