"""``streamer target run|retry|skip`` and ``streamer status``: running and operating a target."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from streamer.errors import ConfigError
from streamer.fs_options import fs_options
from streamer.kafka.naming import DEFAULT_TOPIC_HELP, topic_or_default
from streamer.metastore.auth_options import auth_from_options
from streamer.target.dr.commands import source_connection
from streamer.target.options import (
    AGAINST_SOURCE,
    IN_PROCESS_VERIFY,
    external_sync_options,
    external_sync_settings,
    kafka_config,
    kafka_options,
    kafka_settings,
    layout_options,
    layout_settings,
    metastore_options,
    metastore_settings,
    metrics_options,
    metrics_settings,
    parse_db_map,
    scale_options,
    scale_settings,
    trust_options,
    trust_settings,
    verify_loop_settings,
    verify_options,
)
from streamer.target.state.dir_option import state_dir_option

if TYPE_CHECKING:
    from streamer.target.job.settings import TargetSettings

log = logging.getLogger(__name__)


@click.group()
def target() -> None:
    """Run a target job, and get a halted database going again."""


@target.command("run")
@kafka_options()
@metastore_options()
@fs_options()
@layout_options()
@trust_options()
@scale_options()
@external_sync_options()
@verify_options(*IN_PROCESS_VERIFY)
@metrics_options()
def run_cmd(**options: Any) -> None:
    """Apply the source's events to a target metastore and filesystem, continuously."""
    from streamer import metrics
    from streamer.target.job.preflight import preflight
    from streamer.target.job.streaming import run

    settings = run_settings(options)
    preflight(settings)  # a live job, another target's state dir, Kafka, the metastore, the topic: one line
    metrics.serve(settings.metrics, role=metrics.Role.TARGET)
    if settings.kafka.archive_dir is not None:  # before the query, which would start past its records
        from streamer.target.job.archive_catchup import catch_up_from_archive

        catch_up_from_archive(settings)
    stopped = run(settings)
    click.echo(f"target job {stopped}")


def run_settings(options: Mapping[str, Any]) -> TargetSettings:
    """The job's settings from ``target run``'s parsed options (click's names), validated: what the
    command runs, and what a test running the job in its own process runs (``run_cmd.make_context``)."""
    from streamer.target.job.settings import TargetSettings

    metastore = metastore_settings(options)
    verify = verify_loop_settings(options, source_auth=metastore.auth)  # the source as the target
    return TargetSettings(
        kafka=kafka_settings(options),
        metastore=metastore,
        layout=layout_settings(options),
        source_id=options["source_id"],
        trust=trust_settings(options),
        scale=scale_settings(options),
        verify=verify,
        external_sync=external_sync_settings(options),
        metrics=metrics_settings(options),
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
@metastore_options()
@state_dir_option()
@kafka_options(
    "bootstrap_servers", "kafka_setting", "topic", "source_id",
    bootstrap_servers={"required": False, "default": None,
                       "help": "Kafka, to learn the source's newest event id."},
    topic={"help": f"Topic. [default: {DEFAULT_TOPIC_HELP}]"},
    source_id={
        "default": None, "show_default": None,
        "help": "List only the databases replicated from this source (their streamer.source.id; one no "
        "database carries is refused, naming those that do); also names the default topic. [default: every "
        "source; the topic of source 'source']",
    },
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
@metastore_options()
@state_dir_option()
@kafka_options(
    "bootstrap_servers", "kafka_setting", "source_id", "topic",
    bootstrap_servers={"help": "Kafka bootstrap servers: the source's history."},
    source_id={
        "default": None, "show_default": None,
        "help": "Source id the agent publishes as; a source no database of the target is replicated from is "
        "refused (naming those that are). [default: the source of the state dir's job (its target.json); "
        "'source' for a state dir of an earlier release]",
    },
    topic={"help": f"Topic to read. [default: the state dir's job's topic; else {DEFAULT_TOPIC_HELP}]"},
)
@click.option("--db", "db", multiple=True, help="Source database to check; repeatable. [default: all]")
@layout_options(
    "db_map", "warehouse_root", "external_base_dir",
    db_map={"help": "As given to `target run`; repeatable."},
    warehouse_root={"required": False, "default": None,
                    "help": "Target warehouse root (needed for ACID replicas and --repair)."},
    external_base_dir={"help": "Target base dir of external tables (for --repair)."},
)
@trust_options("source_prefix", "source_cmroot", "allow_unverified_files", help_prefix="With --repair: ")
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
@trust_options("max_record_bytes", max_record_bytes={
    "help": "Largest record (key and value, decompressed) read from the topic, as `target run`'s; a larger "
    "one stops the verification at its offset before it is decoded."})
@verify_options(*AGAINST_SOURCE)
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
        kafka_settings=kafka_config(bootstrap_servers, kafka_setting),
        databases=db,
        db_map=parse_db_map(db_map),
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
