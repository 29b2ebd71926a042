"""The target job: a Spark Structured Streaming query that applies a source's events in order.

Kafka (``streamer_kafka`` data source, offsets in Spark's checkpoint) -> ``foreachBatch`` ->
decode -> plan (pure) -> apply (catalog + files) -> progress. A micro-batch holds metadata events,
which are small, so the batch is collected on the driver and applied there in event-id order;
file copies fan out to a thread pool. Scaling out (docs/scaling.md): ``--consistency database``
applies databases in parallel lanes (``streamer.target.job.lanes`` / ``parallel``), and large copies run
as tasks on the executors (``streamer.target.job.executor_copy``).

An event that cannot be applied halts its database at that event: the halt (with the Kafka offset
of the event) is stored in the target state, the database's later events are held, and other
databases go on. After ``streamer target retry`` the job re-reads the held range from Kafka.

Before anything of a batch is applied, its records are checked against the event-id chain
(``streamer.target.state.chain``): when records are missing from the topic (purged, or a recreated topic
refilled past the checkpoint) the records before the break are applied, nothing after it is, the
query stops and the job halts: ``streamer_target_data_loss`` = 1 on ``/metrics`` until the job is
stopped, which then exits with ``EventChainError``. A restart finds the same break again (the
checkpoint stays before it) until an operator rebuilds the target or runs ``reset-chain``.

``until_event`` bounds the job (``streamer.target.job.bounded``): it applies events up to that id and
stops without committing a batch that holds later ones. A failover (``streamer.target.dr.failover``)
fences the job: it stops before its next batch and refuses to start again.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamer import metrics
from streamer.errors import DataLossError, EventChainError, StreamerError
from streamer.events.codec import EventDeserializer
from streamer.events.model import Event, EventType
from streamer.metastore.catalog import Catalog
from streamer.target.apply.applier import Applier, regrouped
from streamer.target.apply.files import FileCopier
from streamer.target.apply.layout import check_external_layout
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import Plan, plan
from streamer.target.dr.failover import FailedOverError, read_record, refuse_if_failed_over
from streamer.target.job.batch_source import BatchSource, consumer_group, source_options
from streamer.target.job.bounded import UntilReached, reached, split_at
from streamer.target.job.executor_copy import PooledFileCopier, prestage_groups
from streamer.target.job.failure import Outcome, Recheck, failure_error, reported_offset
from streamer.target.job.held_events import HeldEvents, kafka_record_at, kafka_replay
from streamer.target.job.lane_runner import LaneRunner
from streamer.target.job.preflight import Waiting, claim
from streamer.target.job.progress import JobProgress
from streamer.target.job.settings import TargetSettings
from streamer.target.job.spark_kerberos import jvm_kerberos_login, spark_kerberos_conf
from streamer.target.job.voided_halts import VoidedHalts
from streamer.target.state.chain import Anchor
from streamer.target.state.state_file import TargetState
from streamer.target.state.status import write_mode
from streamer.target.state.visibility import source_file_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streamer.target.dr.verify import VerifyLoop

log = logging.getLogger(__name__)


class BatchApplier:
    """Applies micro-batches of encoded events; driver-side, so it may hold clients and state."""

    def __init__(
        self,
        settings: TargetSettings,
        catalog: Catalog,
        *,
        replay: Callable[[int, int], Iterable[tuple[int, bytes]]] | None = None,
        record_at: Callable[[int], bytes | None] | None = None,
        on_applied: Callable[[Event, float], None] | None = None,
        copier: FileCopier | None = None,
        catalogs: Callable[[], Catalog] | None = None,
    ) -> None:
        self.settings = settings
        self.state = TargetState(settings.layout.state_dir, label=_target_name(settings))
        layout, scale = settings.layout, settings.scale
        paths = TargetPaths(layout.warehouse_root, layout.external_base_dir, layout.external_layout)
        check_external_layout(paths)  # never re-points external tables of another layout
        # consistency mode: lanes of metastore connections from ``catalogs`` (streamer.target.job.lane_runner)
        self.runner = LaneRunner(scale.consistency, catalogs, scale.apply_lanes)
        write_mode(layout.state_dir, scale.consistency, scale.apply_lanes, layout.db_map)
        self.applier = _applier(settings, catalog, paths, self.state, copier)
        self.applier.load_progress()
        self.deserialize = EventDeserializer(check_envelope=False)  # the applier refuses it: a halt
        # held events are always re-read from the topic: a release that cannot replay would pass them
        self.held = HeldEvents(replay if replay is not None else kafka_replay(settings), self.deserialize)
        self._record_at = record_at if record_at is not None else kafka_record_at(settings)
        self.voided = VoidedHalts(self.held.events_between)  # halts at gone files a later event voids
        self._on_applied = on_applied
        # consumed and applied progress, the chain's anchor, the watermark (streamer.target.job.progress)
        # with --batch-follow, a watermark connection of its own: a batch's end is written while the
        # next records apply (streamer.target.job.batch_end)
        follows = scale.batch_follow_seconds > 0 and scale.batch_read == "driver"
        watermark_catalog = catalogs() if catalogs is not None and follows else None
        self.progress = JobProgress(settings, catalog, paths.database_location, self.applier.target_db,
                                    watermark_catalog=watermark_catalog)
        # where later steps' files are copied while earlier steps run (PooledFileCopier.prestage)
        self.staging_dir = paths.warehouse.join(*STAGING_DIR.split("/"), source_file_name(settings.source_id))
        self.batches = 0  # micro-batches processed by this instance
        self.stopped_at_until: UntilReached | None = None  # set when a straddling batch stopped the job
        self.lock = threading.Lock()  # held per batch; the external-table sync takes it too
        # run by close(), newest first
        self.closers: list[Callable[[], None]] = [self.applier.markers.dir_fsyncs.close, self.runner.close]
        if watermark_catalog is not None:
            self.closers += [watermark_catalog.close, self.progress.close]
        self.stoppers: list[Callable[[], None]] = []  # run by stop_reading(): before the query stops

    def stop_reading(self) -> None:
        """End the running micro-batch's reading on (``--batch-follow``): call it before stopping the
        query, which waits for that micro-batch."""
        for stop in self.stoppers:
            stop()

    def close(self) -> None:
        """Release the lanes' connections and the clients a query started for this job (its
        micro-batches' Kafka reader); after the query has stopped."""
        while self.closers:
            self.closers.pop()()

    def settle(self) -> None:
        """Wait until the last batch's end (progress file, watermark, anchor) is written: before Spark
        commits a micro-batch whose records were processed with ``settle=False``."""
        self.progress.settle()

    def process(
        self, records: Iterable[tuple[int, bytes]], *, bound: int | None = None, settle: bool = True
    ) -> Plan:
        """Apply one batch of ``(offset, value)`` records; returns the plan that was executed.
        ``bound``: held events are re-read up to it when there is no record (``replay_held``).
        ``settle=False``: the batch's end may be written after this returns (``settle``).

        Raises ``EventChainError`` (after applying the records before it) when the batch does not
        continue the event chain, and on every batch after that."""
        if self.progress.chain_error is not None:
            raise self.progress.chain_error
        started = time.monotonic()
        refuse_if_failed_over(self.settings.layout.state_dir)  # a failover fences the job before any change
        self.reload_state()
        decoded = [(offset, self.deserialize(value)) for offset, value in records]
        chain = self.progress.check_chain(decoded, self._event_at)
        # the halts as they stand (after a restart, or an operator's retry or skip), before any step:
        # no metastore call when the record already says so
        self._publish(halt=True)
        offsets: dict[int, int] = {}  # event id -> Kafka offset, for halts in this batch
        events = []
        for offset, event in decoded[: chain.intact]:
            if event.event_type is not EventType.PROGRESS:  # a PROGRESS record reuses the id of the
                offsets.setdefault(event.event_id, offset)  # event it follows: a retry starts at that event
            events.append(event)
        self.state.offset_of = offsets.get  # a halt records where to re-read from in the same change
        read = list(events)  # from the topic in this batch (the replayed held events come next)
        first_offset = min((offset for offset, _ in decoded[: chain.intact]), default=bound)
        replayed, released = self.held.take(self.state, self.applier.load_progress, first_offset, offsets)
        events.extend(replayed)
        bounded = split_at(events, self.settings.kafka.until_event)
        planned = plan(bounded.within, self.applier.progress, set(self.state.halts()))
        the_plan = regrouped(self.applier, planned)  # --coalesce-backlog: per table, fenced
        before = self.progress.consumed
        copier = self.applier.copier
        if isinstance(copier, PooledFileCopier):
            copier.prestage(prestage_groups(the_plan), self.staging_dir)
        try:
            report = self.runner.run(
                self.applier, the_plan, self.state, on_halt=lambda _: self._publish(before, halt=True)
            )
        finally:
            if isinstance(copier, PooledFileCopier):
                copier.drop_prestaged()  # a halted database's, or a failed batch's: never published
        for db, halt in report.halted.items():
            if halt.event_id in offsets:
                self.state.set_offset(db, offsets[halt.event_id])
        for db, offset in released.items():
            self.state.replay_done(db, offset)
        # re-read next batch, through the event that voids them
        self.voided.release(self.state, read, events, first_offset)
        applied = self.progress.applied(the_plan, report.applied)
        if self._on_applied is not None:
            now = time.time()
            for event in applied:
                self._on_applied(event, now)
        newest = max((e.event_id for e in events), default=0)  # PROGRESS records included
        self.progress.batch_done(the_plan, bounded, newest, bool(report.applied), chain,
                                 self.applier.progress, self._stuck(), later=not settle)
        metrics.TARGET_BATCH_SECONDS.observe(time.monotonic() - started)
        self.batches += 1
        if chain.error is not None:
            raise chain.error
        if bounded.straddles:
            assert self.settings.kafka.until_event is not None and bounded.first_held is not None
            # the prefix is applied; raising keeps Spark from committing the batch (see bounded.py)
            self.stopped_at_until = UntilReached(self.settings.kafka.until_event, bounded.first_held)
            log.info("%s", self.stopped_at_until)
            raise self.stopped_at_until
        return the_plan

    def _event_at(self, offset: int) -> Event | None:
        """The event of the topic's record at ``offset`` (None: no record, or not one of a stream's)."""
        value = self._record_at(offset)
        if value is None:
            return None
        try:
            return self.deserialize(value)
        except StreamerError:
            return None

    @property
    def anchor(self) -> Anchor | None:
        """The last record this job consumed (the event chain's anchor)."""
        return self.progress.anchor

    @property
    def consumed(self) -> tuple[bool, int]:
        """(whether this job ever consumed a record, in this run or before it; the newest event id)."""
        consumed = self.progress.consumed
        return self.batches > 0 or consumed > 0 or self.anchor is not None, consumed

    @property
    def reached_until(self) -> bool:
        """A bounded job consumed everything up to its bound (or stopped inside a batch past it)."""
        until = self.settings.kafka.until_event
        return self.stopped_at_until is not None or reached(self.progress.consumed, until)

    def _stuck(self) -> set[str]:
        """Databases that are halted or hold events to replay: replicated only through their own id."""
        return set(self.state.halts()) | set(self.state.pending_replays())

    def _publish(self, consumed: int | None = None, *, halt: bool = False) -> None:
        self.progress.publish(self.applier.progress, self._stuck(), consumed=consumed, halt=halt)

    def reload_state(self) -> None:
        """Operators retry/skip from another process (``streamer target retry``): read their changes."""
        before = set(self.state.halts())
        self.state = TargetState(self.settings.layout.state_dir, label=self.applier.target_db)
        self.applier.state = self.state
        for db in before - set(self.state.halts()):
            metrics.TARGET_HALTED.labels(db=self.applier.target_db(db)).set(0)


def replay_held(job: BatchApplier) -> bool:
    """Re-read the held events of a released database (``streamer target retry``, a voided halt)
    when no record comes to bound them: on an idle stream, up to the last record ``job`` consumed."""
    with job.lock:
        job.reload_state()
        released = set(job.state.pending_replays()) - set(job.state.halts())
        if not released or job.anchor is None or job.anchor.topic != job.settings.kafka.topic:
            return False
        job.process([], bound=job.anchor.offset + 1)
        return True


def _applier(
    settings: TargetSettings,
    catalog: Catalog,
    paths: TargetPaths,
    state: TargetState,
    copier: FileCopier | None,
) -> Applier:
    return Applier(
        catalog,
        copier or FileCopier(max_workers=settings.scale.copy_workers, roots=paths.roots),
        paths,
        settings.source_id,
        db_map=dict(settings.layout.db_map),
        allow_existing_db=settings.trust.allow_existing_db,
        state=state,
        mark_readonly=settings.layout.mark_readonly,
        sources=settings.trust.source_rules(),
        markers_per_batch=settings.scale.markers_per_batch,
        coalesce_backlog=settings.scale.coalesce_backlog,
    )


STAGING_DIR = "_streamer/staging"
"""Below the warehouse root, one directory per source: files copied ahead of their steps (hidden)."""


# --- Spark wiring ------------------------------------------------------------------------------


def spark_session(
    settings: TargetSettings, app_name: str = "streamer-target", *, log_level: str | None = None
) -> SparkSession:
    """A session whose Python workers use this interpreter and whose Hive catalog is the target HMS.

    A driver JVM this process starts gets streamer's quiet defaults (``streamer.target.job.driver_jvm``);
    ``log_level`` is its log4j2 level (default :func:`streamer.logs.spark_log_level`)."""
    from pyspark.sql import SparkSession

    from streamer.logs import spark_log_level
    from streamer.target.job import driver_jvm
    from streamer.target.job.executor_copy import executor_conf

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    kerberos = spark_kerberos_conf(settings.metastore.auth)
    conf = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.hadoop.hive.metastore.uris": settings.metastore.uri,
        "spark.sql.warehouse.dir": settings.layout.warehouse_root,
        "spark.sql.catalogImplementation": "hive",
        **kerberos,
    }
    # spark-submit (which sets PYSPARK_GATEWAY_PORT) or SPARK_MASTER chooses the master; else local
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = settings.scale.spark_master or os.environ.get("SPARK_MASTER", "local[2]")
        conf["spark.master"] = master
        conf.update(executor_conf(master))
        driver_jvm.start(conf, master, log_level or spark_log_level())
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if kerberos:
        jvm_kerberos_login(spark, settings.metastore.auth)
    return spark


def start_query(
    spark: SparkSession, settings: TargetSettings, batch_applier: BatchApplier
) -> StreamingQuery:
    """Start the streaming query; the caller owns it (awaitTermination / stop)."""
    from streamer.kafka.spark_source import register

    register(spark)
    _choose_checkpoint_manager(spark, settings.layout.checkpoint_dir)
    options = source_options(settings)
    reader = spark.readStream.format("streamer_kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    stream = reader.load()
    source = BatchSource(settings.layout.checkpoint_dir, options, settings.scale.batch_read,
                         settings.scale.batch_follow_seconds)
    batch_applier.closers.append(source.close)
    batch_applier.stoppers.append(source.stop)

    quiet_normal_stops()

    def apply(read: list[tuple[int, bytes]]) -> None:
        with batch_applier.lock:
            try:
                batch_applier.process(read, settle=False)
            except NORMAL_STOPS:
                quiet_query_end(spark)
                raise

    return (
        stream.writeStream.foreachBatch(micro_batch(source, batch_applier, apply))
        .option("checkpointLocation", settings.layout.checkpoint_dir)
        .trigger(processingTime=f"{trigger_interval(settings)} seconds")
        .queryName(f"streamer-target-{settings.source_id}")
        .start()
    )


def micro_batch(
    source: BatchSource, job: BatchApplier, apply: Callable[[list[tuple[int, bytes]]], None]
) -> Callable[[DataFrame, int], None]:
    """``foreachBatch``'s function: the micro-batch's records, then those that arrive after them
    (``BatchSource.follow``), each read through ``apply``; then every apply's end is written
    (``BatchApplier.settle``) before Spark commits the batch, so that the chain's anchor is never
    behind what Spark's checkpoint says was consumed."""

    def on_batch(df: DataFrame, batch_id: int) -> None:
        read = source.records(df, batch_id)
        if read:
            apply(read)
        source.follow(batch_id, apply, lambda: job.reached_until)
        job.settle()

    return on_batch


NORMAL_STOPS = (UntilReached, FailedOverError)
"""Raised inside a micro-batch so that Spark does not commit it, yet not failures: the job stops
with one line (``run``'s return value), no ERROR and no traceback."""

# Spark's streaming execution logs a query that ends with an exception as an ERROR with its stack
STREAM_EXECUTION_LOGGERS = ("org.apache.spark.sql.execution.streaming",)


class _NormalStopFilter(logging.Filter):
    """Drops py4j's "exception while executing the Python Proxy" record of a normal stop."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], NORMAL_STOPS))


def quiet_normal_stops() -> None:
    """py4j logs every exception a foreachBatch raises, with its traceback: not these."""
    logger = logging.getLogger("py4j.clientserver")
    if not any(isinstance(f, _NormalStopFilter) for f in logger.filters):
        logger.addFilter(_NormalStopFilter())


def quiet_query_end(spark: SparkSession) -> None:
    """Turn off the JVM's streaming-execution log before a normal stop ends the query: it would log
    the stop as an ERROR with a Java and Python stack. The job stops right after; a real failure is
    still raised from the query's exception (``_run``)."""
    try:
        jvm: Any = spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.OFF
        for name in STREAM_EXECUTION_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception as exc:  # a Spark without log4j2 core: the stop is only noisier
        log.debug("could not quiet Spark's streaming log: %s", exc)


def _choose_checkpoint_manager(spark: SparkSession, checkpoint_dir: str) -> None:
    """The cheapest safe checkpoint file manager this Spark has, unless the user chose one."""
    from streamer.target.job.checkpoint import CHECKPOINT_MANAGER_CONF, manager_for

    jvm: Any = spark.sparkContext._jvm

    def available(name: str) -> bool:
        try:
            jvm.java.lang.Class.forName(name)
        except Exception:  # py4j wraps ClassNotFoundException: another Spark version
            return False
        return True

    current = spark.conf.get(CHECKPOINT_MANAGER_CONF, None)
    wanted = manager_for(checkpoint_dir, current, available)
    if wanted == current:
        return
    if wanted is None:
        spark.conf.unset(CHECKPOINT_MANAGER_CONF)
    else:
        spark.conf.set(CHECKPOINT_MANAGER_CONF, wanted)
    log.info("checkpoint %s: written through %s", checkpoint_dir, wanted or "Spark's default manager")


def trigger_interval(settings: TargetSettings) -> float:
    """Spark's trigger interval. The driver reader waits up to ``trigger_seconds`` for records
    inside a trigger and returns as soon as one arrives, so triggers run back to back (interval 0):
    a record never waits for the next interval. The task reader polls every ``trigger_seconds``."""
    return 0.0 if settings.scale.kafka_reader == "driver" else settings.scale.trigger_seconds


def run(settings: TargetSettings, *, until: Callable[[], bool] | None = None) -> str:
    """Run the target job in the foreground until stopped (or ``until()`` is true, or it reached
    ``settings.kafka.until_event``, or the target was failed over); returns why it stopped. The metastore
    first (a wrong one fails before Spark), then the state dir is held and bound (``claim``)."""
    from streamer.metastore.thrift import HmsCatalog

    catalog = HmsCatalog(settings.metastore.uri, auth=settings.metastore.auth)
    try:
        with claim(settings, catalog):
            return _run(settings, until, catalog)
    finally:
        catalog.close()


FAILED_OVER = "failed over: this target no longer applies events"


def _run(settings: TargetSettings, until: Callable[[], bool] | None, catalog: Catalog) -> str:
    from pyspark.errors import StreamingQueryException

    from streamer.metastore.thrift import HmsCatalog
    from streamer.target.job.executor_copy import executor_copier
    from streamer.target.job.external_sync import start_background

    spark = spark_session(settings)
    scale = settings.scale
    for py_file in scale.py_files:
        spark.sparkContext.addPyFile(py_file)
    batch_applier = BatchApplier(
        settings, catalog,
        copier=executor_copier(spark, scale.executor_copy_min_bytes, scale.executor_copy_min_files,
                               scale.copy_workers),
        catalogs=lambda: HmsCatalog(settings.metastore.uri, auth=settings.metastore.auth),
    )
    query = start_query(spark, settings, batch_applier)
    log.info("target job started: topic %s -> %s, consistency %s", settings.kafka.topic,
             settings.metastore.uri, scale.consistency)
    if consumer_group(settings):
        log.info("consumer group %s hears of each applied micro-batch's offset (Kafka lag tools only)",
                 consumer_group(settings))
    external_sync = start_background(settings, batch_applier.lock)
    verifier = start_verify_loop(settings, batch_applier.lock) if settings.verify.every > 0 else None
    stopped = "stopped"
    waiting = Waiting(settings.kafka.topic, settings.source_id, settings.kafka.until_event, time.monotonic())
    try:
        failure: str | None = None
        try:
            while query.isActive:
                if until is not None and until():
                    break
                if batch_applier.reached_until:
                    stopped = f"reached --until-event {settings.kafka.until_event}"
                    break
                if read_record(settings.layout.state_dir) is not None:
                    stopped = FAILED_OVER
                    break
                if not query.awaitTermination(1):
                    replay_held(batch_applier)  # a retry on an idle stream
                note = waiting.note(time.monotonic(), *batch_applier.consumed)
                if note is not None:
                    log.log(*note)
            exc: Any = query.exception()
            failure = None if exc is None else str(exc)
        except StreamingQueryException as raised:  # awaitTermination raises the query's failure
            failure = str(raised)
        if batch_applier.progress.chain_error is not None:
            _halt_on_data_loss(batch_applier.progress.chain_error, until)
        if failure is not None and batch_applier.stopped_at_until is not None:
            stopped = str(batch_applier.stopped_at_until)  # the bound, not a failure
        elif failure is not None and read_record(settings.layout.state_dir) is not None:
            stopped = FAILED_OVER
        elif failure is not None:
            raise query_failure(settings, failure)
        log.info("target job %s", stopped)
        return stopped
    finally:
        if verifier is not None:
            verifier.stop()
        if external_sync is not None:
            external_sync.stop()
        batch_applier.stop_reading()
        query.stop()
        batch_applier.close()


def _target_name(settings: TargetSettings) -> Callable[[str], str]:
    """A source database's name on this target (``--db-map``), as the applier names it."""
    mapping = {k.lower(): v.lower() for k, v in settings.layout.db_map.items()}
    return lambda db: mapping.get(db.lower(), db.lower())


def start_verify_loop(settings: TargetSettings, lock: threading.Lock) -> VerifyLoop:
    """Continuous verification in this process, between micro-batches (``--verify-every``)."""
    from streamer.target.dr.verify import VerifyLoop, VerifySettings

    verify_settings = VerifySettings(
        hms_uri=settings.metastore.uri,
        state_dir=settings.layout.state_dir,
        bootstrap_servers=settings.kafka.bootstrap_servers,
        topic=settings.kafka.topic,
        source_id=settings.source_id,
        kafka_settings=dict(settings.kafka.config),
        db_map=dict(settings.layout.db_map),
        warehouse_root=settings.layout.warehouse_root,
        external_base_dir=settings.layout.external_base_dir,
        hms_auth=settings.metastore.auth,
        source_rules=settings.trust.source_rules(),
        max_record_bytes=settings.trust.max_record_bytes,
    )
    also = None
    if settings.verify.source_hms_uri or settings.verify.source_notification_db:
        from streamer.target.dr.source_check import SourceConnection, loop_check

        source = SourceConnection(settings.verify.source_hms_uri, settings.verify.source_notification_db,
                                  settings.verify.source_auth)
        also = loop_check(verify_settings, source, repair=settings.verify.repair)
    return VerifyLoop(verify_settings, settings.verify.every, lock, also=also).start()


def _halt_on_data_loss(error: EventChainError, until: Callable[[], bool] | None) -> None:
    """Stay up, applying nothing, so that ``/metrics`` keeps showing ``streamer_target_data_loss`` 1
    (an exited job shows nothing); then fail with the error. Stopped by SIGTERM/SIGINT or ``until``."""
    log.error("target halted on data loss; nothing more is read or applied, /metrics stays up until the "
              "job is stopped: %s", error)
    while until is None or not until():
        time.sleep(1.0)
    raise error


RECHECK_UNREACHABLE_S = 60.0  # how long query_failure asks a broker that does not answer


def query_failure(settings: TargetSettings, failure: str) -> StreamerError:
    """The error a failed query stops the job with (``streamer.target.job.failure``). The topic is
    checked again at the offset the checkpoint resumes from (else the one the failure names): records
    a reachable broker no longer holds (a recreated topic, a broker that lost its data) make it
    ``DataLossError``, also when Spark reports something else first (a Python source worker that died
    while the broker was away). A failure that says ``DataLossError`` is one only once a reachable
    broker confirms it: when the broker does not answer, the job stops with a transport error and
    ``streamer_target_data_loss`` stays 0."""
    from streamer.target.job.checkpoint import resume_offset

    offset = resume_offset(settings.layout.checkpoint_dir)
    if offset is not None and offset.get("topic") == settings.kafka.topic:
        needed: tuple[int, int] | None = (int(offset.get("partition", 0)), int(offset["offset"]))
    else:
        needed = reported_offset(failure, settings.kafka.topic)
    recheck = Recheck(Outcome.UNCHECKED) if needed is None else _recheck(settings, *needed)
    where = f"{settings.kafka.topic!r} partition {needed[0] if needed else 0}"
    error = failure_error(failure, recheck, where)
    if recheck.outcome is Outcome.UNREACHABLE:
        log.warning("could not check the topic after the query failed: %s", recheck.detail)
    if isinstance(error, DataLossError):
        metrics.TARGET_DATA_LOSS.set(1)
    return error


def _recheck(settings: TargetSettings, partition: int, start: int) -> Recheck:
    """Whether a reachable broker still holds offset ``start`` of the topic's ``partition``."""
    from confluent_kafka import Consumer

    from streamer.kafka.client_log import with_client_log
    from streamer.kafka.errors import KafkaClientError
    from streamer.kafka.record_limit import consumer_settings
    from streamer.kafka.spark_source import checked_watermarks
    from streamer.kafka.spark_source_options import check_start

    config = {
        "bootstrap.servers": settings.kafka.bootstrap_servers,
        "group.id": f"streamer-check-{settings.source_id}",
        "enable.auto.commit": False, **settings.kafka.config,
    }
    limits = consumer_settings(settings.trust.max_record_bytes, config)
    consumer = Consumer(with_client_log({**config, **limits}))
    try:
        marks = checked_watermarks(consumer, settings.kafka.topic, partition, start, RECHECK_UNREACHABLE_S)
        check_start(settings.kafka.topic, partition, start, marks, fail_on_data_loss=True)
    except DataLossError as loss:
        return Recheck(Outcome.LOST, str(loss), start)
    except KafkaClientError as unreachable:
        return Recheck(Outcome.UNREACHABLE, str(unreachable), start)
    finally:
        consumer.close()
    return Recheck(Outcome.HELD, offset=start, marks=marks)
