"""``streamer verify --against-source``: the replica against the live source's metastore and storage.

The I/O around :mod:`streamer.target.dr.source_drift`: the source is read through the catalog a
bootstrap reads (Thrift, or the bundled warehouse), its notification log after each replica's
position names the objects it changed since (not judged), and both sides' files are listed and
hashed (sha256). ``repair`` re-copies diverged files, verified, removes files only the replica has,
and creates the tables and partitions the replica lacks (:func:`~streamer.target.dr.source_drift.
missing_on_replica`) through the apply path's own handlers (``tables.create_table``,
``partitions.add_partitions``: locations and location-bearing parameters rewritten to the target's,
files copied and verified by the same copier), from the source's metastore and files now. Objects
only the replica has are reported, never removed. Design: docs/dr.md ("Against the live source").

Objects are judged per partition (:mod:`~streamer.target.dr.source_drift`): the log after the
replica's position is decoded to name the partitions it changed. A repair happens under the guard
after the log is read once more: only drifts of objects no event named since the replica position
they were judged at are repaired, so a busy database (whose position keeps moving) is still repaired.
Every change a repair makes passes the applier's door (``streamer.target.apply.door``, through
:func:`~streamer.target.dr.verify.repair_context`): a database this source owns, a place inside its
directory, reads from the declared stores verified by checksum; a refused repair changes nothing and
is reported (``VerifyReport.refused``). The coverage of each check
(partitions compared out of the source's) is exported, and, across the checks of one
:class:`~streamer.target.dr.source_drift.CoverageBook` (continuous verification), the time since which
every partition was compared.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from streamer import metrics
from streamer.errors import ConfigError, StreamerError
from streamer.events.model import (
    AddPartitionPayload,
    CreateTablePayload,
    Event,
    EventType,
    FileRef,
    Source,
    TableSnapshot,
)
from streamer.hive.decode import decode_row
from streamer.hive.notification import NotificationRow
from streamer.metastore.catalog import FAILOVER_CUT_PARAM, Catalog
from streamer.metastore.transport import HmsAuth
from streamer.replay.state import table_meta
from streamer.source.bootstrap import SourceCatalog, Vanished
from streamer.source.reader import NotificationReader
from streamer.target.apply import door, executor
from streamer.target.apply import partitions as partition_handlers
from streamer.target.apply import tables as table_handlers
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.paths import partition_name
from streamer.target.dr.drift import (
    DATABASE,
    KINDS,
    DatabaseReport,
    Drift,
    ObservedFile,
    ObservedTable,
    Repair,
    VerifyReport,
)
from streamer.target.dr.observe import digest, listing, observe_listed, observe_table
from streamer.target.dr.source_drift import (
    REPAIRABLE,
    Coverage,
    CoverageBook,
    Creation,
    TablePair,
    changed_since,
    checked_units,
    compare_tables,
    counts,
    is_removal,
    missing_on_replica,
    still_safe,
    unit,
    units,
)
from streamer.target.dr.verify import (
    Guard,
    VerifySettings,
    refusal,
    repair_context,
    replica_positions,
    target_name,
)
from streamer.target.state.visibility import is_acid_replica, source_parameters

log = logging.getLogger(__name__)

__all__ = ["SourceConnection", "check_against_source"]


@dataclass(frozen=True)
class SourceConnection:
    """Where the live source is read: its metastore's Thrift API, or the bundled warehouse's database."""

    hms_uri: str | None = None
    notification_db: str | None = None
    auth: HmsAuth = field(default_factory=HmsAuth)

    def __post_init__(self) -> None:
        if bool(self.hms_uri) == bool(self.notification_db):
            raise ConfigError(
                "--against-source needs exactly one of --source-hms-uri and --source-notification-db"
            )


@contextlib.contextmanager
def open_source(conn: SourceConnection, source_id: str) -> Iterator[tuple[SourceCatalog, NotificationReader]]:
    """The source's catalog and notification log, read-only, as ``streamer bootstrap`` opens them."""
    from streamer.source.replace import policy_change_catalog

    reader: NotificationReader
    if conn.hms_uri:
        from streamer.source.thrift_reader import ThriftNotificationReader

        reader = ThriftNotificationReader(conn.hms_uri, auth=conn.auth)
    else:
        from streamer.source.reader import SqlNotificationReader

        reader = SqlNotificationReader(str(conn.notification_db))
    try:
        with policy_change_catalog(source_id, notification_db=conn.notification_db, hms_uri=conn.hms_uri,
                                   auth=conn.auth) as catalog:
            yield catalog, reader
    finally:
        reader.close()


def check_against_source(
    settings: VerifySettings,
    conn: SourceConnection,
    *,
    catalog: Catalog | None = None,
    guard: Guard = contextlib.nullcontext,
    repair: bool = False,
    book: CoverageBook | None = None,
) -> VerifyReport:
    """Compare every replicated database with the source now, for objects it has not changed since
    the replica's position; optionally repair. Sets the source drift and coverage gauges (``book``:
    when each partition was last compared, kept across the checks of continuous verification)."""
    started, clock = time.time(), time.monotonic()
    own = catalog is None
    if catalog is None:
        from streamer.metastore.thrift import HmsCatalog

        catalog = HmsCatalog(settings.hms_uri, auth=settings.hms_auth)
    try:
        with open_source(conn, settings.source_id) as (source, reader):
            check = _SourceCheck(settings, catalog, source, reader)
            report = check.run(guard, repair)
    finally:
        if own:
            catalog.close()
    report.started, report.seconds = started, time.monotonic() - clock
    name = target_name(settings)
    record_metrics(report, name)
    book = book if book is not None else CoverageBook()
    for db, (present, checked) in check.judged.items():
        record_coverage(db, book.record(db, present, checked, started), name)
    for obj in report.repaired:
        metrics.VERIFY_SOURCE_REPAIRED.labels(db=name(obj.split(".", 1)[0])).inc()
    return report


def record_coverage(db: str, coverage: Coverage, name: Callable[[str], str] = str.lower) -> None:
    """The coverage gauges of ``db`` (``streamer_verify_source_{checked_partitions,partitions,...}``)."""
    label = name(db)
    metrics.VERIFY_SOURCE_CHECKED.labels(db=label).set(coverage.checked)
    metrics.VERIFY_SOURCE_PARTITIONS.labels(db=label).set(coverage.total)
    metrics.VERIFY_SOURCE_COVERAGE.labels(db=label).set(coverage.ratio)
    metrics.VERIFY_SOURCE_FULL_PASS.labels(db=label).set(coverage.full_pass)


def record_metrics(report: VerifyReport, name: Callable[[str], str] = str.lower) -> None:
    """``streamer_verify_source_drift_objects{db,kind}`` of the checked databases."""
    counts = report.by_db_kind()
    for r in report.databases:
        for kind in KINDS:
            gauge = metrics.VERIFY_SOURCE_DRIFT_OBJECTS.labels(db=name(r.db), kind=kind)
            gauge.set(counts.get((r.db, kind), 0))


class _SourceCheck:
    def __init__(self, settings: VerifySettings, catalog: Catalog, source: SourceCatalog,
                 reader: NotificationReader) -> None:
        self.settings = settings
        self.catalog = catalog
        self.source = source
        self.reader = reader
        self.db_map = {k.lower(): v.lower() for k, v in settings.db_map.items()}
        self.creations: dict[str, list[Creation]] = {}  # per database, what its last check found missing
        # per database, the units (partitions, unpartitioned tables) the source has and those compared
        self.judged: dict[str, tuple[set[str], set[str]]] = {}

    def run(self, guard: Guard, repair: bool) -> VerifyReport:
        report = VerifyReport()
        with guard():
            positions = replica_positions(self.settings, self.catalog)
        for db in sorted(positions):
            result = self._database(db, positions[db])
            fixable = any(d.kind in REPAIRABLE and d.repair for d in result.drifts)
            if repair and (fixable or self.creations.get(db)):
                done, refused = self._repair(result, guard)
                report.repaired.extend(done)
                report.refused.extend(refused)
                if done:
                    result = self._database(db, positions[db])
            if repair:  # what is left could not be repaired safely here: said every time, never silent
                for d in result.drifts:
                    log.error("verification against the source: %s drifted (%s: %s) and was not repaired: "
                              "repair it by hand or re-bootstrap the table (docs/dr.md)", d.obj, d.kind,
                              d.detail)
            report.databases.append(result)
        return report

    def _moved(self, db: str, position: int) -> tuple[frozenset[str], int]:
        """Tables of ``db`` the source changed after ``position``, and how many events did."""
        rows = _read_after(self.reader, position)
        mine = [r for r in rows if (r.db_name or "").lower() == db]
        decode = lambda row: decode_row(row, self.settings.source_id)  # noqa: E731
        return changed_since(mine, {db: position}, decode).get(db, frozenset()), len(mine)

    def _database(self, db: str, position: int) -> DatabaseReport:
        """Read both sides, then the log again: what changed meanwhile is dropped from the verdict."""
        before, _ = self._moved(db, position)
        name = self.db_map.get(db, db)
        try:
            source_tables = {t.lower() for t in self.source.tables(db)}
        except Vanished:
            source_tables = set()
            if "*" not in before:
                drift = Drift(db, DATABASE, db, "database missing on the source")
                return DatabaseReport(db, position, (drift,))
        replica_tables = {t.lower() for t in self.catalog.list_tables(name)}
        pairs = []
        for table in sorted((source_tables | replica_tables) - before):
            src = self._source_table(db, table) if table in source_tables else None
            rep = self._replica_table(name, table) if table in replica_tables else None
            pairs.append(_hashed(TablePair(table, src, rep), self.settings.chunk_size))
        after, later = self._moved(db, position)
        drifts = compare_tables(db, pairs, before | after)
        self.creations[db], skipped = missing_on_replica(pairs, before | after)
        for why in skipped:
            log.info("%s.%s", db, why)
        present = units(pairs) | self._units_not_read(db, source_tables & before)
        self.judged[db] = (present, checked_units(pairs, before | after))
        return DatabaseReport(db, position, tuple(drifts), counts(pairs, before | after), later)

    def _units_not_read(self, db: str, tables: set[str]) -> set[str]:
        """The units of tables the check passed over as moved (their partitions' names only)."""
        out: set[str] = set()
        for table in tables:
            try:
                snap = self.source.table(db, table)
                parts = self.source.partitions(db, table) if snap.partition_keys else []
            except Vanished:
                continue
            keys = [k.name.lower() for k in snap.partition_keys]
            names = [partition_name(keys, list(p.values)) for p in parts if len(p.values) == len(keys)]
            out.update([unit(table, n) for n in names] if keys else [table])
        return out

    def _source_table(self, db: str, table: str) -> ObservedTable | None:
        try:
            snap = self.source.table(db, table)
            parts = self.source.partitions(db, table) if snap.partition_keys else []
        except Vanished:
            return None  # dropped meanwhile: the log read after names it
        return observe_listed(snap, parts)

    def _replica_table(self, name: str, table: str) -> ObservedTable | None:
        snap = self.catalog.get_table(name, table)
        if snap is None:
            return None
        if is_acid_replica(snap.parameters):  # files judged by write ids (`streamer verify`), not here
            restored = dataclasses.replace(snap, parameters=source_parameters(snap.parameters))
            return ObservedTable(table_meta(restored))
        return observe_table(self.catalog, snap, self.settings.warehouse_root)

    # --- repair ---------------------------------------------------------------------------------
    def _repair(self, result: DatabaseReport, guard: Guard) -> tuple[list[str], list[str]]:
        """Create missing tables and partitions, re-copy diverged files from the source (verified by
        its sha256 now), remove stray files: only objects no event named since ``result.event_id``
        (read again under the guard, so the replica cannot apply one meanwhile). Every change passes
        the door (``repair_context``); returns the objects repaired and the repairs it refused."""
        ctx = repair_context(self.settings, self.catalog)
        done: list[str] = []
        refused: list[str] = []
        with guard():
            now = replica_positions(self.settings, self.catalog).get(result.db)
            if now is None:
                log.warning("%s is no longer this source's replica; not repairing it", result.db)
                return [], []
            snap = self.catalog.get_database(self.db_map.get(result.db, result.db))
            if snap is not None and FAILOVER_CUT_PARAM in snap.parameters:
                log.warning("%s was failed over (a primary now); not repairing it", result.db)
                return [], []
            moved, _ = self._moved(result.db, result.event_id)
            drifts, creations = still_safe(result.drifts, self.creations.get(result.db, []), moved)
            if now != result.event_id:  # records without a log event (a watch's) may have added them
                drifts = [d for d in drifts if not is_removal(d)]
            for d in set(result.drifts) - set(drifts):
                log.info("%s: the source or the replica changed it since it was checked; judged again next "
                         "time, not repaired now", d.obj)
            creator = _Creator(self.settings, self.source, ctx)
            for creation in creations:
                made, refusals = creator.create(result.db, now, creation)
                done.extend(made)
                refused.extend(refusals)
            for d in drifts:
                if d.kind not in REPAIRABLE or d.repair is None:
                    continue
                try:
                    if not _resync(ctx, d.repair, now, self.settings.chunk_size, removal=is_removal(d)):
                        continue
                except StreamerError as exc:
                    refused.append(refusal(d.obj, exc))
                    continue
                log.info("re-synced %s from the source (%s)", d.obj, d.detail)
                done.append(d.obj)
        return done, refused

class _Creator:
    """Creates what the replica lacks (``Creation``) from the source, through the apply handlers."""

    def __init__(self, settings: VerifySettings, source: SourceCatalog, ctx: ApplyContext) -> None:
        self.settings, self.source, self.ctx = settings, source, ctx

    def create(self, db: str, position: int, creation: Creation) -> tuple[list[str], list[str]]:
        """The table (with its partitions) or partitions of ``creation`` as the source has them now,
        applied as a CREATE_TABLE / ADD_PARTITION at the replica's position would be; returns what
        was made and what the door refused (``object: cause``)."""
        obj = f"{db}.{creation.table}"
        try:
            snap = self.source.table(db, creation.table)
            parts = self.source.partitions(db, creation.table) if snap.partition_keys else []
        except Vanished:
            log.warning("%s vanished on the source; not created", obj)
            return [], []
        keys = [k.name for k in snap.partition_keys]
        named = {partition_name(keys, list(p.values)): p for p in parts}
        wanted = {n: named[n] for n in creation.partitions if n in named} if creation.partitions else named
        ctx = self.ctx
        made: list[str] = []
        try:
            if not creation.partitions:
                files = [] if keys else self._source_files(snap.sd.location, None)
                new_table = CreateTablePayload(snap, files)
                created = self._event(position, EventType.CREATE_TABLE, new_table, db, snap)
                executor.run(ctx, table_handlers.create_table(ctx, created))
                made.append(obj)
            if wanted:
                files = [f for name, p in wanted.items() for f in self._source_files(p.sd.location, name)]
                payload = AddPartitionPayload(snap, list(wanted.values()), files)
                added = self._event(position, EventType.ADD_PARTITION, payload, db, snap)
                executor.run(ctx, partition_handlers.add_partitions(ctx, [added]))
                if creation.partitions:
                    made.extend(f"{obj}/{name}" for name in wanted)
        except StreamerError as exc:
            return made, [refusal(obj, exc)]
        log.info("created %s on the replica from the source (%d partitions)", obj, len(wanted))
        return made, []

    def _source_files(self, location: str | None, part: str | None) -> list[FileRef]:
        """The visible files below ``location`` now, each with the sha256 its copy is verified by."""
        refs = []
        for f in listing(location, None).values():
            found = digest(f.url, "sha256", self.settings.chunk_size)
            if found is None:
                log.warning("%s vanished on the source; not copied", f.url)
                continue
            refs.append(FileRef(f.url, checksum=found, checksum_algorithm="sha256", size=f.size,
                                partition=part))
        return refs

    def _event(self, position: int, kind: EventType, payload: CreateTablePayload | AddPartitionPayload,
               db: str, snap: TableSnapshot) -> Event:
        """The event the handlers apply: at the replica's position, so its errors name that id."""
        return Event(Source(self.settings.source_id, position, int(time.time())), kind, payload, db=db,
                     table=snap.name)


def _resync(ctx: ApplyContext, fix: Repair, position: int, chunk: int, *, removal: bool) -> bool:
    """Remove the replica's file, or re-copy the source's (verified by its sha256), through the door;
    False when the source's file vanished meanwhile (nothing done)."""
    if removal:
        door.remove_file(ctx, fix.ref.uri, fix.directory, event_id=position)
        return True
    ref = fix.ref
    if not ref.checksum:
        found = digest(ref.uri, "sha256", chunk)
        ref = dataclasses.replace(ref, checksum=found, checksum_algorithm="sha256")
    if not ref.checksum:
        log.warning("%s vanished on the source; not re-synced", ref.uri)
        return False
    door.copy_all(ctx, [ref], fix.directory, event_id=position, source_location=fix.source_location)
    return True


def _hashed(pair: TablePair, chunk: int) -> TablePair:
    """sha256 of the files both sides have at the same size (other differences need no content)."""
    if pair.source is None or pair.replica is None:
        return pair
    src_parts: dict[str, Mapping[str, ObservedFile]] = {}
    rep_parts: dict[str, Mapping[str, ObservedFile]] = {}
    for part, want in pair.source.partitions.items():
        have = pair.replica.partitions.get(part, {})
        same = {p for p in set(want) & set(have) if want[p].size == have[p].size}
        src_parts[part] = {p: _with_digest(f, chunk) if p in same else f for p, f in want.items()}
        if part in pair.replica.partitions:  # a partition only the source has stays missing
            rep_parts[part] = {p: _with_digest(f, chunk) if p in same else f for p, f in have.items()}
    for part, have in pair.replica.partitions.items():
        rep_parts.setdefault(part, have)
    return TablePair(pair.name, dataclasses.replace(pair.source, partitions=src_parts),
                     dataclasses.replace(pair.replica, partitions=rep_parts))


def _with_digest(f: ObservedFile, chunk: int) -> ObservedFile:
    return dataclasses.replace(f, digest=digest(f.url, "sha256", chunk), algorithm="sha256")


def _read_after(reader: NotificationReader, after: int, batch: int = 1000) -> list[NotificationRow]:
    rows: list[NotificationRow] = []
    while got := reader.read_after(after, batch):
        rows.extend(got)
        after = got[-1].event_id
    return rows


def loop_check(settings: VerifySettings, conn: SourceConnection, *, repair: bool = True
               ) -> Callable[[Catalog, Guard], VerifyReport]:
    """The check against the live source as :class:`~streamer.target.dr.verify.VerifyLoop` runs it:
    repairing (``--verify-repair``, the default) and keeping one coverage book across its runs."""
    book = CoverageBook()
    return lambda catalog, guard: check_against_source(settings, conn, catalog=catalog, guard=guard,
                                                       repair=repair, book=book)
