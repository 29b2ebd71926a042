"""``streamer source``: run the source agent (notification log → Kafka)."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import click

from streamer import checksums
from streamer.errors import ConfigError
from streamer.fs_options import fs_options
from streamer.kafka.naming import DEFAULT_TOPIC_HELP
from streamer.metastore.auth_options import auth_from_options, hms_auth_options

log = logging.getLogger(__name__)


def _env(name: str) -> dict[str, Any]:
    return {"envvar": f"STREAMER_{name}", "show_envvar": True}


@click.group()
def source() -> None:
    """The source agent: publishes a metastore's notification log to Kafka, in order, exactly once."""


@source.command("run")
@click.option("--source-id", required=True, **_env("SOURCE_ID"),
              help="Name of this source; names the topic and the producer's transactional id.")
@click.option("--notification-db", "notification_db", **_env("NOTIFICATION_DB"),
              help="Metastore database URL: a sqlite path, sqlite:///path, postgresql://... or mysql://...")
@click.option("--hms-uri", **_env("HMS_URI"), help="Read through the metastore's Thrift API instead (thrift://host:port).")
@hms_auth_options("STREAMER_")
@fs_options("STREAMER_")
@click.option("--policy", "policies", multiple=True, **_env("POLICY"),
              help="Replication policy in Hive's syntax, e.g. \"sales.['orders', 'c[0-9]+']\"; repeatable "
                   "(env: space-separated). Default: every database.")
@click.option("--catalog", default="hive", show_default=True, **_env("CATALOG"),
              help="Metastore catalog to replicate (NOTIFICATION_LOG.CAT_NAME, Hive 3+); events of other "
                   "catalogs (e.g. HDP's spark) are passed over like filtered ones. Events naming no "
                   "catalog belong to every one.")
@click.option("--bootstrap-servers", required=True, **_env("BOOTSTRAP_SERVERS"),
              help="Kafka bootstrap servers, host:port[,host:port].")
@click.option("--kafka-setting", "-X", "kafka_settings", multiple=True, metavar="KEY=VALUE",
              **_env("KAFKA_SETTING"),
              help="librdkafka property passed through (security.protocol, sasl.*, ssl.*); repeatable.")
@click.option("--topic", **_env("TOPIC"), help=f"Topic to publish to. Default: {DEFAULT_TOPIC_HELP}.")
@click.option("--batch-size", default=500, show_default=True, type=click.IntRange(1), **_env("BATCH_SIZE"),
              help="Events read and published per Kafka transaction.")
@click.option("--poll-interval", default=1.0, show_default=True, type=click.FloatRange(0),
              **_env("POLL_INTERVAL"),
              help="Seconds between reads once caught up.")
@click.option("--gap-settle-seconds", default=5.0, show_default=True, type=click.FloatRange(0),
              **_env("GAP_SETTLE_SECONDS"),
              help="How long a missing event id may take to commit before the agent halts on the gap.")
@click.option("--checksum-algorithm", default="sha256", show_default=True,
              type=click.Choice(checksums.ALGORITHMS, case_sensitive=False), **_env("CHECKSUM_ALGORITHM"),
              help="What the source filesystem's file checksums are (recorded with each file): "
                   "hdfs-md5-of-md5-of-crc32c for HDFS (its default), hdfs-md5-of-md5-of-crc32 with "
                   "dfs.checksum.type=CRC32, hdfs-composite-crc32c/-crc32 with "
                   "dfs.checksum.combine.mode=COMPOSITE_CRC.")
@click.option("--cmroot", **_env("CMROOT"),
              help="The source's change-manager root, for file references that do not name one.")
@click.option("--start-after", type=click.IntRange(0), **_env("START_AFTER"),
              help="Event id to continue after when the topic is empty (hand-over from a bootstrap, or "
                   "a reverse stream from a failover's cut). A topic that ends before it is refused.")
@click.option("--metrics-port", default=0, show_default=True, type=click.IntRange(0, 65535),
              **_env("METRICS_PORT"), help="Serve /metrics on this port (0: off).")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, **_env("METRICS_HOST"),
              help="Address /metrics binds to.")
@click.option("--metrics-tls-cert", default=None, **_env("METRICS_TLS_CERT"),
              help="Serve /metrics over TLS with this certificate (PEM).")
@click.option("--metrics-tls-key", default=None, **_env("METRICS_TLS_KEY"),
              help="Private key (PEM) of --metrics-tls-cert.")
@click.option("--metrics-basic-auth-user", default=None, **_env("METRICS_BASIC_AUTH_USER"),
              help="Require HTTP basic auth on /metrics.")
@click.option("--metrics-basic-auth-password", default=None, **_env("METRICS_BASIC_AUTH_PASSWORD"),
              help="Password for --metrics-basic-auth-user.")
@click.option("--once", is_flag=True, **_env("ONCE"), help="Publish everything there is, then exit.")
def run(
    source_id: str,
    notification_db: str | None,
    hms_uri: str | None,
    hms_auth: str,
    hms_kerberos_principal: str | None,
    hms_client_principal: str | None,
    hms_client_keytab: str | None,
    policies: tuple[str, ...],
    catalog: str,
    bootstrap_servers: str,
    kafka_settings: tuple[str, ...],
    topic: str | None,
    batch_size: int,
    poll_interval: float,
    gap_settle_seconds: float,
    checksum_algorithm: str,
    cmroot: str | None,
    start_after: int | None,
    metrics_port: int,
    metrics_host: str,
    metrics_tls_cert: str | None,
    metrics_tls_key: str | None,
    metrics_basic_auth_user: str | None,
    metrics_basic_auth_password: str | None,
    once: bool,
) -> None:
    """Run the agent: read the notification log, publish each event once, in order."""
    from streamer import metrics
    from streamer.kafka.settings import client_config, parse_pairs
    from streamer.source.agent import AgentConfig, SourceAgent
    from streamer.source.enrich import EnrichSettings
    from streamer.source.policy import PolicySet
    from streamer.source.prerequisites import cannot_check as prerequisites_unchecked
    from streamer.source.prerequisites import check_prerequisites
    from streamer.source.reader import NotificationReader, SqlNotificationReader
    from streamer.source.thrift_reader import ThriftNotificationReader

    if bool(notification_db) == bool(hms_uri):
        raise ConfigError("give exactly one of --notification-db URL and --hms-uri thrift://host:port")
    auth = auth_from_options(hms_auth, hms_kerberos_principal, hms_client_principal, hms_client_keytab)
    if auth.kerberos and not hms_uri:
        raise ConfigError("--hms-auth kerberos applies to --hms-uri only; --notification-db reads the "
                          "metastore's database directly")
    policy = PolicySet.parse(policies)
    config = AgentConfig(
        source_id=source_id,
        kafka=client_config(bootstrap_servers, parse_pairs(kafka_settings)),
        topic=topic,
        batch_size=batch_size,
        poll_interval=poll_interval,
        gap_settle_seconds=gap_settle_seconds,
        enrich=EnrichSettings(checksum_algorithm=checksum_algorithm, cmroot=cmroot),
        start_after=start_after,
        catalog=catalog,
    )
    reader: NotificationReader = (
        SqlNotificationReader(notification_db)
        if notification_db
        else ThriftNotificationReader(str(hms_uri), auth=auth)
    )
    if isinstance(reader, ThriftNotificationReader):
        check_prerequisites(reader.config_value, cmroot=cmroot)
    else:
        prerequisites_unchecked(str(notification_db))
    metrics.serve(
        metrics.MetricsEndpoint(
            metrics_port, metrics_host, metrics_tls_cert, metrics_tls_key,
            metrics_basic_auth_user, metrics_basic_auth_password,
        )
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    _replace_if_changed(config, reader, policy, notification_db)
    agent = SourceAgent(config, reader, policy)
    try:
        agent.run(once=once, stop=stop)
    finally:
        agent.close()
        reader.close()
    click.echo(f"source {source_id}: published through event id {agent.last_id}")


def _replace_if_changed(config: Any, reader: Any, policy: Any, notification_db: str | None) -> None:
    """A restart with other policies than the topic records publishes the change (REPLACE) first."""
    from streamer.source.policy_record import parse_policy_record, policy_record
    from streamer.source.replace import recorded_policy, replace_policy

    previous = recorded_policy(config)
    if previous is None or previous == policy_record(policy):
        return
    if not notification_db:
        raise ConfigError(f"the policies changed ({previous} -> {policy_record(policy)}); publishing the "
                          "change needs the bundled warehouse's --notification-db (Thrift sources cannot "
                          "dump yet)")
    from streamer.source.warehouse_catalog import WarehouseCatalog
    from streamer.warehouse import Warehouse

    with Warehouse.open(notification_db, source_id=config.source_id) as wh:
        e1 = replace_policy(config, reader, WarehouseCatalog(wh), parse_policy_record(previous), policy)
    click.echo(f"policies changed: newly excluded tables dropped and newly included ones bootstrapped "
               f"at event {e1}")
