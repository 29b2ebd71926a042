"""``streamer failover`` and ``streamer failback``: promote a replica at a cut, and check the old source
before it is brought back as a target (runbook: docs/failover.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from streamer.kafka.naming import DEFAULT_TOPIC_HELP
from streamer.metastore.auth_options import auth_from_options
from streamer.target.options import kafka_options, layout_options, metastore_options
from streamer.target.state.dir_option import state_dir_option


@click.command("failover")
@state_dir_option("State dir of the target job being failed over (the cut is recorded there): a path or "
                  "file:// URL.")
@metastore_options(hms_uri={"help": "The target (new primary) metastore's Thrift URI."})
@kafka_options(
    "bootstrap_servers", "kafka_setting", "source_id", "topic",
    bootstrap_servers={
        "required": False, "default": None,
        "help": "Kafka, to record the source head (the topic's last PROGRESS record) in the cut.",
    },
    source_id={"default": None, "show_default": None,
               "help": "Source whose replicated databases are failed over. [default: the source of the state "
               "dir's job (its target.json); 'source' for a state dir of an earlier release]"},
    topic={"help": f"Topic. [default: the state dir's job's topic; else {DEFAULT_TOPIC_HELP}]"},
)
@click.option("--wait-seconds", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="How long to wait for a running target job of this state dir to stop.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def failover(
    state_dir: Path,
    hms_uri: str,
    hms_auth: str,
    hms_kerberos_principal: str | None,
    hms_client_principal: str | None,
    hms_client_keytab: str | None,
    bootstrap_servers: str | None,
    kafka_setting: tuple[str, ...],
    source_id: str | None,
    topic: str | None,
    wait_seconds: float,
    output: str,
) -> None:
    """Stop applying, record the cut, and make the replicated databases writable (idempotent)."""
    from streamer.metastore.thrift import HmsCatalog
    from streamer.source.prerequisites import check_reverse_stream
    from streamer.source.thrift_reader import ThriftNotificationReader
    from streamer.target.dr import failover as fo
    from streamer.target.state.binding import check_command

    auth = auth_from_options(hms_auth, hms_kerberos_principal, hms_client_principal, hms_client_keytab)
    bound = check_command(state_dir, source_id, topic, hms_uri, auth)  # another target's: one line
    source_id = source_id or (bound.source_id if bound else "source")
    topic = topic or (bound.topic if bound else None)
    already = fo.read_record(state_dir)
    head: int | None = None
    catalog = HmsCatalog(hms_uri, auth=auth)
    try:
        if already is None:  # a typo'd --source-id is refused before the topic is read or anything changes
            from streamer.target.state.status import check_source_id

            check_source_id(catalog, source_id)
        if bootstrap_servers and (already is None or already.state != "done"):
            from streamer.target.state.status import source_head_from_options

            found = source_head_from_options(bootstrap_servers, kafka_setting, topic, source_id)
            head = found[0] if found else None
    except BaseException:
        catalog.close()
        raise
    reader = ThriftNotificationReader(hms_uri, auth=auth)
    try:
        record = fo.failover(state_dir, catalog, source_id=source_id, source_head=head,
                             new_primary_head=reader.head_event_id, wait_seconds=wait_seconds)
        # a new primary that logs nothing can send nothing back: say so now, not at failback
        no_reverse = check_reverse_stream(reader.config_value, hms_uri)
    finally:
        catalog.close()
        reader.close()
    was_done = already is not None and already.state == "done"
    if output == "json":
        warnings = [no_reverse] if no_reverse else []
        click.echo(json.dumps({**record.to_json(), "already_done": was_done, "warnings": warnings}))
        return
    if no_reverse:
        click.echo(f"warning: {no_reverse}", err=True)
    cut = record.cut
    assert cut is not None
    if was_done:
        click.echo(f"already failed over at {record.completed}; nothing changed")
    head = cut.source_head_event_id
    head_text = "unknown (no --bootstrap-servers)" if head is None else str(head)
    click.echo(f"cut: replicated through source event {cut.event_id}; source head {head_text}; "
               f"unreplicated events {cut.unreplicated if cut.unreplicated is not None else 'unknown'}")
    for d in cut.databases:
        halted = f", halted at {d.halted_at}" if d.halted_at is not None else ""
        click.echo(f"  {d.db}: repl.last.id {d.last_applied_event_id}, "
                   f"replicated through {d.replicated_through_event_id}{halted}")
    click.echo(f"writable now: {', '.join(record.changed) or '-'}; the new primary's notification log "
               f"is at event {cut.new_primary_event_id} (a reverse stream starts after it)")


@click.command("failback")
@state_dir_option("State dir of the failed-over target (holds the cut): a path or file:// URL.")
@click.option("--notification-db", default=None,
              help="The old source's metastore database URL (as for `streamer source run`).")
@click.option("--source-hms-uri", default=None, help="Or the old source's metastore Thrift URI.")
@metastore_options("hms_auth")
@layout_options("db_map", db_map={
    "help": "As given to the forward `target run` (SRC on the old source, DST the failed-over database); "
    "repeatable. Not recorded by the failover: without it a renamed database's changes cannot be "
    "attributed and the command refuses."})
@click.option("--discard-unreplicated", is_flag=True,
              help="Accept that the rebase overwrites the old source's changes after the cut "
                   "(they are listed and recorded in failback.json).")
@click.option("--rebase", is_flag=True,
              help="With --source-hms-uri: once nothing unreplicated is left (or it is discarded), drop "
                   "the failed-over databases on the old source (tables and managed data) so a bootstrap "
                   "of the new primary rebuilds them; recorded in failback.json.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def failback(
    state_dir: Path,
    notification_db: str | None,
    source_hms_uri: str | None,
    hms_auth: str,
    hms_kerberos_principal: str | None,
    hms_client_principal: str | None,
    hms_client_keytab: str | None,
    db_map: tuple[str, ...],
    discard_unreplicated: bool,
    rebase: bool,
    output: str,
) -> None:
    """List the old source's changes after the cut; refuse to rebase it over them unless discarded.

    Refuses, before reading its log or changing anything, a metastore whose databases carry this
    target's failover marks (the new primary's) or are replicas of the same source.
    """
    from streamer.errors import ConfigError
    from streamer.source.reader import NotificationReader, SqlNotificationReader
    from streamer.source.thrift_reader import ThriftNotificationReader
    from streamer.target.dr import failback as fb
    from streamer.target.dr.failover import read_record

    if bool(notification_db) == bool(source_hms_uri):
        raise ConfigError("give exactly one of --notification-db URL and --source-hms-uri thrift://host:port")
    if rebase and not source_hms_uri:
        raise ConfigError("--rebase drops databases through the old source's metastore: use --source-hms-uri")
    mapping = fb.parse_db_map(db_map)
    record = read_record(state_dir)
    if record is None or record.state != "done" or record.cut is None:
        raise ConfigError(f"{state_dir} records no finished failover; run `streamer failover` first")
    cut = record.cut
    previous = fb.rebased(fb.read_failbacks(state_dir))
    if rebase and previous is not None:
        # the old source may be a replica of the new primary by now: never drop it again
        names = ", ".join(previous["dropped"]) or "-"
        text = f"already rebased at {previous.get('time')} (dropped: {names}); nothing changed"
        click.echo(json.dumps({**previous, "already_done": True}) if output == "json" else text)
        return
    auth = auth_from_options(hms_auth, hms_kerberos_principal, hms_client_principal, hms_client_keytab)
    old_source = str(source_hms_uri) if source_hms_uri else _redacted(str(notification_db))
    old_names = fb.source_names(cut, mapping)  # failed-over database -> its name on the old source
    databases = _old_databases(notification_db, source_hms_uri, auth, {*old_names, *old_names.values()})
    if databases is None:
        click.echo(f"warning: {old_source} holds no metastore database tables (DBS, WH_DATABASES): not "
                   "checked whether it is the old source, nor that its databases match the cut", err=True)
    else:
        fb.check_old_source(databases, record, mapping)
    reader: NotificationReader = (
        SqlNotificationReader(str(notification_db)) if notification_db
        else ThriftNotificationReader(str(source_hms_uri), auth=auth)
    )
    try:
        rows = _read_all(reader, cut.event_id)
    finally:
        reader.close()
    if databases is not None:
        fb.check_attribution(databases, cut, rows, mapping)
    div = fb.divergence(rows, cut, db_map=mapping)
    if div.objects and not discard_unreplicated:
        message = fb.describe(div) + (
            "\nrefusing to rebase the old source over them: replicate or export what must be kept, "
            "then run again with --discard-unreplicated")
        if output == "json":
            click.echo(json.dumps({**div.to_json(), "discarded": False, "refused": True}))
        raise fb.UnreplicatedChangesError(message)
    dropped: list[str] | None = None
    if rebase:
        from streamer.metastore.transport import open_client

        client = open_client(str(source_hms_uri), timeout_s=600, auth=auth)
        try:
            dropped = fb.drop_old_databases(client, old_names.values())
        finally:
            client.close()
    body = fb.record_failback(state_dir, div, discarded=bool(div.objects), dropped=dropped, db_map=mapping,
                              old_source=old_source)
    if output == "json":
        click.echo(json.dumps({**body, "refused": False}))
        return
    click.echo(fb.describe(div))
    if div.objects:
        click.echo(f"discarded by the operator (recorded in {state_dir / fb.FAILBACK_FILE}): the rebase "
                   "overwrites these objects with the new primary's state")
    start = cut.new_primary_event_id
    steps = [f"publish the new primary after its notification event {start} (streamer source run "
             f"--hms-uri <new primary> --start-after {start} --source-id <new id>)",
             "run a target job on the old source and `streamer verify` it (docs/failover.md)"]
    if dropped is not None:
        click.echo(f"dropped on the old source: {', '.join(dropped) or '-'}")
        steps.insert(0, "bootstrap the new primary into a new topic (streamer bootstrap --hms-uri "
                        "<new primary> --source-id <new id>)")
    click.echo("next: " + "; then ".join(steps))


def _old_databases(notification_db: str | None, source_hms_uri: str | None, auth: Any,
                   names: set[str]) -> dict[str, dict[str, str]] | None:
    """The old source's databases (name -> parameters, read for ``names``); None: not readable."""
    from streamer.target.dr import failback as fb

    if notification_db:
        return fb.sql_databases(notification_db)
    from streamer.metastore.thrift import HmsCatalog

    catalog = HmsCatalog(str(source_hms_uri), auth=auth)
    try:
        return fb.catalog_databases(catalog, names)
    finally:
        catalog.close()


def _redacted(url: str) -> str:
    """``url`` without a password (it is recorded in failback.json)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def _read_all(reader: Any, after: int, batch: int = 1000) -> list[Any]:
    rows: list[Any] = []
    last = after
    while True:
        got = reader.read_after(last, batch)
        if not got:
            return rows
        rows.extend(got)
        last = got[-1].event_id


# --- the check against the live source (its flags: streamer.target.options) ------------------------------

def source_connection(hms_uri: str | None, notification_db: str | None, auth: Any) -> Any:
    """The :class:`~streamer.target.dr.source_check.SourceConnection` the flags name (None: none)."""
    from streamer.target.dr.source_check import SourceConnection

    if not hms_uri and not notification_db:
        return None
    return SourceConnection(hms_uri=hms_uri, notification_db=notification_db, auth=auth)
