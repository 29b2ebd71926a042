"""``streamer source``: run the source agent (notification log → Kafka)."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import click

from streamer.errors import ConfigError
from streamer.source import options
from streamer.source.options import SourceOptions, env

log = logging.getLogger(__name__)


@click.group()
def source() -> None:
    """The source agent: publishes a metastore's notification log to Kafka, in order, exactly once."""


@source.command("run")
@options.source_id_option("Name of this source; names the topic and the producer's transactional id.")
@options.notification_db_option(
    "Metastore database URL: a sqlite path, sqlite:///path, postgresql://... or mysql://...")
@options.hms_uri_option("Read through the metastore's Thrift API instead (thrift://host:port); or, with "
                        "--notification-db, the metastore whose tables a policy change dumps and where "
                        "INSERTs without files are located.")
@options.scope_options(
    "Replication policy in Hive's syntax, e.g. \"sales.['orders', 'c[0-9]+']\"; repeatable (env: "
    "space-separated). Default: every database.")
@options.kafka_options("librdkafka property passed through (security.protocol, sasl.*, ssl.*); repeatable.")
@click.option("--batch-size", default=500, show_default=True, type=click.IntRange(1), **env("BATCH_SIZE"),
              help="Events read and published per Kafka transaction.")
@click.option("--poll-interval", default=1.0, show_default=True, type=click.FloatRange(0),
              **env("POLL_INTERVAL"),
              help="Seconds between reads once caught up.")
@click.option("--gap-settle-seconds", default=5.0, show_default=True, type=click.FloatRange(0),
              **env("GAP_SETTLE_SECONDS"),
              help="How long a missing event id may take to commit before the agent halts on the gap.")
# the default is streamer.source.watch.WATCH_SECONDS (a unit test says so; imported, it would load metrics)
@click.option("--watch-seconds", default=5.0, show_default=True, type=click.FloatRange(0),
              **env("WATCH_SECONDS"),
              help="How often the agent lists the tables whose writers log nothing (Spark datasource "
                   "tables, Hive Parquet/ORC tables Spark created; found over --hms-uri) and publishes a "
                   "replace of each directory that changed, checksummed; 0: off (their writes then reach "
                   "no target).")
@options.file_options("The source's change-manager root, for file references that do not name one.")
@click.option("--start-after", type=click.IntRange(0), **env("START_AFTER"),
              help="Event id to continue after when the topic is empty (hand-over from a bootstrap, or "
                   "a reverse stream from a failover's cut). A topic that ends before it is refused.")
@click.option("--metrics-port", default=0, show_default=True, type=click.IntRange(0, 65535),
              **env("METRICS_PORT"), help="Serve /metrics on this port (0: off).")
@click.option("--metrics-addr", "metrics_addr", default=None, **env("METRICS_ADDR"),
              help="Bind address of /metrics.  [default: 127.0.0.1]")
@click.option("--metrics-host", "metrics_host", default=None, envvar="STREAMER_METRICS_HOST", hidden=True,
              help="Deprecated name of --metrics-addr.")
@click.option("--metrics-tls-cert", default=None, **env("METRICS_TLS_CERT"),
              help="Serve /metrics over TLS with this certificate (PEM).")
@click.option("--metrics-tls-key", default=None, **env("METRICS_TLS_KEY"),
              help="Private key (PEM) of --metrics-tls-cert.")
@click.option("--metrics-basic-auth-user", default=None, **env("METRICS_BASIC_AUTH_USER"),
              help="Require HTTP basic auth on /metrics.")
@click.option("--metrics-basic-auth-password", default=None, **env("METRICS_BASIC_AUTH_PASSWORD"),
              help="Password for --metrics-basic-auth-user.")
@click.option("--once", is_flag=True, **env("ONCE"), help="Publish everything there is, then exit.")
@options.with_source_options
def run(
    opts: SourceOptions,
    notification_db: str | None,
    hms_uri: str | None,
    batch_size: int,
    poll_interval: float,
    gap_settle_seconds: float,
    watch_seconds: float,
    start_after: int | None,
    metrics_port: int,
    metrics_addr: str | None,
    metrics_host: str | None,
    metrics_tls_cert: str | None,
    metrics_tls_key: str | None,
    metrics_basic_auth_user: str | None,
    metrics_basic_auth_password: str | None,
    once: bool,
) -> None:
    """Run the agent: read the notification log, publish each event once, in order."""
    from streamer import metrics
    from streamer.kafka.reachability import check_reachable
    from streamer.source.agent import SourceAgent
    from streamer.source.insert_files import HmsLocator
    from streamer.source.prerequisites import cannot_check as prerequisites_unchecked
    from streamer.source.prerequisites import check_prerequisites
    from streamer.source.reader import NotificationReader, SqlNotificationReader
    from streamer.source.thrift_reader import ThriftNotificationReader
    from streamer.source.watch import HmsWatchCatalog

    if not notification_db and not hms_uri:
        raise ConfigError("give exactly one of --notification-db URL and --hms-uri thrift://host:port, or "
                          "both: the log read from the metastore's database, its tables over Thrift for a "
                          "policy change")
    auth = opts.auth()
    if auth.kerberos and not hms_uri:
        raise ConfigError("--hms-auth kerberos applies to --hms-uri only; --notification-db reads the "
                          "metastore's database directly")
    policy = opts.policy()
    config = opts.agent_config(batch_size=batch_size, poll_interval=poll_interval,
                               gap_settle_seconds=gap_settle_seconds, start_after=start_after,
                               watch_seconds=watch_seconds)
    check_reachable(config.kafka, opts.kafka_connect_timeout)  # before anything reads or creates a topic
    reader: NotificationReader = (
        SqlNotificationReader(notification_db)
        if notification_db
        else ThriftNotificationReader(str(hms_uri), auth=auth)
    )
    if isinstance(reader, SqlNotificationReader | ThriftNotificationReader):
        reader.check()  # an unreachable metastore, a missing database or log fails before anything is created
    if hms_uri:
        thrift = reader if isinstance(reader, ThriftNotificationReader) else ThriftNotificationReader(
            str(hms_uri), auth=auth)
        try:
            check_prerequisites(thrift.config_value, cmroot=opts.cmroot)
        finally:
            if thrift is not reader:
                thrift.close()
    else:
        prerequisites_unchecked(str(notification_db))
    metrics.serve(
        metrics.MetricsEndpoint(
            metrics_port, metrics_bind(metrics_addr, metrics_host), metrics_tls_cert, metrics_tls_key,
            metrics_basic_auth_user, metrics_basic_auth_password,
        ),
        role=metrics.Role.SOURCE,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    _replace_if_changed(config, reader, policy, notification_db, hms_uri, auth)
    # both flags: the log from the database, INSERTs without files located over Thrift
    agent = (SourceAgent(config, reader, policy, locator=HmsLocator(str(hms_uri), auth=auth),
                         watch_catalog=HmsWatchCatalog(str(hms_uri), auth=auth))
             if hms_uri and notification_db else SourceAgent(config, reader, policy))
    try:
        agent.run(once=once, stop=stop)
    finally:
        agent.close()
        reader.close()
    click.echo(f"source {opts.source_id}: published through event id {agent.last_id}")


def metrics_bind(metrics_addr: str | None, metrics_host: str | None) -> str:
    """``--metrics-addr``, or the deprecated ``--metrics-host`` (with a warning), or 127.0.0.1."""
    if metrics_host is not None:
        if metrics_addr is not None and metrics_addr != metrics_host:
            raise ConfigError(f"--metrics-host {metrics_host} and --metrics-addr {metrics_addr} disagree; "
                              "--metrics-host is the deprecated name of --metrics-addr: give only that")
        log.warning("--metrics-host (STREAMER_METRICS_HOST) is deprecated: use --metrics-addr "
                    "(STREAMER_METRICS_ADDR)")
        return metrics_host
    return metrics_addr or "127.0.0.1"


def _replace_if_changed(config: Any, reader: Any, policy: Any, notification_db: str | None,
                        hms_uri: str | None, auth: Any) -> None:
    """A restart with other policies than the topic records publishes the change (REPLACE) first,
    dumped through the metastore's catalog (Thrift) or the bundled warehouse; never written to a source."""
    from streamer.source.replace import replace_if_changed

    e1 = replace_if_changed(config, reader, policy, notification_db=notification_db, hms_uri=hms_uri,
                            auth=auth)
    if e1 is not None:
        click.echo(f"policies changed: newly excluded tables dropped and newly included ones bootstrapped "
                   f"at event {e1}")
