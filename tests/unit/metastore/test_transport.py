"""The pure parts of metastore authentication: settings validation, principals, SASL framing, flags."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from streamer.cli import main
from streamer.errors import ConfigError
from streamer.metastore.transport import HmsAuth, SaslAdapter, parse_uri, server_principal, split_principal
from streamer.target.job.spark_kerberos import spark_kerberos_conf

PRINCIPAL = "hive/_HOST@EXAMPLE.COM"


def test_default_is_plain() -> None:
    assert not HmsAuth().kerberos
    assert spark_kerberos_conf(HmsAuth()) == {}


def test_kerberos_needs_the_server_principal() -> None:
    with pytest.raises(ConfigError, match=r"hive\.metastore\.kerberos\.principal"):
        HmsAuth("kerberos")


@pytest.mark.parametrize(
    "bad", ["hive@EXAMPLE.COM", "hive/host", "/host@R", "hive/@R", "hive/a/b@R", "h/x@R@S"]
)
def test_malformed_principal_is_named(bad: str) -> None:
    with pytest.raises(ConfigError, match="SERVICE/HOST@REALM") as err:
        HmsAuth("kerberos", bad)
    assert bad in str(err.value)


def test_unknown_mechanism_and_stray_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="'ldap' is not supported"):
        HmsAuth("ldap")
    with pytest.raises(ConfigError, match="kerberos principal set but HMS auth is 'none'"):
        HmsAuth("none", PRINCIPAL)
    with pytest.raises(ConfigError, match="without a client principal"):
        HmsAuth("kerberos", PRINCIPAL, client_keytab="/k.keytab")
    with pytest.raises(ConfigError, match="has no realm"):
        HmsAuth("kerberos", PRINCIPAL, client_principal="streamer")


def test_host_pattern_becomes_the_uri_host_lower_cased() -> None:
    assert server_principal(PRINCIPAL, "HMS1.Example.com") == "hive/hms1.example.com@EXAMPLE.COM"
    fixed = "hive/fixed.example.com@EXAMPLE.COM"
    assert server_principal(fixed, "other") == fixed
    assert split_principal("hive/h.example.com@EXAMPLE.COM") == ("hive", "h.example.com", "EXAMPLE.COM")
    with pytest.raises(ConfigError, match="no metastore host"):
        server_principal(PRINCIPAL, "0.0.0.0")


def test_uri_parsing() -> None:
    assert parse_uri("thrift://hms:9999") == ("hms", 9999)
    assert parse_uri("thrift://hms") == ("hms", 9083)
    with pytest.raises(ConfigError, match="thrift://HOST"):
        parse_uri("http://hms:9083")


class _Wrapping:
    """Stands in for pure-sasl's client after negotiation (QOP auth-int: tokens differ from data)."""

    def wrap(self, data: bytes) -> bytes:
        return b"W" + data

    def unwrap(self, data: bytes) -> bytes:
        assert data.startswith(b"W")
        return data[1:]


class _Plain:
    def wrap(self, data: bytes) -> bytes:
        return data

    def unwrap(self, data: bytes) -> bytes:
        return data


def test_sasl_adapter_frames_wrapped_tokens_like_cyrus() -> None:
    adapter = SaslAdapter("h", "hive", None)
    adapter._client = _Wrapping()
    ok, encoded = adapter.encode(b"call")
    assert ok and encoded == struct.pack(">I", 5) + b"Wcall"
    assert adapter.decode(encoded) == (True, b"call")
    adapter._client = _Plain()  # QOP auth: unchanged, thrift_sasl frames it itself
    assert adapter.encode(b"call") == (True, b"call")


def test_sasl_adapter_reports_errors_instead_of_raising() -> None:
    adapter = SaslAdapter("h", "hive", None)
    adapter._client = object()  # no wrap(): any failure becomes (False, ...) plus getError()
    ok, _ = adapter.encode(b"x")
    assert not ok and "AttributeError" in adapter.getError()


def test_spark_settings_for_kerberos() -> None:
    conf = spark_kerberos_conf(HmsAuth("kerberos", PRINCIPAL, "svc@EXAMPLE.COM", "/etc/svc.keytab"))
    assert conf["spark.hadoop.hive.metastore.sasl.enabled"] == "true"
    assert conf["spark.hadoop.hive.metastore.kerberos.principal"] == PRINCIPAL
    assert conf["spark.hadoop.hadoop.security.authentication"] == "kerberos"


def _exit_code(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0)


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--hms-uri", "thrift://127.0.0.1:1", "--hms-auth", "kerberos"],
        ["target", "run", "--bootstrap-servers", "k:9092", "--hms-uri", "thrift://127.0.0.1:1",
         "--warehouse-root", "/tmp/w", "--hms-auth", "kerberos"],
        ["source", "run", "--source-id", "s", "--bootstrap-servers", "k:9092",
         "--hms-uri", "thrift://127.0.0.1:1", "--hms-auth", "kerberos"],
    ],
)
def test_kerberos_without_principal_exits_2(argv: list[str], tmp_path: Path, capsys: Any) -> None:
    if argv[0] in ("status", "target"):
        (tmp_path / "state").mkdir()
        (tmp_path / "state" / "job-mode.json").write_text("{}")  # a job's state dir
        argv = [*argv, "--state-dir", str(tmp_path / "state")]
    assert _exit_code(argv) == 2
    assert "principal" in capsys.readouterr().err


def test_source_kerberos_applies_to_thrift_only(tmp_path: Path, capsys: Any) -> None:
    argv = ["source", "run", "--source-id", "s", "--bootstrap-servers", "k:9092",
            "--notification-db", str(tmp_path / "wh.db"), "--hms-auth", "kerberos",
            "--hms-kerberos-principal", PRINCIPAL]
    assert _exit_code(argv) == 2
    assert "--hms-uri only" in capsys.readouterr().err


def test_config_file_keys_and_env_twins(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "streamer.yaml"
    config.write_text("status:\n  hms-auth: kerberos\n  hms-client-keytab: /k.keytab\n")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "job-mode.json").write_text("{}")  # a job's state dir
    argv = ["--config", str(config), "status", "--hms-uri", "thrift://127.0.0.1:1",
            "--state-dir", str(tmp_path / "s")]
    assert _exit_code(argv) == 2
    assert "needs the metastore's Kerberos principal" in capsys.readouterr().err  # keys accepted
    monkeypatch.setenv("STREAMER_STATUS_HMS_KERBEROS_PRINCIPAL", "not-a-principal")
    assert _exit_code(argv) == 2
    assert "'not-a-principal' is not of the form" in capsys.readouterr().err
