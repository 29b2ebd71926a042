"""Click options shared by ``streamer source run`` and ``streamer bootstrap``.

Each command stacks the decorators in its own ``--help`` order, passing its own help texts where the
two differ; ``with_source_options`` (the decorator next to the function) gathers the shared flags'
values into one ``SourceOptions`` argument, ``opts``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

import click

from streamer import checksums
from streamer.fs_options import fs_options
from streamer.kafka.naming import DEFAULT_TOPIC_HELP
from streamer.kafka.reachability import DEFAULT_CONNECT_TIMEOUT
from streamer.kafka.record_size import COMPRESSIONS, DEFAULT_COMPRESSION, DEFAULT_MAX_RECORD_BYTES
from streamer.metastore.auth_options import auth_from_options, hms_auth_options

if TYPE_CHECKING:
    from streamer.metastore.transport import HmsAuth
    from streamer.source.agent import AgentConfig
    from streamer.source.policy import PolicySet

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def env(name: str) -> dict[str, Any]:
    """``STREAMER_<name>`` as the option's environment twin, shown in ``--help``."""
    return {"envvar": f"STREAMER_{name}", "show_envvar": True}


def stacked(*decorators: Callable[[Any], Any]) -> Callable[[F], F]:
    """The decorators as if written one above the other in this order (the first is first in --help)."""

    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def source_id_option(help_text: str) -> Callable[[F], F]:
    return click.option("--source-id", required=True, **env("SOURCE_ID"), help=help_text)


def hms_uri_option(help_text: str) -> Callable[[F], F]:
    return click.option("--hms-uri", **env("HMS_URI"), help=help_text)


def notification_db_option(help_text: str) -> Callable[[F], F]:
    return click.option("--notification-db", "notification_db", **env("NOTIFICATION_DB"), help=help_text)


def scope_options(policy_help: str) -> Callable[[F], F]:
    """Metastore access (Kerberos, filesystems), then what to replicate: ``--policy`` and ``--catalog``."""
    return stacked(
        hms_auth_options("STREAMER_"),
        fs_options("STREAMER_"),
        click.option("--policy", "policies", multiple=True, **env("POLICY"), help=policy_help),
        click.option("--catalog", default="hive", show_default=True, **env("CATALOG"),
                     help="Metastore catalog to replicate (NOTIFICATION_LOG.CAT_NAME, Hive 3+); events of "
                          "other catalogs (e.g. HDP's spark) are passed over like filtered ones. Events "
                          "naming no catalog belong to every one."),
    )


def kafka_options(kafka_setting_help: str, *, servers_required: bool = True) -> Callable[[F], F]:
    """``--bootstrap-servers``, ``--kafka-setting`` (``-X``), ``--topic``, and how records are sent;
    ``servers_required=False`` for a command that takes the topic's flags but contacts no broker."""
    return stacked(
        click.option("--bootstrap-servers", required=servers_required,
                     default=None if servers_required else "", **env("BOOTSTRAP_SERVERS"),
                     help="Kafka bootstrap servers, host:port[,host:port]."),
        click.option("--kafka-setting", "-X", "kafka_settings", multiple=True, metavar="KEY=VALUE",
                     **env("KAFKA_SETTING"), help=kafka_setting_help),
        click.option("--topic", **env("TOPIC"), help=f"Topic to publish to. Default: {DEFAULT_TOPIC_HELP}."),
        click.option("--kafka-connect-timeout", default=DEFAULT_CONNECT_TIMEOUT, show_default=True,
                     type=click.FloatRange(min=0, min_open=True), **env("KAFKA_CONNECT_TIMEOUT"),
                     help="Seconds Kafka has to answer at start-up before the command fails, naming the "
                          "address."),
        click.option("--compression", default=DEFAULT_COMPRESSION, show_default=True,
                     type=click.Choice(COMPRESSIONS), **env("COMPRESSION"),
                     help="Compression of published records (librdkafka compression.type)."),
        click.option("--max-record-bytes", default=DEFAULT_MAX_RECORD_BYTES, show_default=True,
                     type=click.IntRange(1024), **env("MAX_RECORD_BYTES"),
                     help="Largest record (uncompressed) the agent publishes; sets the producer's "
                          "message.max.bytes and a new topic's max.message.bytes. A larger one stops the "
                          "agent, naming the event."),
    )


def file_options(cmroot_help: str) -> Callable[[F], F]:
    """What the source's file checksums are (``--checksum-algorithm``) and its ``--cmroot``."""
    return stacked(
        click.option("--checksum-algorithm", default="sha256", show_default=True,
                     type=click.Choice(checksums.ALGORITHMS, case_sensitive=False),
                     **env("CHECKSUM_ALGORITHM"),
                     help="What the source filesystem's file checksums are (recorded with each file): "
                          "hdfs-md5-of-md5-of-crc32c for HDFS (its default), hdfs-md5-of-md5-of-crc32 with "
                          "dfs.checksum.type=CRC32, hdfs-composite-crc32c/-crc32 with "
                          "dfs.checksum.combine.mode=COMPOSITE_CRC."),
        click.option("--cmroot", **env("CMROOT"), help=cmroot_help),
    )


@dataclass(frozen=True)
class SourceOptions:
    """The shared flags' values as given; each method validates what it builds (``ConfigError``)."""

    source_id: str
    hms_auth: str
    hms_kerberos_principal: str | None
    hms_client_principal: str | None
    hms_client_keytab: str | None
    policies: tuple[str, ...]
    catalog: str
    bootstrap_servers: str
    kafka_settings: tuple[str, ...]
    topic: str | None
    kafka_connect_timeout: float
    compression: str
    max_record_bytes: int
    checksum_algorithm: str
    cmroot: str | None

    def auth(self) -> HmsAuth:
        return auth_from_options(self.hms_auth, self.hms_kerberos_principal, self.hms_client_principal,
                                 self.hms_client_keytab)

    def policy(self) -> PolicySet:
        from streamer.source.policy import PolicySet

        return PolicySet.parse(self.policies)

    def agent_config(self, **settings: Any) -> AgentConfig:
        """The agent's config from these flags, plus the command's own ``settings`` (batch size...)."""
        from streamer.kafka.record_size import check_limit
        from streamer.kafka.settings import config_from_options
        from streamer.source.agent import AgentConfig
        from streamer.source.enrich import EnrichSettings

        return AgentConfig(
            source_id=self.source_id,
            kafka=config_from_options(self.bootstrap_servers, self.kafka_settings),
            topic=self.topic,
            enrich=EnrichSettings(checksum_algorithm=self.checksum_algorithm, cmroot=self.cmroot),
            catalog=self.catalog,
            compression=self.compression,
            max_record_bytes=check_limit(self.max_record_bytes),
            **settings,
        )


_SHARED = tuple(f.name for f in fields(SourceOptions))


def with_source_options(func: Callable[..., T]) -> Callable[..., T]:
    """Put next to the command's function: its flags of ``SourceOptions`` arrive as one ``opts``."""

    @functools.wraps(func)
    def command(**kwargs: Any) -> T:
        opts = SourceOptions(**{name: kwargs.pop(name) for name in _SHARED})
        return func(opts, **kwargs)

    return command
