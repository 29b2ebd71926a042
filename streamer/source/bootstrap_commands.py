"""``streamer bootstrap``: dump a source's policy as of one event id into its topic, with progress bars."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from streamer.events.model import BootstrapKind, BootstrapObjectPayload
from streamer.source import options
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.bootstrap import (
    ObjectCallback,
    RecordLimits,
    SourceCatalog,
    enrich_records,
    records,
    snapshot,
)
from streamer.source.data_scope import ALL_DATA, DataScope, withhold_data
from streamer.source.options import SourceOptions, env
from streamer.source.policy import PolicySet
from streamer.source.policy_record import policy_record
from streamer.source.publish_bootstrap import (
    BootstrapResumeError,
    BootstrapWork,
    Published,
    publish_records,
    published_through,
)
from streamer.source.reader import NotificationReader
from streamer.source.withheld_catalog import WithheldFiles

if TYPE_CHECKING:
    from streamer.source.open_txns import OpenTxnPolicy

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


def source_flags(notification_db_more: str) -> Callable[[F], F]:
    """``--warehouse``, ``--hms-uri`` and ``--notification-db``: the source a dump reads
    (``open_source``); ``notification_db_more`` ends the last one's help."""
    return options.stacked(
        click.option("--warehouse", "warehouse_url", **env("WAREHOUSE"),
                     help="The bundled source warehouse's metastore URL (sqlite path or postgresql://...); "
                          "its notification log is read too. Or give --hms-uri."),
        options.hms_uri_option(
            "A Hive Metastore to dump (thrift://host:port): metadata through its Thrift API, files by "
            "listing each location; its notification log through the Thrift API too, unless "
            "--notification-db is given. Or give --warehouse."),
        options.notification_db_option(
            "With --hms-uri: read the notification log from the metastore's database instead (sqlite path, "
            f"postgresql://... or mysql://...), as `streamer source run` can{notification_db_more}."),
    )


def check_source_flags(warehouse_url: str | None, hms_uri: str | None, notification_db: str | None) -> None:
    """Exactly one source, and ``--notification-db`` only with ``--hms-uri``."""
    if bool(warehouse_url) == bool(hms_uri):
        raise click.UsageError("give exactly one source: --warehouse URL (the bundled warehouse) or "
                               "--hms-uri thrift://host:port (a Hive Metastore)")
    if notification_db and not hms_uri:
        raise click.UsageError("--notification-db goes with --hms-uri (the bundled warehouse's own "
                               "notification log is read from --warehouse)")


@click.command("bootstrap")
@options.source_id_option("Name of the source; names the topic and the agent's transactional id.")
@source_flags("")
@options.scope_options("Replication policy in Hive's syntax; repeatable. Default: every database. "
                       "Give the agent the same policies.")
@options.kafka_options("librdkafka property passed through; repeatable.")
@options.file_options("The source's change-manager root.")
@click.option("--records-per-transaction", default=200, show_default=True, type=click.IntRange(1),
              **env("RECORDS_PER_TRANSACTION"), help="Bootstrap records per Kafka transaction.")
@click.option("--partitions-per-record", default=200, show_default=True, type=click.IntRange(1),
              **env("PARTITIONS_PER_RECORD"), help="Partitions of one table carried by one record.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), **env("WORK_DIR"),
              help="Keep the dumped records here before publishing, so a re-run after an interruption "
                   "publishes only what the topic lacks (and does not publish a finished bootstrap again).")
@click.option("--force", is_flag=True, **env("FORCE"),
              help="With --work-dir: make a new bootstrap even if one is kept there (finished or not).")
@click.option("--metadata-only", is_flag=True, **env("METADATA_ONLY"),
              help="Dump metadata without any data files (Hive's hive.repl.dump.metadata.only): targets get "
                   "databases, tables, partitions and statistics, with empty locations.")
@click.option("--exclude-external-data", is_flag=True, **env("EXCLUDE_EXTERNAL_DATA"),
              help="Dump external tables without their data files (Hive's "
                   "hive.repl.include.external.tables=false); managed tables keep theirs.")
@click.option("--open-txn-timeout", type=click.FloatRange(0), default=None, **env("OPEN_TXN_TIMEOUT"),
              help="With --hms-uri: seconds to wait for the transactions open when the dump reaches its "
                   "first transactional table (Hive's hive.repl.bootstrap.dump.open.txn.timeout); then the "
                   "command fails naming them, or aborts them with --abort-open-txns. Default: 3600.")
@click.option("--abort-open-txns", is_flag=True, **env("ABORT_OPEN_TXNS"),
              help="With --hms-uri: abort, through the metastore, the transactions still open after "
                   "--open-txn-timeout instead of failing (their writers fail; logged as a warning).")
@click.option("--max-rounds", default=20, show_default=True, type=click.IntRange(1), **env("MAX_ROUNDS"),
              help="Re-reads of tables that changed while being read before giving up.")
@options.with_source_options
def bootstrap(
    opts: SourceOptions,
    warehouse_url: str | None,
    hms_uri: str | None,
    notification_db: str | None,
    records_per_transaction: int,
    partitions_per_record: int,
    work_dir: Path | None,
    force: bool,
    max_rounds: int,
    metadata_only: bool,
    exclude_external_data: bool,
    open_txn_timeout: float | None,
    abort_open_txns: bool,
) -> None:
    """Dump every object of the policy as of one event id E1 into the topic, then a marker.

    Writers keep running: the events that happen during the dump are consolidated into it (renames
    included). Stop the source agent first (this command fences it); start it again afterwards: it
    continues after E1. Targets apply the dump, then the incremental events; a target that already
    has one of the databases refuses unless it runs with --allow-existing-db.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from streamer.source.open_txns import DEFAULT_TIMEOUT_S, OpenTxnPolicy
    from streamer.source.prerequisites import check_prerequisites
    from streamer.source.thrift_reader import ThriftNotificationReader

    check_source_flags(warehouse_url, hms_uri, notification_db)
    if (open_txn_timeout is not None or abort_open_txns) and not hms_uri:
        raise click.UsageError("--open-txn-timeout and --abort-open-txns go with --hms-uri (a dump of the "
                               "bundled warehouse copies the write ids committed at its event id and never "
                               "waits)")
    txn_policy = OpenTxnPolicy(DEFAULT_TIMEOUT_S if open_txn_timeout is None else open_txn_timeout,
                               abort_open_txns)
    auth = opts.auth()
    scope = opts.policy()
    config = opts.agent_config()
    if hms_uri:
        checker = ThriftNotificationReader(str(hms_uri), auth=auth)
        try:
            check_prerequisites(checker.config_value, cmroot=opts.cmroot)  # the agent that follows needs them
        finally:
            checker.close()
    with contextlib.ExitStack() as resources:
        reader, source_catalog = open_source(resources, opts, warehouse_url=warehouse_url, hms_uri=hms_uri,
                                             notification_db=notification_db, open_txns=txn_policy)
        from streamer.kafka.reachability import check_reachable

        check_reachable(config.kafka, opts.kafka_connect_timeout)  # one line, before anything is dumped
        work = BootstrapWork(work_dir, opts.source_id, config.topic_name) if work_dir else None
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, transient=False) as bars:
            dumping = bars.add_task("dump objects", total=None)
            sending = bars.add_task("publish records", total=None, visible=False)

            def dumped() -> None:
                bars.update(dumping, total=bars.tasks[dumping].completed)

            def publishing(total: int, done: int) -> None:
                bars.update(sending, total=total, completed=done, visible=True)

            summary = run_bootstrap(
                config, reader, source_catalog, scope, work=work, force=force,
                records_per_transaction=records_per_transaction, partitions_per_record=partitions_per_record,
                max_rounds=max_rounds, data=DataScope(metadata_only, exclude_external_data),
                on_object=lambda kind, name: bars.advance(dumping), on_dumped=dumped,
                on_publishing=publishing, on_published=lambda n: bars.advance(sending, n),
            )
    click.echo(summary)


def open_source(
    resources: contextlib.ExitStack, opts: SourceOptions, *, warehouse_url: str | None, hms_uri: str | None,
    notification_db: str | None, open_txns: OpenTxnPolicy | None = None,
) -> tuple[NotificationReader, SourceCatalog]:
    """The notification log and catalog of the source the flags name (the bundled warehouse at
    ``warehouse_url``, or the metastore at ``hms_uri``, its log read from ``notification_db`` when
    given), closed with ``resources``; ``streamer bootstrap`` and ``streamer dump`` read through it."""
    from streamer.source.hms_source_catalog import HmsSourceCatalog
    from streamer.source.reader import SqlNotificationReader
    from streamer.source.thrift_reader import ThriftNotificationReader
    from streamer.source.warehouse_catalog import WarehouseCatalog
    from streamer.warehouse import Warehouse

    if warehouse_url:
        wh_reader = SqlNotificationReader(warehouse_url)
        resources.callback(wh_reader.close)
        wh_reader.check()  # a typo'd path is refused here, not created as an empty warehouse
        wh = Warehouse.open(warehouse_url, source_id=opts.source_id)
        resources.callback(wh.close)
        return wh_reader, WarehouseCatalog(wh)
    auth = opts.auth()
    reader: NotificationReader
    if notification_db:
        sql_reader = SqlNotificationReader(notification_db)  # read-only: the metastore's own
        resources.callback(sql_reader.close)
        sql_reader.check()
        reader = sql_reader
    else:
        reader = ThriftNotificationReader(str(hms_uri), auth=auth)
        resources.callback(reader.close)
    hms = HmsSourceCatalog.connect(str(hms_uri), auth=auth, open_txns=open_txns)
    resources.callback(hms.close)
    return reader, hms


def run_bootstrap(
    config: AgentConfig,
    reader: NotificationReader,
    catalog: SourceCatalog,
    scope: PolicySet,
    *,
    work: BootstrapWork | None = None,
    force: bool = False,
    records_per_transaction: int = 200,
    partitions_per_record: int = 200,
    max_rounds: int = 20,
    data: DataScope = ALL_DATA,
    on_object: ObjectCallback | None = None,
    on_dumped: Callable[[], None] | None = None,
    on_publishing: Callable[[int, int], None] | None = None,
    on_published: Callable[[int], None] | None = None,
) -> str:
    """Dump (or take the bootstrap kept in ``work``) and publish what the topic lacks; a summary line."""
    policy = policy_record(scope)
    pending = None if work is None or force else work.load()
    if pending is not None and pending.finished:
        return (f"bootstrap {pending.bootstrap_id} of {config.source_id} was published completely before "
                f"(kept in {work.dir if work else ''}); nothing to do (--force makes a new one)")
    if pending is not None and pending.policy != policy:
        raise BootstrapResumeError(
            f"the interrupted bootstrap {pending.bootstrap_id} kept in {work.dir if work else ''} has "
            f"policy {pending.policy}, not {policy}: run again with its policy to finish it, or --force "
            "for a new one"
        )
    if pending is None:
        published = SourceAgent(config, reader, scope).recover_last_id()
        source = catalog if data == ALL_DATA else WithheldFiles(catalog, data)  # no listing of withheld data
        state = snapshot(source, reader, scope, config.source_id, enrich=config.enrich, at_least=published,
                         max_rounds=max_rounds, on_object=on_object, catalog_name=config.catalog)
        state = withhold_data(state, data)
        recs = records(state, config.source_id, policy=policy, event_time=int(time.time()),
                       limits=RecordLimits(partitions=partitions_per_record))
        recs = enrich_records(recs, config.enrich)
        head = reader.head_event_id()
        if work is not None:
            work.save(recs, head=head, policy=policy)
        done = Published(0, False)
    else:
        recs, head = pending.records, pending.head
        done = published_through(config, pending.bootstrap_id, len(recs))
        log.info("resuming bootstrap %d: %d of %d records are in %s", pending.bootstrap_id, done.through,
                 len(recs) - 1, config.topic_name)
    if on_dumped is not None:
        on_dumped()
    bid = recs[-1].event_id
    if not done.finished:
        if on_publishing is not None:
            on_publishing(len(recs), done.through)
        publish_records(config, recs[done.through:], head=head, policy=policy,
                        per_transaction=records_per_transaction, on_published=on_published)
    if work is not None:
        work.mark_finished()
    tables = [e.payload for e in recs if isinstance(e.payload, BootstrapObjectPayload)]
    databases = sum(1 for p in tables if p.kind is BootstrapKind.DATABASE)
    n_tables = sum(1 for p in tables if p.kind is BootstrapKind.TABLE)
    with_parts = (BootstrapKind.TABLE, BootstrapKind.PARTITIONS)
    partitions = sum(len(p.partitions) for p in tables if p.kind in with_parts)
    resumed = f" (resumed after record {done.through})" if done.through else ""
    seeded = "" if data == ALL_DATA else f" ({data})"
    return (f"bootstrap of {config.source_id} as of event {bid}: {databases} databases, {n_tables} tables, "
            f"{partitions} partitions{seeded}, {len(recs) - 1} records to {config.topic_name}{resumed}; "
            f"the agent continues after {bid}")
