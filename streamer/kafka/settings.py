"""librdkafka client settings: bootstrap servers plus validated pass-through properties.

Production clusters need SASL/TLS settings streamer has no reason to model one by one, so they pass
straight through to librdkafka; they are checked against librdkafka's property names first (a typo
fails at start-up, naming the key), and secrets are masked whenever a config is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import click

from streamer.errors import ConfigError
from streamer.kafka.properties import KNOWN_PROPERTIES, SECRET_PROPERTIES

MASK = "*****"

F = TypeVar("F", bound=Callable[..., Any])


def parse_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """Turn `key=value` strings (CLI `-X` flags) into a dict; a later key wins, like librdkafka."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"Kafka setting {pair!r} is not of the form key=value")
        out[key] = value
    return out


def validate(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of `settings`, or raise ConfigError naming every key librdkafka would reject."""
    unknown = sorted(key for key in settings if key not in KNOWN_PROPERTIES)
    if unknown:
        raise ConfigError(
            "Unrecognized properties: "
            + ", ".join(unknown)
            + " (expected librdkafka configuration properties, e.g. security.protocol, sasl.username)"
        )
    return dict(settings)


def client_config(
    bootstrap_servers: str,
    settings: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Build a librdkafka config: bootstrap servers, validated pass-through settings, then overrides.

    Overrides are what the calling code needs for correctness (e.g. `isolation.level`); they win over
    user settings. Keyword names use `_` for `.` (`isolation_level="read_committed"`).
    """
    if not bootstrap_servers or not bootstrap_servers.strip():
        raise ConfigError("--bootstrap-servers is required (host:port[,host:port...])")
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers.strip()}
    config.update(validate(settings or {}))
    config.update(validate({key.replace("_", "."): value for key, value in overrides.items()}))
    return config


def with_overrides(config: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """Copy of an already-built config with overrides (`_` stands for `.` in keyword names)."""
    out = dict(config)
    out.update(validate({key.replace("_", "."): value for key, value in overrides.items()}))
    return out


# Java client keys that reach streamer through Spark-style ``kafka.*`` options or config files
_JAVA_SECRETS = frozenset({"sasl.jaas.config", "ssl.keystore.key", "ssl.truststore.certificates",
                           "ssl.keystore.certificate.chain"})
_SECRET_WORDS = ("password", "secret", "passphrase")


def is_secret(key: str) -> bool:
    """True for properties whose value must never be shown (``kafka.``-prefixed spellings too)."""
    name = key.strip().lower().removeprefix("kafka.")
    return (
        name in SECRET_PROPERTIES
        or name in _JAVA_SECRETS
        or name.startswith("sasl.oauthbearer.config")
        or any(word in name for word in _SECRET_WORDS)
    )


def masked(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `config` safe to print or log: secret values replaced by a fixed mask."""
    return {key: (MASK if is_secret(key) else value) for key, value in config.items()}


def kafka_options(func: F) -> F:
    """Click options shared by every command that talks to Kafka: `--bootstrap-servers` and `-X`."""
    func = click.option(
        "--kafka-setting",
        "-X",
        "kafka_settings",
        multiple=True,
        metavar="KEY=VALUE",
        help="librdkafka property passed through (security.protocol, sasl.*, ssl.*, ...); repeatable.",
    )(func)
    func = click.option(
        "--bootstrap-servers",
        envvar="STREAMER_BOOTSTRAP_SERVERS",
        required=True,
        help="Kafka bootstrap servers, host:port[,host:port].",
    )(func)
    return func


def config_from_options(bootstrap_servers: str, kafka_settings: Iterable[str]) -> dict[str, Any]:
    """The config a command built with `kafka_options` should use."""
    return client_config(bootstrap_servers, parse_pairs(kafka_settings))
