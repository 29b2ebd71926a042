"""Every Prometheus metric streamer exports, defined once, in the registry of the role that exports it.

Names follow Prometheus rules (``_total``, ``_seconds``, ``_bytes``); labels are bounded: database
and event type, never table names or ids. A ``db`` label is always a *target* database name (the
name under ``--db-map``); events that belong to no database (transactions) have no per-database
series. ``forget_database`` removes a dropped database's series.

Series an alert counts from are there at 0 from the start (``increase()`` sees nothing of a series
whose first sample is already 1): the agent's errors of every known kind, and a target's halt flag of
every database it reports a position for. Both roles also export ``streamer_build_info`` and the
process collector's ``process_*`` families.
"""

from __future__ import annotations

import base64
import hmac
import logging
import platform
import ssl
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from streamer.errors import ConfigError

log = logging.getLogger(__name__)



class Role(StrEnum):
    """Which process serves ``/metrics``: each exports its own families only (an agent shows no
    ``streamer_target_*`` zeros a dashboard without a job filter would mix in)."""

    SOURCE = "source"  # streamer source run: streamer_source_*
    TARGET = "target"  # streamer target run: streamer_target_* and streamer_verify_*


REGISTRIES: dict[Role, CollectorRegistry] = {role: CollectorRegistry(auto_describe=True) for role in Role}
SOURCE_REGISTRY = REGISTRIES[Role.SOURCE]
TARGET_REGISTRY = REGISTRIES[Role.TARGET]


class _Union:
    """Every role's families, for code and tests that read a value whatever the role (``REGISTRY``);
    a family every role exports (build info, process) once."""

    def __init__(self, *registries: CollectorRegistry) -> None:
        self._registries = registries

    def collect(self) -> Iterator[Metric]:
        seen: set[str] = set()
        for registry in self._registries:
            for family in registry.collect():
                if family.name not in seen:
                    seen.add(family.name)
                    yield family


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamer")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class _BuildInfo:
    """``streamer_build_info{version, python} 1``: which release and interpreter a process runs
    (join it on ``job, instance`` to label other series; a rollout shows as the version changing)."""

    def __init__(self) -> None:
        self.labels = {"version": _version(), "python": platform.python_version()}

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "streamer_build_info", "Version of streamer and of Python this process runs",
            labels=list(self.labels),
        )
        family.add_metric(list(self.labels.values()), 1)
        yield family


BUILD_INFO = _BuildInfo()
for _registry in REGISTRIES.values():  # each role's page has them: a process without its role's
    _registry.register(BUILD_INFO)      # families (a target before its first batch) still tells what it is
    ProcessCollector(registry=_registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...


REGISTRY = CollectorRegistry(auto_describe=True)
REGISTRY.register(_Union(*REGISTRIES.values()))

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

# --- source agent ---
SOURCE_LAST_EVENT_ID = Gauge(
    "streamer_source_last_event_id", "Last source event id published (or passed) by the agent",
    registry=SOURCE_REGISTRY,
)
SOURCE_HEAD_EVENT_ID = Gauge(
    "streamer_source_head_event_id", "Newest event id in the source notification log",
    registry=SOURCE_REGISTRY,
)
SOURCE_LAG_EVENTS = Gauge(
    "streamer_source_lag_events", "Source head event id minus last published id", registry=SOURCE_REGISTRY
)
SOURCE_GAP = Gauge(
    "streamer_source_gap", "1 while the agent is halted on a notification-log gap", registry=SOURCE_REGISTRY
)
SOURCE_EVENTS_PUBLISHED = Counter(
    "streamer_source_events_published_total", "Events published to Kafka", ["event_type"],
    registry=SOURCE_REGISTRY,
)
SOURCE_EVENTS_FILTERED = Counter(
    "streamer_source_events_filtered_total", "Events passed over by the replication policy",
    registry=SOURCE_REGISTRY,
)
SOURCE_EVENTS_SKIPPED = Counter(
    "streamer_source_events_skipped_total",
    "Source events of an unknown type that name no database: not published (logged with their id and "
    "type; the type is not a label because the source chooses it)",
    registry=SOURCE_REGISTRY,
)
SOURCE_EVENTS_OTHER_CATALOG = Counter(
    "streamer_source_events_other_catalog_total",
    "Events of another metastore catalog than --catalog: passed over (also counted as filtered)",
    registry=SOURCE_REGISTRY,
)
SOURCE_PUBLISH_SECONDS = Histogram(
    "streamer_source_publish_seconds", "Time to publish and commit one batch", buckets=_LATENCY_BUCKETS,
    registry=SOURCE_REGISTRY,
)
SOURCE_ERRORS = Counter(
    "streamer_source_errors_total", "Errors seen by the agent, by kind", ["kind"], registry=SOURCE_REGISTRY
)
# the watch of tables whose writers log nothing (streamer.source.watch, watch_cycle)
SOURCE_WATCHED_DIRS = Gauge(
    "streamer_source_watched_dirs",
    "Directories (unpartitioned tables and partitions) the agent watches because their writers log nothing",
    registry=SOURCE_REGISTRY,
)
SOURCE_WATCH_REPLACES = Counter(
    "streamer_source_watch_replaces_total",
    "Replaces the agent published from its own listing of a watched directory that changed",
    registry=SOURCE_REGISTRY,
)
SOURCE_WATCH_ERRORS = Counter(
    "streamer_source_watch_errors_total",
    "Watch cycles that failed to read the metastore or a directory (logged; tried again next cycle)",
    registry=SOURCE_REGISTRY,
)
SOURCE_WATCH_SECONDS = Histogram(
    "streamer_source_watch_seconds", "Time of one watch cycle: metastore, listings, checksums, publish",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    registry=SOURCE_REGISTRY,
)
# every kind the agent counts (streamer.source.agent, prepare.failure_kind): each series from 0
SOURCE_ERROR_KINDS = ("kafka", "commit", "decode", "record_too_large")
for _kind in SOURCE_ERROR_KINDS:
    SOURCE_ERRORS.labels(kind=_kind)

# --- target job ---
TARGET_LAST_APPLIED = Gauge(
    "streamer_target_last_applied_event_id", "Last source event id applied, per database", ["db"],
    registry=TARGET_REGISTRY,
)
TARGET_WATERMARK = Gauge(
    "streamer_target_watermark_event_id",
    "Source event id up to which every replicated database is consistent (pinned by a halt)",
    registry=TARGET_REGISTRY,
)
TARGET_DB_WATERMARK = Gauge(
    "streamer_target_db_watermark_event_id",
    "Source event id up to which a target database is consistent (its repl.last.id, or newer when quiet)",
    ["db"], registry=TARGET_REGISTRY,
)
TARGET_WATERMARK_FAILURES = Counter(
    "streamer_target_watermark_write_failures_total",
    "Watermark records the target metastore failed to store (the next micro-batch writes again)",
    registry=TARGET_REGISTRY,
)
TARGET_SOURCE_HEAD = Gauge(
    "streamer_target_source_head_event_id", "Newest source event id the target has heard of",
    registry=TARGET_REGISTRY,
)
TARGET_LAG_EVENTS = Gauge(
    "streamer_target_lag_events", "Source head event id minus the last applied id", registry=TARGET_REGISTRY
)
TARGET_LAG_SECONDS = Histogram(
    "streamer_target_lag_seconds", "Source event time to applied on the target",
    buckets=_LATENCY_BUCKETS, registry=TARGET_REGISTRY,
)
TARGET_EVENTS_APPLIED = Counter(
    "streamer_target_events_applied_total", "Events applied", ["event_type"], registry=TARGET_REGISTRY
)
TARGET_EVENTS_COALESCED = Counter(
    "streamer_target_events_coalesced_total",
    "Events not executed because a later event of the same object in the batch carried its full state",
    registry=TARGET_REGISTRY,
)
TARGET_EVENTS_REGROUPED = Counter(
    "streamer_target_events_regrouped_total",
    "Events applied out of event-id order, regrouped per table in a backlog's batch behind the apply "
    "fence (target run --coalesce-backlog)",
    registry=TARGET_REGISTRY,
)
TARGET_EVENTS_VOIDED = Counter(
    "streamer_target_events_voided_total",
    "Writes (INSERTs, partitions added with files) whose files were gone, not copied because a later "
    "event of their table replaced or dropped those files (applied as one voiding run with it)",
    registry=TARGET_REGISTRY,
)
TARGET_BATCH_READ_SECONDS = Histogram(
    "streamer_target_batch_read_seconds",
    "Time to get one micro-batch's records: read from Kafka by the driver (via=kafka), or collected "
    "through Spark (via=spark: --batch-read spark, or a batch whose range was not logged where the job "
    "reads it)",
    ["via"], buckets=_LATENCY_BUCKETS, registry=TARGET_REGISTRY,
)
TARGET_BYTES_COPIED = Counter(
    "streamer_target_bytes_copied_total", "Bytes of data files copied", registry=TARGET_REGISTRY
)
TARGET_FILES_UNVERIFIED = Counter(
    "streamer_target_files_unverified_total", "Files copied without a checksum to verify",
    registry=TARGET_REGISTRY,
)
TARGET_CM_FALLBACKS = Counter(
    "streamer_target_cm_fallbacks_total", "Files copied from cmroot because the source changed",
    registry=TARGET_REGISTRY,
)
TARGET_NONATOMIC_PUBLISHES = Counter(
    "streamer_target_nonatomic_publishes_total",
    "INSERTs published file by file into a listed directory (readers may see part of one)",
    ["db"], registry=TARGET_REGISTRY,
)


class _PerPositionGauge(Gauge):
    """A per-database gauge with a series (0 until set) for every database that has a
    ``streamer_target_last_applied_event_id`` series: the halt flag is there from the job's start."""

    def collect(self) -> Iterable[Metric]:
        if self._is_parent():
            for db in _positioned_databases():
                self.labels(db=db)
        return super().collect()


def _positioned_databases() -> list[str]:
    with TARGET_LAST_APPLIED._lock:
        return [key[0] for key in TARGET_LAST_APPLIED._metrics if not is_dropped(key[0])]


TARGET_HALTED = _PerPositionGauge(
    "streamer_target_halted", "1 while a database is halted on an event", ["db"], registry=TARGET_REGISTRY
)
TARGET_DATA_LOSS = Gauge(
    "streamer_target_data_loss",
    "1 once the job found records missing from the topic (event chain broken, offsets purged)",
    registry=TARGET_REGISTRY,
)
TARGET_BATCH_SECONDS = Histogram(
    "streamer_target_batch_seconds", "Duration of one micro-batch apply", buckets=_LATENCY_BUCKETS,
    registry=TARGET_REGISTRY,
)
TARGET_TXNS_COMMITTED = Counter(
    "streamer_target_txns_committed_total", "ACID transactions made visible", registry=TARGET_REGISTRY
)
TARGET_TXNS_ABORTED = Counter(
    "streamer_target_txns_aborted_total", "ACID transactions dropped on abort", registry=TARGET_REGISTRY
)
TARGET_ABORTED_BYTES_SKIPPED = Counter(
    "streamer_target_aborted_bytes_skipped_total", "Bytes of aborted transactions never copied",
    registry=TARGET_REGISTRY,
)
TARGET_OPEN_TXNS = Gauge(
    "streamer_target_open_txns", "Source transactions buffered on the target", registry=TARGET_REGISTRY
)
TARGET_EXECUTOR_FILES_COPIED = Counter(
    "streamer_target_executor_files_copied_total",
    "Files staged by Spark executor tasks (large copies, streamer.target.job.executor_copy)",
    registry=TARGET_REGISTRY,
)
TARGET_TABLES_SYNCED_BY_STATE = Gauge(
    "streamer_target_tables_synced_by_state",
    "Tables replicated by syncing their directories, not by events (their writers log no INSERT: "
    "Spark datasource tables, Hive tables Spark writes with conversion on), per database",
    ["db"], registry=TARGET_REGISTRY,
)

# --- verification (streamer verify, streamer target run --verify-every) ---
VERIFY_DRIFT_OBJECTS = Gauge(
    "streamer_verify_drift_objects",
    "Objects of the replica that differ from the source at its repl.last.id, at the last verification",
    ["db", "kind"], registry=TARGET_REGISTRY,
)
VERIFY_LAST_RUN = Gauge(
    "streamer_verify_last_run_timestamp_seconds", "When the last verification started (Unix time)",
    registry=TARGET_REGISTRY,
)
VERIFY_SECONDS = Histogram(
    "streamer_verify_duration_seconds", "Duration of one verification of every replicated database",
    buckets=_LATENCY_BUCKETS, registry=TARGET_REGISTRY,
)
VERIFY_SOURCE_DRIFT_OBJECTS = Gauge(
    "streamer_verify_source_drift_objects",
    "Objects of the replica that differ from the live source's storage and metastore (objects the "
    "source changed since the replica's position are not counted), at the last check against the source",
    ["db", "kind"], registry=TARGET_REGISTRY,
)
VERIFY_SOURCE_CHECKED = Gauge(
    "streamer_verify_source_checked_partitions",
    "Partitions (and unpartitioned tables) of the source the last check against the live source compared "
    "with the replica (those the source changed since the replica's position are not compared)",
    ["db"], registry=TARGET_REGISTRY,
)
VERIFY_SOURCE_PARTITIONS = Gauge(
    "streamer_verify_source_partitions",
    "Partitions (and unpartitioned tables) the source had at the last check against the live source",
    ["db"], registry=TARGET_REGISTRY,
)
VERIFY_SOURCE_COVERAGE = Gauge(
    "streamer_verify_source_coverage_ratio",
    "checked_partitions / partitions of the last check against the live source (1 when there are none)",
    ["db"], registry=TARGET_REGISTRY,
)
VERIFY_SOURCE_FULL_PASS = Gauge(
    "streamer_verify_source_full_pass_timestamp_seconds",
    "Every partition the source has now was compared with the replica at or after this time, or first "
    "seen after it (Unix time), across the checks against the live source of this process",
    ["db"], registry=TARGET_REGISTRY,
)
VERIFY_SOURCE_REPAIRED = Counter(
    "streamer_verify_source_repaired_objects_total",
    "Objects (files, partitions, tables) the check against the live source repaired on the replica",
    ["db"], registry=TARGET_REGISTRY,
)
VERIFY_FAILURES = Counter(
    "streamer_verify_failures_total",
    "Verifications that failed to run (metastore, topic or files unreadable)",
    registry=TARGET_REGISTRY,
)


ANY_PORT = -1  # MetricsEndpoint.port: a free port the system picks (server.server_port tells which)


@dataclass(frozen=True)
class MetricsEndpoint:
    """Where and how ``/metrics`` is served. Loopback by default; TLS and basic auth are optional."""

    port: int = 0  # 0: not served; ANY_PORT: a free one
    addr: str = "127.0.0.1"
    tls_cert: str | None = None
    tls_key: str | None = None
    basic_auth_user: str | None = None
    basic_auth_password: str | None = field(default=None, repr=False)


def serve(
    port: int | MetricsEndpoint, addr: str = "127.0.0.1", role: Role | str | None = None
) -> WSGIServer | None:
    """Serve ``/metrics`` in a daemon thread; returns the server (``shutdown()`` stops it), or None if off.

    ``role`` picks the families served (``Role``). Without one, the calling command's package picks
    it (``streamer.source.*``: source, ``streamer.target.*``: target), so that no command serves
    the other role's zeros; any other caller gets every role's (one process running both, as tests do).
    """
    if role is None:
        role = role_of_module(sys._getframe(1).f_globals.get("__name__", ""))
    endpoint = port if isinstance(port, MetricsEndpoint) else MetricsEndpoint(port, addr)
    if not endpoint.port:
        return None
    if bool(endpoint.tls_cert) != bool(endpoint.tls_key):
        raise ConfigError("metrics TLS needs both a certificate and a key file")
    if bool(endpoint.basic_auth_user) != bool(endpoint.basic_auth_password):
        raise ConfigError("metrics basic auth needs both a user and a password")
    app = make_wsgi_app(REGISTRY if role is None else REGISTRIES[Role(role)])
    if endpoint.basic_auth_user and endpoint.basic_auth_password:
        app = _basic_auth(app, endpoint.basic_auth_user, endpoint.basic_auth_password)
    port_ = 0 if endpoint.port == ANY_PORT else endpoint.port
    server = make_server(endpoint.addr, port_, app, _QuietServer, handler_class=_QuietHandler)
    if endpoint.tls_cert and endpoint.tls_key:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(endpoint.tls_cert, endpoint.tls_key)
        except (OSError, ssl.SSLError) as exc:
            server.server_close()
            raise ConfigError(f"metrics TLS certificate/key: {exc}") from exc
        # the handshake runs in each connection's own thread, under the handler's timeout: never in
        # the accepting thread, where one idle client would block every scrape
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    scheme = "https" if endpoint.tls_cert else "http"
    log.info("%smetrics on %s://%s:%d/metrics", f"{role} " if role else "", scheme, endpoint.addr,
             server.server_port)
    return server


def role_of_module(module: str) -> Role | None:
    """The role whose families a module of that name exports (None: no single one)."""
    for role in Role:
        if module == f"streamer.{role}" or module.startswith(f"streamer.{role}."):
            return role
    return None


def _basic_auth(app: Any, user: str, password: str) -> Any:
    expected = b"Basic " + base64.b64encode(f"{user}:{password}".encode())

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        if not hmac.compare_digest(_header_bytes(environ.get("HTTP_AUTHORIZATION", "")), expected):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="streamer"')])
            return [b"unauthorized\n"]
        return app(environ, start_response)

    return guarded


def _header_bytes(value: str) -> bytes:
    """A header as sent (WSGI gives it as latin-1 text); anything else is no credential (compared
    as bytes: ``compare_digest`` refuses non-ASCII text, which made a 500 of a 401)."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return b""


class _QuietServer(ThreadingWSGIServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that fails its TLS handshake, speaks plain HTTP to the TLS port or stays silent
        past the timeout: one debug line, never a traceback on stderr (scanners and probes do it)."""
        log.debug("/metrics: a connection from %s failed: %s", client_address, sys.exc_info()[1])


class _QuietHandler(WSGIRequestHandler):
    timeout = 10.0  # seconds a connection may stay silent (its TLS handshake included)

    def log_message(self, format: str, *args: Any) -> None:  # scrapes are not news
        return


# --- series of dropped databases ---
_dropped: set[str] = set()
_dropped_lock = threading.Lock()


def forget_database(db: str) -> None:
    """Remove every series labelled ``db`` (a dropped target database): none stays on ``/metrics``
    until a restart. ``is_dropped(db)`` is then true until ``database_created(db)``."""
    name = db.lower()
    with _dropped_lock:
        _dropped.add(name)
    for family in _labelled_by_db():
        index = family._labelnames.index("db")
        with family._lock:
            gone = [key for key in family._metrics if key[index].lower() == name]
            for key in gone:
                del family._metrics[key]


def database_created(db: str) -> None:
    """``db`` exists (again): its series may be set."""
    with _dropped_lock:
        _dropped.discard(db.lower())


def is_dropped(db: str) -> bool:
    """Whether ``db`` was dropped since it was last created (writers of per-database series skip it)."""
    with _dropped_lock:
        return db.lower() in _dropped


def _labelled_by_db() -> list[MetricWrapperBase]:
    return [m for m in globals().values() if isinstance(m, MetricWrapperBase) and "db" in m._labelnames]
