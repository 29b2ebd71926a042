"""``streamer verify``: prove a replica equals the source at the replica's own position.

The I/O around :mod:`streamer.target.dr.drift` (the pure comparison): the source's history is read back
from the Kafka topic, the target through :mod:`streamer.target.dr.observe`, and drifted files may be
re-copied through the applier's door (``repair``: :func:`repair_context`, checked as the job's changes
are; a refused repair changes nothing and is reported). Metadata drift is reported, never repaired.
The two-pass reading under the job's batch lock is described in docs/design/dr.md.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from streamer import metrics
from streamer.errors import ConfigError, StreamerError
from streamer.events.codec import EventDeserializer
from streamer.events.model import DatabaseSnapshot, Event
from streamer.kafka.record_limit import DEFAULT_TARGET_MAX_RECORD_BYTES
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM, Catalog
from streamer.metastore.transport import HmsAuth
from streamer.target import db_map as names
from streamer.target.apply import door
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.sources import SourceRules
from streamer.target.dr.drift import (
    CHECKSUM,
    FILE,
    KINDS,
    SIZE,
    DatabaseReport,
    ExpectedDatabase,
    ObservedDatabase,
    VerifyReport,
    compare,
    expected_at,
)
from streamer.target.dr.observe import hash_files, observe, source_digests
from streamer.target.state.state_file import TargetState
from streamer.target.state.status import read_progress, replicated_through

log = logging.getLogger(__name__)

__all__ = ["Guard", "VerifyLoop", "VerifyReport", "VerifySettings", "verify"]

Guard = Callable[[], AbstractContextManager[Any]]
"""Held while a database is read (the job's batch lock); ``contextlib.nullcontext`` out of process."""

REPAIRABLE = frozenset({FILE, CHECKSUM, SIZE})

SecondCheck = Callable[[Catalog, Guard], VerifyReport]
"""A further check :class:`VerifyLoop` runs after each verification, with its catalog and guard."""


@dataclass(frozen=True)
class VerifySettings:
    """What one verification needs; see ``streamer verify --help``."""

    hms_uri: str
    state_dir: str
    bootstrap_servers: str
    topic: str
    source_id: str = "source"
    kafka_settings: Mapping[str, str] = field(default_factory=dict)
    databases: Sequence[str] = ()  # source names; empty: every database this source replicates
    db_map: Mapping[str, str] = field(default_factory=dict)  # source -> target database name
    warehouse_root: str | None = None  # needed for ACID replicas and --repair
    external_base_dir: str | None = None
    hms_auth: HmsAuth = field(default_factory=HmsAuth)
    source_rules: SourceRules = field(default_factory=SourceRules)  # what --repair may read
    # hash the source's files that the events recorded no checksum of (where they cannot have changed)
    recompute_source: bool = True
    chunk_size: int = 1 << 20
    max_record_bytes: int = DEFAULT_TARGET_MAX_RECORD_BYTES  # as the job's: a larger record is refused


def verify(
    settings: VerifySettings,
    *,
    catalog: Catalog | None = None,
    events: Callable[[], Iterator[Event]] | None = None,
    guard: Guard = contextlib.nullcontext,
    repair: bool = False,
) -> VerifyReport:
    """Compare every replicated database with the source at its cut-off; optionally re-copy files.

    ``catalog`` defaults to a new ``HmsCatalog`` (closed afterwards); ``events`` to reading the whole
    topic. Updates the ``streamer_verify_*`` metrics. Never changes metadata.
    """
    started = time.time()
    clock = time.monotonic()
    own_catalog = catalog is None
    if catalog is None:
        from streamer.metastore.thrift import HmsCatalog

        catalog = HmsCatalog(settings.hms_uri, auth=settings.hms_auth)
    try:
        report = _Verifier(settings, catalog, events or (lambda: read_topic(settings))).run(guard, repair)
    finally:
        if own_catalog:
            catalog.close()
    report.started, report.seconds = started, time.monotonic() - clock
    record_metrics(report, target_name(settings))
    return report


def target_name(settings: VerifySettings) -> Callable[[str], str]:
    """A source database's name on the target (``--db-map``): the ``db`` label of every target metric."""
    mapping = {k.lower(): v.lower() for k, v in settings.db_map.items()}
    return lambda db: mapping.get(db.lower(), db.lower())


def repair_context(settings: VerifySettings, catalog: Catalog) -> ApplyContext:
    """What a repair hands its changes to: the applier's context for this source (``ApplyContext``),
    whose door (``streamer.target.apply.door``) checks each one as it checks the job's: a database this
    source owns, a place inside its directory, reads from the declared stores, verified by checksum."""
    if not settings.warehouse_root:
        raise ConfigError("--repair needs --warehouse-root (copies stay inside the target roots)")
    paths = TargetPaths(settings.warehouse_root, settings.external_base_dir)
    copier = FileCopier(max_workers=4, roots=paths.roots, sources=settings.source_rules)
    return ApplyContext(catalog, copier, paths, settings.source_id, db_map=settings.db_map,
                        sources=settings.source_rules)


def refusal(obj: str, exc: StreamerError) -> str:
    """``object: cause`` of a repair the door refused (logged, and listed in ``VerifyReport.refused``)."""
    text = f"{obj}: {type(exc).__name__}: {exc}"
    log.error("repair of %s refused, nothing changed: %s: %s", obj, type(exc).__name__, exc)
    return text


def replica_positions(settings: VerifySettings, catalog: Catalog) -> dict[str, int]:
    """Source database -> ``repl.last.id`` of its replica, for the databases ``settings`` selects."""
    return _Verifier(settings, catalog, lambda: iter(())).positions()


def record_metrics(report: VerifyReport, name: Callable[[str], str] = str.lower) -> None:
    """Drift gauges of the verified databases (others keep their last values), run time, duration."""
    counts = report.by_db_kind()
    for r in report.databases:
        for kind in KINDS:
            metrics.VERIFY_DRIFT_OBJECTS.labels(db=name(r.db), kind=kind).set(counts.get((r.db, kind), 0))
    metrics.VERIFY_LAST_RUN.set(report.started)
    metrics.VERIFY_SECONDS.observe(report.seconds)


def read_topic(settings: VerifySettings) -> Iterator[Event]:
    """Every committed event of the topic, oldest first (the source's history as replicated)."""
    from streamer.kafka.record_limit import check_message, consumer_settings
    from streamer.kafka.topics import _consumer, iter_range, probe_end, watermarks

    limit = settings.max_record_bytes
    config = {"bootstrap.servers": settings.bootstrap_servers, **settings.kafka_settings}
    config = {**config, **consumer_settings(limit, config)}  # a crafted record is refused, not decoded
    consumer = _consumer(config, isolation_level="read_committed", auto_offset_reset="error")
    deserialize = EventDeserializer()
    try:
        marks = watermarks(consumer, settings.topic)
        if marks is None:
            return
        low, high = marks
        high = probe_end(consumer, settings.topic, 0, high)
        refuse = lambda m: check_message(m, limit)  # noqa: E731
        for msg in iter_range(consumer, settings.topic, 0, low, high, check=refuse):
            value = msg.value()
            if value is not None:
                yield deserialize(value)
    finally:
        consumer.close()


class _Verifier:
    def __init__(
        self, settings: VerifySettings, catalog: Catalog, events: Callable[[], Iterator[Event]]
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.events = events
        self.db_map = names.normalized(settings.db_map)
        self._expected: dict[tuple[str, int], ExpectedDatabase] = {}

    def target_name(self, db: str) -> str:
        return names.target_name(self.db_map, db)

    def run(self, guard: Guard, repair: bool) -> VerifyReport:
        positions = self.positions()
        report = VerifyReport()
        self._expect(self._cutoffs(positions))
        for db in sorted(positions):
            result = self._database(db, guard)
            if repair and any(d.kind in REPAIRABLE and d.repair for d in result.drifts):
                repaired, refused = self._repair(result, guard)
                report.repaired.extend(repaired)
                report.refused.extend(refused)
                if repaired:
                    result = self._database(db, guard)
            report.databases.append(result)
        return report

    # --- positions and the expected side ---------------------------------------------------------
    def positions(self) -> dict[str, int]:
        """Source database -> ``repl.last.id`` of its replica (0 when the replica is missing)."""
        out: dict[str, int] = {}
        wanted = {d.lower() for d in self.settings.databases}
        for name in self.catalog.list_databases():
            # only the database a source database is mapped to replicates it: one bearing the source
            # name --db-map sends elsewhere (an earlier run's) is not judged as that source's replica
            source = names.source_name(self.db_map, name)
            if source is None:
                continue
            snap = self.catalog.get_database(name)
            if snap is None or snap.parameters.get(REPL_SOURCE_PARAM) != self.settings.source_id:
                continue
            if not wanted or source in wanted:
                out[source] = self._position(source, snap)
        state = TargetState(self.settings.state_dir)
        for db in wanted - set(out):  # asked for, but absent: judged at the progress recorded for it
            out[db] = state.applied().get(db, 0)
        return out

    def _cutoffs(self, positions: Mapping[str, int]) -> dict[str, int]:
        state = TargetState(self.settings.state_dir)
        _, consumed = read_progress(self.settings.state_dir)
        stuck = set(state.halts()) | set(state.pending_replays())
        return replicated_through(positions, consumed, stuck)

    def _expect(self, cutoffs: Mapping[str, int]) -> None:
        missing = {db: cut for db, cut in cutoffs.items() if (db, cut) not in self._expected}
        if missing:
            # streamed: memory holds the replayed tables, not the topic (a moved cut-off reads it again)
            for db, exp in expected_at(self.events(), missing).items():
                if self.settings.recompute_source:
                    exp = exp.with_recomputed(source_digests(exp, self.settings.chunk_size))
                self._expected[(db, exp.event_id)] = exp

    def _expected_at(self, db: str, cut: int) -> ExpectedDatabase:
        self._expect({db: cut})
        return self._expected[(db, cut)]

    def _cut(self, db: str) -> int:
        snap = self.catalog.get_database(self.target_name(db))
        return self._cutoffs({db: self._position(db, snap)})[db]

    # --- one database ---------------------------------------------------------------------------
    def _database(self, db: str, guard: Guard) -> DatabaseReport:
        """Two passes (docs/design/dr.md): optimistic, then confirmed under the guard.

        The target is read first, under the guard, with its cut-off; the expected state for that
        cut-off is computed afterwards (it may read the topic), with the guard released.
        """
        hint: ExpectedDatabase | None = None  # expected state of the previous pass: hash algorithms
        cut = -1
        for attempt in range(4):
            confirm = attempt > 0
            with guard():
                snap = self.catalog.get_database(self.target_name(db))
                position = self._position(db, snap)
                cut = self._cutoffs({db: position})[db]
                observed = self._observe(db, snap, position)
                if confirm and hint is not None:
                    observed = self._hash(observed, hint)
                moved = self._cut(db) != cut  # never under the job's lock; possible out of process
            if moved:
                continue
            expected = self._expected_at(db, cut)
            observed = self._hash(observed, expected)  # what the guarded pass did not hash (yet)
            result = compare(expected, observed)
            if confirm or not result.drifts:
                return result
            hint = expected
        return DatabaseReport(db, cut, note="unsettled: the database kept moving while it was read")

    def _position(self, db: str, snap: DatabaseSnapshot | None) -> int:
        """``repl.last.id`` of ``snap``, the replica of source database ``db`` (the progress recorded
        for it when the replica is missing)."""
        if snap is None:
            return TargetState(self.settings.state_dir).applied().get(db, 0)
        return int(snap.parameters.get(LAST_ID_PARAM, "0") or 0)

    def _observe(self, db: str, snap: DatabaseSnapshot | None, position: int) -> ObservedDatabase | None:
        return observe(self.catalog, db, self.target_name(db), snap, position, self.settings.warehouse_root)

    def _hash(self, observed: ObservedDatabase | None, expected: ExpectedDatabase) -> ObservedDatabase | None:
        return hash_files(observed, expected, self.settings.chunk_size)

    # --- repair ---------------------------------------------------------------------------------
    def _repair(self, result: DatabaseReport, guard: Guard) -> tuple[list[str], list[str]]:
        """Re-copy drifted files of existing partitions through the door, verified against the event's
        checksum; returns the objects repaired and the repairs refused (``object: cause``)."""
        ctx = repair_context(self.settings, self.catalog)
        done: list[str] = []
        refused: list[str] = []
        with guard():
            if self._cut(result.db) != result.event_id:
                log.warning("%s moved since it was verified; not repairing it now", result.db)
                return [], []
            for d in result.drifts:
                if d.kind not in REPAIRABLE or d.repair is None:
                    continue
                fix = d.repair
                try:  # a wrong file is replaced by a rename over it: there is no instant without it
                    door.copy_all(ctx, [fix.ref], fix.directory, event_id=result.event_id,
                                  source_location=fix.source_location)
                except StreamerError as exc:
                    refused.append(refusal(d.obj, exc))
                    continue
                log.info("repaired %s (%s)", d.obj, d.kind)
                done.append(d.obj)
        return done, refused


# --- continuous verification in the target job --------------------------------------------------------


class VerifyLoop:
    """Runs :func:`verify` every ``every`` seconds in a daemon thread of the target job's process.

    Rate-limited: the next run starts ``every`` seconds after the previous one *ended*, so a slow
    verification never runs back to back. Each database is read under ``lock`` (the job's batch
    lock) as docs/design/dr.md describes. Failures are logged and counted, never fatal to the job.
    """

    def __init__(self, settings: VerifySettings, every: float, lock: threading.Lock,
                 also: SecondCheck | None = None) -> None:
        self.settings = settings
        self.also = also  # e.g. the check against the live source (streamer.target.dr.source_check)
        self.every = every
        self.lock = lock
        self.runs = 0
        self.last: VerifyReport | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="streamer-verify", daemon=True)

    def start(self) -> VerifyLoop:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def run_once(self, catalog: Catalog) -> VerifyReport:
        """One verification (and the further check, if any), logged; the first report is returned."""
        report = verify(self.settings, catalog=catalog, guard=lambda: self.lock)
        self.last = report
        self.runs += 1
        level = logging.INFO if report.ok else logging.WARNING
        log.log(level, "verification: %s drifted object(s) in %d database(s), %.1f s",
                len(report.drifts), len(report.databases), report.seconds)
        for d in report.drifts[:20]:
            log.warning("drift %s %s: %s", d.kind, d.obj, d.detail)
        if self.also is not None:
            second = self.also(catalog, lambda: self.lock)
            for d in second.drifts[:20]:
                log.warning("drift from the live source %s %s: %s", d.kind, d.obj, d.detail)
        return report

    def _loop(self) -> None:
        from streamer.metastore.thrift import HmsCatalog

        catalog: Catalog | None = None
        while not self._stop.wait(self.every):
            try:
                if catalog is None:
                    catalog = HmsCatalog(self.settings.hms_uri, auth=self.settings.hms_auth)
                self.run_once(catalog)
            except Exception as exc:  # a failed run is retried next time; the job goes on
                log.warning("verification failed: %s: %s", type(exc).__name__, exc)
                metrics.VERIFY_FAILURES.inc()
                if catalog is not None:
                    catalog.close()
                    catalog = None
        if catalog is not None:
            catalog.close()
