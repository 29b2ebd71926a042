from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import ConfigError
from streamer.kafka.properties import KNOWN_PROPERTIES, SECRET_PROPERTIES
from streamer.kafka.settings import (
    MASK,
    client_config,
    config_from_options,
    kafka_options,
    masked,
    parse_pairs,
    validate,
)


def test_client_config_passes_known_settings_through() -> None:
    config = client_config(
        "k1:9092,k2:9092",
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.password": "pw"},
    )
    assert config == {
        "bootstrap.servers": "k1:9092,k2:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.password": "pw",
    }


def test_overrides_win_and_use_underscores_for_dots() -> None:
    config = client_config("k:1", {"isolation.level": "read_uncommitted"}, isolation_level="read_committed")
    assert config["isolation.level"] == "read_committed"


def test_unknown_keys_are_rejected_by_name() -> None:
    with pytest.raises(ConfigError, match=r"Unrecognized properties: sasl\.pasword, ssl\.foo"):
        client_config("k:1", {"ssl.foo": "x", "sasl.pasword": "x", "security.protocol": "SSL"})


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match="bootstrap-servers"):
        client_config("  ", {})


def test_masked_hides_every_secret_and_keeps_the_rest() -> None:
    config = {key: "s3cret" for key in SECRET_PROPERTIES} | {
        "sasl.username": "alice",
        "bootstrap.servers": "b",
    }
    shown = masked(config)
    assert all(shown[key] == MASK for key in SECRET_PROPERTIES)
    assert shown["sasl.username"] == "alice" and shown["bootstrap.servers"] == "b"
    assert "s3cret" not in repr(shown)
    assert config["sasl.password"] == "s3cret"  # the input is not modified


SECRET_BEARING = [
    "sasl.jaas.config",  # Java clients' JAAS line: its password inline
    "kafka.sasl.jaas.config",  # the same as a Spark-style option
    "KAFKA.SASL.JAAS.CONFIG",
    "sasl.oauthbearer.config",
    "kafka.sasl.password",
    "ssl.key.pem",
    "kafka.ssl.key.pem",
    "sasl.oauthbearer.assertion.private.key.pem",
    "ssl.truststore.password",
    "ssl.keystore.key",
]


@pytest.mark.parametrize("key", SECRET_BEARING)
def test_masked_hides_secret_bearing_keys_in_any_spelling(key: str) -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="pw";'
    shown = masked({key: jaas, "kafka.sasl.username": "alice", "ssl.ca.pem": "CERT"})
    assert shown[key] == MASK
    assert shown["kafka.sasl.username"] == "alice" and shown["ssl.ca.pem"] == "CERT"


@given(st.dictionaries(st.sampled_from(sorted(KNOWN_PROPERTIES)), st.text(min_size=1)))
def test_masked_never_leaks_a_password_or_secret(config: dict[str, str]) -> None:
    shown = masked(config)
    assert shown.keys() == config.keys()
    for key, value in shown.items():
        if "password" in key or "secret" in key or "passphrase" in key or key in SECRET_PROPERTIES:
            assert value == MASK
        else:
            assert value == config[key]


@given(st.dictionaries(st.text(alphabet="abcdefgh.", min_size=1).filter(lambda k: k.strip()), st.text()))
def test_parse_pairs_round_trips(settings: dict[str, str]) -> None:
    pairs = [f"{key}={value}" for key, value in settings.items()]
    assert parse_pairs(pairs) == {key.strip(): value for key, value in settings.items()}


def test_parse_pairs_rejects_missing_equals() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        parse_pairs(["security.protocol"])


def test_value_may_contain_equals() -> None:
    assert parse_pairs(["sasl.oauthbearer.config=a=b c=d"]) == {"sasl.oauthbearer.config": "a=b c=d"}


def test_validate_accepts_all_known_properties() -> None:
    assert validate(dict.fromkeys(KNOWN_PROPERTIES, "x")).keys() == KNOWN_PROPERTIES


def test_click_options_build_a_validated_config() -> None:
    seen: dict[str, object] = {}

    @click.command()
    @kafka_options
    def cmd(bootstrap_servers: str, kafka_settings: tuple[str, ...]) -> None:
        seen.update(config_from_options(bootstrap_servers, kafka_settings))

    runner = CliRunner()
    ok = runner.invoke(cmd, ["-X", "security.protocol=SSL"], env={"STREAMER_BOOTSTRAP_SERVERS": "h:1"})
    assert ok.exit_code == 0, ok.output
    assert seen == {"bootstrap.servers": "h:1", "security.protocol": "SSL"}
    bad = runner.invoke(cmd, ["--bootstrap-servers", "h:1", "-X", "nope=1"])
    assert isinstance(bad.exception, ConfigError)
    assert "Unrecognized properties: nope" in str(bad.exception)
