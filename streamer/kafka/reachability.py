"""Start-up check that Kafka answers: one bounded metadata request before a command does anything.

Without it a wrong address costs a minute of librdkafka retries (a status call, a target job that
starts Spark first) and ends in an error naming neither the address nor what to try. The check
runs before anything is created, so a failed connect leaves no topic or producer behind.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamer.errors import ConfigError
from streamer.kafka.client_log import ClientLog, with_client_log
from streamer.kafka.errors import KafkaUnreachableError

DEFAULT_CONNECT_TIMEOUT = 10.0
CONNECT_TIMEOUT_ENV = "STREAMER_KAFKA_CONNECT_TIMEOUT"


def connect_timeout(value: float | None = None) -> float:
    """``value`` if given, else ``$STREAMER_KAFKA_CONNECT_TIMEOUT``, else 10 s; must be positive."""
    raw: Any = value if value is not None else os.environ.get(CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        raise ConfigError(f"Kafka connect timeout must be a positive number of seconds, got {raw!r} "
                          f"(--kafka-connect-timeout / {CONNECT_TIMEOUT_ENV})")
    return seconds


def unreachable_message(servers: str, timeout: float, cause: str | None) -> str:
    """The one line an operator sees: the addresses, the wait, librdkafka's last error, what to try."""
    seen = f" (last error: {cause})" if cause else ""
    return (
        f"cannot reach Kafka at {servers} within {timeout:g} s{seen}: check --bootstrap-servers (host:port "
        "of a broker listener), the security protocol and credentials (-X security.protocol=..., sasl.*, "
        "ssl.*), and that the network/firewall lets this host reach the brokers"
    )


def check_reachable(config: Mapping[str, Any], timeout: float | None = None) -> None:
    """Ask the cluster for its brokers; ``KafkaUnreachableError`` if none answers within ``timeout``."""
    seconds = connect_timeout(timeout)
    servers = str(config.get("bootstrap.servers", ""))
    log = ClientLog(cap=logging.DEBUG)  # the failure is reported below, with librdkafka's cause
    probe = {**config, "socket.connection.setup.timeout.ms": max(1000, int(seconds * 1000))}
    admin = AdminClient(with_client_log(probe, log))
    try:
        metadata = admin.list_topics(timeout=seconds)
    except KafkaException as exc:
        admin.poll(0)  # serve the queued log lines: their last error is the cause worth naming
        cause = log.last_error or str(exc)
        raise KafkaUnreachableError(unreachable_message(servers, seconds, cause)) from exc
    if not metadata.brokers:
        admin.poll(0)
        raise KafkaUnreachableError(unreachable_message(servers, seconds, log.last_error))
