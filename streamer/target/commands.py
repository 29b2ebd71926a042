"""``streamer target run|retry|skip`` and ``streamer status``: running and operating a target."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from streamer.errors import ConfigError
from streamer.fs_options import fs_options
from streamer.kafka.naming import DEFAULT_TOPIC_HELP, topic_or_default
from streamer.kafka.record_limit import (
    DEFAULT_TARGET_MAX_RECORD_BYTES,
    MAX_TARGET_MAX_RECORD_BYTES,
    MIN_TARGET_MAX_RECORD_BYTES,
)
from streamer.metastore.auth_options import auth_from_options, hms_auth_options
from streamer.target.dr.commands import against_source_options, source_connection, verify_source_options
from streamer.target.state.dir_option import DEFAULT_HELP, state_dir_option

if TYPE_CHECKING:
    from streamer.target.job.settings import TargetSettings

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


def _pairs(values: tuple[str, ...], what: str, sep: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, found, value = item.partition(sep)
        if not found or not key or not value:
            raise ConfigError(f"{what}: expected KEY{sep}VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _kafka_settings(bootstrap_servers: str, pairs: tuple[str, ...]) -> dict[str, Any]:
    """librdkafka settings from ``KEY=VALUE`` pairs, validated (unknown keys are named and refused)."""
    from streamer.kafka.settings import config_from_options

    config = config_from_options(bootstrap_servers, pairs)
    config.pop("bootstrap.servers", None)
    return config


def source_trust_options(repair: bool = False) -> Callable[[F], F]:
    """``--source-prefix``, ``--source-cmroot``, ``--allow-unverified-files``: what the target may read
    (``streamer.target.apply.sources``, docs/security.md)."""
    when = "With --repair: " if repair else ""

    def decorate(fn: F) -> F:
        for option in reversed([
            click.option(
                "--source-prefix", multiple=True, metavar="URL",
                help=f"{when}A store of the source (its warehouse, external dirs, function jars: "
                "hdfs://nn:8020/warehouse, s3a://bucket/wh); repeatable, or space-separated in the env "
                "var. Given any, every file is read only from below one of them. [default: each file "
                "only from below its own table's or partition's location, as the event names it; "
                "function resources only from below their database's recorded source location, its "
                "<root>/<db>.db warehouse root or a --source-cmroot]",
            ),
            click.option(
                "--source-cmroot", multiple=True, metavar="URL",
                help=f"{when}The source's change-manager root(s) (hive.repl.cmrootdir); repeatable. Given "
                "any, cmroot copies are read only from below them. [default: a copy named "
                "<cmroot>/<file name>_<checksum> on the file's own filesystem]",
            ),
            click.option(
                "--allow-unverified-files", is_flag=True,
                help=f"{when}Copy data files whose event carries no checksum (else their database "
                "halts). Function resources never carry one and are always copied unverified.",
            ),
        ]):
            fn = option(fn)
        return fn

    return decorate


@click.group()
def target() -> None:
    """Run a target job, and get a halted database going again."""


@target.command("run")
@click.option("--bootstrap-servers", required=True, help="Kafka bootstrap servers (host:port,...).")
@click.option(
    "--kafka-setting", "-X", multiple=True, metavar="KEY=VALUE", help="librdkafka setting; repeatable."
)
@click.option("--source-id", default="source", show_default=True, help="Source id the agent publishes as.")
@click.option("--topic", default=None, help=f"Topic to read. [default: {DEFAULT_TOPIC_HELP}]")
@click.option("--hms-uri", required=True, help="Target metastore Thrift URI (thrift://host:port).")
@hms_auth_options()
@fs_options()
@click.option("--warehouse-root", required=True, help="Target warehouse root (managed data goes here).")
@click.option("--external-base-dir", default=None, help="Base dir for external tables' data on the target.")
@click.option(
    "--external-layout",
    type=click.Choice(["authority", "path"]),
    default="authority",
    show_default=True,
    help="Where external tables go below --external-base-dir: authority = <base>/<scheme>/<authority>/"
    "<source path>, so sources and namenodes never collide; path = <base>/<source path>, the layout of "
    "replicas made before (the base dir records its layout; a mismatch is refused at start).",
)
@source_trust_options()
@state_dir_option(DEFAULT_HELP + " Created when missing.", create=True)
@click.option(
    "--checkpoint-dir",
    default=None,
    help="Spark checkpoint dir, any Hadoop URL (hdfs://, s3a://, file://) [default: <state-dir>/checkpoint].",
)
@click.option("--db-map", multiple=True, metavar="SRC:DST", help="Rename a source database; repeatable.")
@click.option("--allow-existing-db", is_flag=True, help="Apply into databases not created by streamer.")
@click.option("--max-events-per-trigger", default=5000, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--max-record-bytes",
    default=DEFAULT_TARGET_MAX_RECORD_BYTES,
    show_default=True,
    type=click.IntRange(MIN_TARGET_MAX_RECORD_BYTES, MAX_TARGET_MAX_RECORD_BYTES),
    help="Largest record (key and value, decompressed) the job reads; keep it at least the agent's "
    "--max-record-bytes. A larger one stops the stream at its offset before it is decoded. Sets the "
    "consumers' receive.message.max.bytes, where librdkafka stops decompressing a zstd batch.",
)
@click.option(
    "--trigger-seconds",
    default=0.5,
    show_default=True,
    type=click.FloatRange(min=0),
    help="With --kafka-reader driver: the longest a micro-batch with nothing to read waits for records "
    "(a record ends the wait at once; triggers run back to back). With task: Spark's trigger interval.",
)
@click.option(
    "--kafka-reader",
    type=click.Choice(["driver", "task"]),
    default="driver",
    show_default=True,
    help="driver: one long-lived consumer reads on the driver while Spark plans (no read task per "
    "micro-batch; lowest lag). task: a Spark task reads each micro-batch with new consumers.",
)
@click.option(
    "--consumer-group",
    default=None,
    help="Kafka consumer group the job commits each applied micro-batch's offset to, so that Kafka lag "
    "tools see this target, stopped or running (never read back: the checkpoint positions the job); "
    "'' for none [default: streamer-target-<source-id>-<metastore host>-<hash of --hms-uri and "
    "--state-dir>].",
)
@click.option("--copy-workers", default=8, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--consistency",
    type=click.Choice(["global", "database"]),
    default="global",
    show_default=True,
    help="global: one lane, prefix consistency across all databases (read replicas). database: a lane "
    "per database, applied concurrently; prefix consistency per database only (DR catch-up).",
)
@click.option(
    "--apply-lanes",
    default=4,
    show_default=True,
    type=click.IntRange(min=1),
    help="With --consistency database: lanes applied at once, each with its own metastore connection.",
)
@click.option(
    "--executor-copy-min-bytes",
    default=256 << 20,
    show_default=True,
    type=click.IntRange(min=0),
    help="A copy (one event's files of one object) of at least this many bytes runs as Spark tasks on "
    "the executors; 0 = never by size.",
)
@click.option(
    "--executor-copy-min-files",
    default=256,
    show_default=True,
    type=click.IntRange(min=0),
    help="... or of at least this many files; 0 = never by count.",
)
@click.option(
    "--py-files",
    multiple=True,
    metavar="ZIP",
    help="A zip of Python packages for the executors (as spark-submit --py-files), e.g. streamer itself "
    "when executors lack it; repeatable. See docs/deploy.md.",
)
@click.option(
    "--spark-master",
    default=None,
    help="Spark master when not started by spark-submit (local[2], local-cluster[2,1,768], "
    "spark://host:7077). [default: $SPARK_MASTER or local[2]]",
)
@click.option(
    "--external-sync-seconds",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Sync the directories of external tables and of tables replicated by state (Spark datasource "
    "tables, Hive Parquet/ORC tables Spark writes with conversion on) from the source every N seconds "
    "(0 = off).",
)
@click.option(
    "--external-source-prefix",
    default="file://",
    show_default=True,
    help="Scheme and authority of the source filesystem, for the external sync (hdfs://nn:8020, s3://b).",
)
@click.option(
    "--verify-every",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Verify the replica against the source (as `streamer verify`) in this process, SECONDS after "
    "the previous verification ended; each database is read between micro-batches (0 = off).",
)
@verify_source_options
@click.option(
    "--until-event",
    default=None,
    type=click.IntRange(min=0),
    help="Apply source events up to this id, then stop (a later run continues with the next one).",
)
@click.option(
    "--markers-per-batch",
    is_flag=True,
    help="Write a database's repl.last.id once per micro-batch of 8 or more events (a backlog), not "
    "after every step: fewer metastore calls while catching up, each step journaled in the state dir. "
    "Plain SQL readers (streamer.read.bracket) then cannot see steps inside a batch; "
    "streamer.read.snapshot readers stay exact (docs/design/consistency.md). [default: off]",
)
@click.option(
    "--coalesce-backlog",
    is_flag=True,
    help="Implies --markers-per-batch. A micro-batch of 8 or more events is applied regrouped per "
    "table: each table's ADD_PARTITIONs in one call, its ALTERs and statistics as the last one, "
    "create..drop as the drop, across other tables' events between them; far fewer metastore calls "
    "while catching up. Meanwhile its databases carry streamer.apply.fence and readers "
    "(streamer.read, streamer.read.sql) read again until the batch's end (docs/design/apply.md, "
    "'Coalescing a backlog'). [default: off]",
)
@click.option(
    "--mark-readonly",
    is_flag=True,
    help="Also set readonly=true on replicated databases (Hive's EnforceReadOnlyDatabaseHook refuses "
    "writes to them); `streamer failover` removes it.",
)
@click.option(
    "--watermark-db",
    default=None,
    help="Target database whose parameters publish the replication watermark, read by "
    "streamer.read.snapshot and plain SQL readers ('' = metrics only). "
    "[default: streamer_watermark_<source-id>]",
)
@click.option(
    "--archive",
    default=None,
    metavar="DIR",
    help="An event archive of the topic (`streamer archive run --dir`): when the target's position is "
    "older than the topic's first offset, the archive's records from there are applied first (each file "
    "verified), then the topic is read; the event chain is checked across the switch (docs/dr.md).",
)
@click.option("--metrics-port", default=9402, show_default=True, type=int, help="0 disables /metrics.")
@click.option("--metrics-addr", default="127.0.0.1", show_default=True, help="Bind address of /metrics.")
@click.option("--metrics-tls-cert", default=None, help="Serve /metrics over TLS with this certificate (PEM).")
@click.option("--metrics-tls-key", default=None, help="Private key (PEM) of --metrics-tls-cert.")
@click.option("--metrics-basic-auth-user", default=None, help="Require HTTP basic auth on /metrics.")
@click.option("--metrics-basic-auth-password", default=None, help="Password for --metrics-basic-auth-user.")
def run_cmd(**options: Any) -> None:
    """Apply the source's events to a target metastore and filesystem, continuously."""
    from streamer import metrics
    from streamer.target.job.preflight import preflight
    from streamer.target.job.streaming import run

    settings = run_settings(options)
    preflight(settings)  # a live job, another target's state dir, Kafka, the metastore, the topic: one line
    metrics.serve(
        metrics.MetricsEndpoint(
            options["metrics_port"], options["metrics_addr"], options["metrics_tls_cert"],
            options["metrics_tls_key"], options["metrics_basic_auth_user"],
            options["metrics_basic_auth_password"],
        ),
        role=metrics.Role.TARGET,
    )
    if settings.archive_dir is not None:  # before the query, which would start past the archive's records
        from streamer.target.job.archive_catchup import catch_up_from_archive

        catch_up_from_archive(settings)
    stopped = run(settings)
    click.echo(f"target job {stopped}")


def run_settings(options: Mapping[str, Any]) -> TargetSettings:
    """The job's settings from ``target run``'s parsed options (click's names), validated: what the
    command runs, and what a test running the job in its own process runs (``run_cmd.make_context``)."""
    from streamer.target.job.settings import TargetSettings

    o = options
    auth = auth_from_options(o["hms_auth"], o["hms_kerberos_principal"], o["hms_client_principal"],
                             o["hms_client_keytab"])
    if (o["verify_source_hms_uri"] or o["verify_source_notification_db"]) and not o["verify_every"]:
        raise click.UsageError("--verify-source-hms-uri/--verify-source-notification-db need --verify-every")
    state_dir = Path(o["state_dir"])
    return TargetSettings(
        bootstrap_servers=o["bootstrap_servers"],
        topic=topic_or_default(o["topic"], o["source_id"]),
        hms_uri=o["hms_uri"],
        hms_auth=auth,
        warehouse_root=o["warehouse_root"],
        state_dir=str(state_dir),
        checkpoint_dir=o["checkpoint_dir"] or str(state_dir / "checkpoint"),
        source_id=o["source_id"],
        external_base_dir=o["external_base_dir"],
        external_layout=o["external_layout"],
        source_prefixes=tuple(o["source_prefix"]),
        source_cmroots=tuple(o["source_cmroot"]),
        allow_unverified_files=o["allow_unverified_files"],
        kafka_settings=_kafka_settings(o["bootstrap_servers"], o["kafka_setting"]),
        db_map=_pairs(o["db_map"], "--db-map", ":"),
        allow_existing_db=o["allow_existing_db"],
        max_events_per_trigger=o["max_events_per_trigger"],
        max_record_bytes=o["max_record_bytes"],
        trigger_seconds=o["trigger_seconds"],
        kafka_reader=o["kafka_reader"],
        consumer_group=o["consumer_group"],
        copy_workers=o["copy_workers"],
        consistency=o["consistency"],
        apply_lanes=o["apply_lanes"],
        executor_copy_min_bytes=o["executor_copy_min_bytes"],
        executor_copy_min_files=o["executor_copy_min_files"],
        spark_master=o["spark_master"],
        py_files=tuple(o["py_files"]),
        external_sync_seconds=o["external_sync_seconds"],
        external_source_prefix=o["external_source_prefix"],
        verify_every=o["verify_every"],
        verify_source_hms_uri=o["verify_source_hms_uri"],
        verify_source_notification_db=o["verify_source_notification_db"],
        verify_repair=o["verify_repair"],
        verify_source_auth=auth,
        until_event=o["until_event"],
        mark_readonly=o["mark_readonly"],
        markers_per_batch=o["markers_per_batch"] or o["coalesce_backlog"],
        coalesce_backlog=o["coalesce_backlog"],
        watermark_db=o["watermark_db"],
        archive_dir=o.get("archive"),
    )


@target.command("retry")
@state_dir_option()
@click.option("--db", required=True, help="Halted database: its name on the target (as status shows it) or "
              "the source's.")
def retry_cmd(state_dir: Path, db: str) -> None:
    """Clear a database's halt: the running job applies its held events again, from the halted one."""
    from streamer.target.state.state_file import TargetState
    from streamer.target.state.status import source_database, unknown_database

    state = TargetState(state_dir)
    try:
        source = source_database(state_dir, db, set(state.halts()))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    halt = state.retry(source)
    if halt is None:
        why = unknown_database(state_dir, state, db) or f"database {db!r} is not halted"
        raise click.ClickException(f"{why}; {_halted(state_dir, state)}")
    named = db if source == db else f"{db} (source database {source})"
    click.echo(f"{named}: halt at event {halt.event_id} cleared; the job retries it on its next batch")


def _halted(state_dir: Path, state: Any) -> str:
    """The halted databases, each as status shows it (its target name) and its source name."""
    from streamer.target.state.status import job_db_map

    db_map = job_db_map(state_dir)
    names = [f"{db_map[src]} (source {src})" if src in db_map else src for src in sorted(state.halts())]
    return f"halted: {', '.join(names)}" if names else "no database is halted"


@target.command("skip")
@state_dir_option()
@click.option("--db", required=True, help="Halted database: its name on the target (as status shows it) or "
              "the source's.")
@click.option("--event", "event_id", required=True, type=int, help="The halted event id to pass over.")
def skip_cmd(state_dir: Path, db: str, event_id: int) -> None:
    """Pass over exactly the halted event (recorded as an operator skip) and resume the database."""
    from streamer.target.state.state_file import StateError, TargetState
    from streamer.target.state.status import source_database, unknown_database

    state = TargetState(state_dir)
    try:
        source = source_database(state_dir, db, set(state.halts()))
        if not state.is_halted(source):
            unknown = unknown_database(state_dir, state, db)
            raise StateError(unknown or f"database {db!r} is not halted; only a halted event can be skipped")
        state.skip(source, event_id)
    except (StateError, ConfigError) as exc:
        raise click.ClickException(f"{exc}; {_halted(state_dir, state)}") from exc
    click.echo(f"{db}: event {event_id} skipped by the operator; the job resumes after it")


@target.command("reset-chain")
@state_dir_option()
def reset_chain_cmd(state_dir: Path) -> None:
    """Accept a broken event chain: forget the last record consumed, so the next one starts a new chain.

    Only after `streamer target run` stopped with EventChainError and you decided to keep the target
    although the records between the two were lost (otherwise rebuild it from a bootstrap).
    """
    from streamer.target.state.chain import reset_anchor

    anchor = reset_anchor(state_dir)
    if anchor is None:
        click.echo("no event chain recorded; nothing to reset")
        return
    click.echo(f"event chain reset (it ended at offset {anchor.offset}, event {anchor.event_id} of "
               f"{anchor.topic}); the job accepts the next record it reads")


def _check_source_id(hms_uri: str, auth: Any, source_id: str) -> None:
    from streamer.metastore.thrift import HmsCatalog
    from streamer.target.state.status import check_source_id

    catalog = HmsCatalog(hms_uri, auth=auth)
    try:
        check_source_id(catalog, source_id)
    finally:
        catalog.close()


@click.command("status")
@click.option("--hms-uri", required=True, help="Target metastore Thrift URI.")
@hms_auth_options()
@state_dir_option()
@click.option("--bootstrap-servers", default=None, help="Kafka, to learn the source's newest event id.")
@click.option(
    "--kafka-setting", "-X", multiple=True, metavar="KEY=VALUE", help="librdkafka setting; repeatable."
)
@click.option("--topic", default=None, help=f"Topic. [default: {DEFAULT_TOPIC_HELP}]")
@click.option(
    "--source-id",
    default=None,
    help="List only the databases replicated from this source (their streamer.source.id; one no "
    "database carries is refused, naming those that do); also names the default topic. [default: every "
    "source; the topic of source 'source']",
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status(
    hms_uri: str,
    hms_auth: str,
    hms_kerberos_principal: str | None,
    hms_client_principal: str | None,
    hms_client_keytab: str | None,
    state_dir: Path,
    bootstrap_servers: str | None,
    kafka_setting: tuple[str, ...],
    topic: str | None,
    source_id: str | None,
    output: str,
) -> None:
    """Per replicated database: last applied event id, source head, lag, halt (like REPL STATUS).

    Exits 1 when a database is halted (its row says at which event and why), 0 otherwise."""
    from streamer.metastore.thrift import HmsCatalog
    from streamer.target.dr.failover import read_record
    from streamer.target.job.lanes import GUARANTEES, Consistency
    from streamer.target.state.binding import check_command
    from streamer.target.state.status import read_mode, status_rows

    auth = auth_from_options(hms_auth, hms_kerberos_principal, hms_client_principal, hms_client_keytab)
    bound = check_command(state_dir, source_id, topic, hms_uri, auth)  # another target's: one line
    topic = topic or (bound.topic if bound else None)  # the head of the topic this target reads
    if source_id is not None:
        _check_source_id(hms_uri, auth, source_id)  # before the topic is read
    head: tuple[int, int] | None = None
    if bootstrap_servers:
        from streamer.target.state.status import source_head_from_options

        head = source_head_from_options(bootstrap_servers, kafka_setting, topic, source_id or "source")
    catalog = HmsCatalog(hms_uri, auth=auth)
    try:
        rows, sources = status_rows(catalog, state_dir, head, source_id)
    finally:
        catalog.close()
    failed_over = read_record(state_dir)
    mode = read_mode(state_dir)
    try:
        guarantee = GUARANTEES[Consistency(mode["consistency"])]
    except ValueError:
        guarantee = "unknown mode"
    if output == "json":
        click.echo(json.dumps({"databases": rows, "source_id": source_id, "sources": sources,
                               "source_head_event_id": head[0] if head else None,
                               "consistency": mode["consistency"], "guarantee": guarantee,
                               "failover": failed_over.to_json() if failed_over else None}))
        _exit_if_halted(rows)
        return
    if failed_over is not None:
        at = f" at source event {failed_over.cut.event_id}" if failed_over.cut else ""
        click.echo(f"failed over{at} ({failed_over.state} since {failed_over.started}): "
                   "no target job applies here")
    click.echo(f"consistency: {mode['consistency']} ({guarantee})")
    if not rows:
        click.echo("no replicated databases on this target")
        return
    click.echo(f"{'database':<24} {'applied':>10} {'head':>10} {'lag ev':>8} {'lag s':>8}  halted")
    for r in rows:
        halted, fenced = r["halted"], r.get("fenced_from_event_id")
        halt_text = f"event {halted['event_id']}: {halted['cause']}" if halted else "-"
        if fenced is not None:  # streamer.apply.fence: mid-batch out of event-id order
            halt_text += f" (fenced: a batch from event {fenced} applied it out of order; readers read again)"
        lag_s = "-" if r["lag_seconds"] is None else f"{r['lag_seconds']:.1f}"
        click.echo(
            f"{r['db']:<24} {r['last_applied_event_id']:>10} {r['source_head_event_id'] or '-':>10} "
            f"{r['lag_events'] if r['lag_events'] is not None else '-':>8} {lag_s:>8}  {halt_text}"
        )
    _exit_if_halted(rows)


def _exit_if_halted(rows: list[dict[str, Any]]) -> None:
    """Exit 1 when a database is halted: a script or a health check must not read it as healthy."""
    if any(r["halted"] for r in rows):
        raise click.exceptions.Exit(1)


@click.command("verify")
@click.option("--hms-uri", required=True, help="Target metastore Thrift URI (thrift://host:port).")
@hms_auth_options()
@state_dir_option()
@click.option("--bootstrap-servers", required=True, help="Kafka bootstrap servers: the source's history.")
@click.option(
    "--kafka-setting", "-X", multiple=True, metavar="KEY=VALUE", help="librdkafka setting; repeatable."
)
@click.option("--source-id", default=None,
              help="Source id the agent publishes as; a source no database of the target is replicated "
              "from is refused (naming those that are). [default: the source of the state dir's job "
              "(its target.json); 'source' for a state dir of an earlier release]")
@click.option("--topic", default=None, help="Topic to read. [default: the state dir's job's topic; else "
              f"{DEFAULT_TOPIC_HELP}]")
@click.option("--db", "db", multiple=True, help="Source database to check; repeatable. [default: all]")
@click.option("--db-map", multiple=True, metavar="SRC:DST", help="As given to `target run`; repeatable.")
@click.option(
    "--warehouse-root", default=None, help="Target warehouse root (needed for ACID replicas and --repair)."
)
@click.option("--external-base-dir", default=None, help="Target base dir of external tables (for --repair).")
@source_trust_options(repair=True)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--repair",
    is_flag=True,
    help="Re-copy drifted or missing data files of existing partitions from the source (or cmroot), "
    "verified against the event's checksum, then verify again. Metadata drift is only reported.",
)
@click.option(
    "--recompute-source/--no-recompute-source",
    default=True,
    show_default=True,
    help="Hash source files whose events recorded no checksum, in tables unchanged since the replica's "
    "event id (else such files are compared by size only).",
)
@click.option(
    "--max-record-bytes",
    default=DEFAULT_TARGET_MAX_RECORD_BYTES,
    show_default=True,
    type=click.IntRange(MIN_TARGET_MAX_RECORD_BYTES, MAX_TARGET_MAX_RECORD_BYTES),
    help="Largest record (key and value, decompressed) read from the topic, as `target run`'s; a larger "
    "one stops the verification at its offset before it is decoded.",
)
@against_source_options
def verify_cmd(
    hms_uri: str,
    hms_auth: str,
    hms_kerberos_principal: str | None,
    hms_client_principal: str | None,
    hms_client_keytab: str | None,
    state_dir: Path,
    bootstrap_servers: str,
    kafka_setting: tuple[str, ...],
    source_id: str | None,
    topic: str | None,
    db: tuple[str, ...],
    db_map: tuple[str, ...],
    warehouse_root: str | None,
    external_base_dir: str | None,
    source_prefix: tuple[str, ...],
    source_cmroot: tuple[str, ...],
    allow_unverified_files: bool,
    output: str,
    repair: bool,
    recompute_source: bool,
    max_record_bytes: int,
    against_source: bool,
    source_hms_uri: str | None,
    source_notification_db: str | None,
) -> None:
    """Compare the replica with the source at each database's repl.last.id; exit 1 on drift.

    The source's state at that event is rebuilt from the topic's events (snapshots and checksums),
    so a source that moved on since is not drift. Reports databases, tables, schemas, parameters,
    partitions, data files, checksums (sizes where the source has no checksum) and ACID write ids.
    With --against-source the replica is compared with the source's metastore and storage as they are
    now instead (objects the source changed since the replica's position are left out), which finds a
    divergence the events themselves carry.
    Exit codes: 0 no drift, 1 drift found (or a failure to verify: an error on stderr, no report),
    2 usage error.
    """
    import sys

    from streamer.target.apply.sources import SourceRules
    from streamer.target.dr.verify import VerifySettings, verify
    from streamer.target.state.binding import check_command

    if repair and not warehouse_root:
        raise click.UsageError("--repair needs --warehouse-root (copies stay inside the target roots)")
    auth = auth_from_options(hms_auth, hms_kerberos_principal, hms_client_principal, hms_client_keytab)
    bound = check_command(state_dir, source_id, topic, hms_uri, auth)  # another target's: one line
    source_id = source_id or (bound.source_id if bound else "source")
    topic = topic or (bound.topic if bound else None)
    _check_source_id(hms_uri, auth, source_id)  # verifying nothing is not "no drift"
    settings = VerifySettings(
        hms_uri=hms_uri,
        state_dir=str(state_dir),
        bootstrap_servers=bootstrap_servers,
        topic=topic_or_default(topic, source_id),
        source_id=source_id,
        kafka_settings=_kafka_settings(bootstrap_servers, kafka_setting),
        databases=db,
        db_map=_pairs(db_map, "--db-map", ":"),
        warehouse_root=warehouse_root,
        external_base_dir=external_base_dir,
        hms_auth=auth,
        source_rules=SourceRules(source_prefix, source_cmroot, allow_unverified_files),
        recompute_source=recompute_source,
        max_record_bytes=max_record_bytes,
    )
    if not against_source and (source_hms_uri or source_notification_db):
        raise click.UsageError("--source-hms-uri/--source-notification-db apply with --against-source")
    conn = source_connection(source_hms_uri, source_notification_db, auth) if against_source else None
    if against_source and conn is None:
        raise click.UsageError("--against-source needs --source-hms-uri or --source-notification-db")
    from streamer.kafka.reachability import check_reachable

    # a wrong broker is one line after the connect timeout, not a minute of client retries
    check_reachable({**settings.kafka_settings, "bootstrap.servers": bootstrap_servers})
    if conn is not None:
        from streamer.target.dr.source_check import check_against_source

        report = check_against_source(settings, conn, repair=repair)
    else:
        report = verify(settings, repair=repair)
    click.echo(report.dumps() if output == "json" else report.render())
    if not report.ok:
        sys.exit(1)
