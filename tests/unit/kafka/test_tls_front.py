"""The broker's TLS plumbing without a broker: context building, refusal log, probe frames, wiring."""

from __future__ import annotations

import ssl
import struct
from pathlib import Path

import click
import pytest

from streamer.errors import ConfigError
from streamer.kafka.broker import EmbeddedBroker, api_versions_ok, api_versions_request
from streamer.kafka.commands import tls_files
from streamer.kafka.tls_front import RefusalLog, TlsFiles, server_context
from tests.fixtures.certs import Issued, make_ca


@pytest.fixture
def issued(tmp_path: Path) -> tuple[Path, Issued, Issued]:
    ca = make_ca(tmp_path, "ca")
    return ca.cert, ca.issue(tmp_path, "a", ["localhost"]), ca.issue(tmp_path, "b", ["localhost"])


def test_server_context_is_tls12_plus_and_requires_client_certs_only_with_a_client_ca(
    issued: tuple[Path, Issued, Issued],
) -> None:
    ca, a, _ = issued
    plain = server_context(TlsFiles.of(a.cert, a.key))
    assert plain.minimum_version == ssl.TLSVersion.TLSv1_2
    assert plain.verify_mode == ssl.CERT_NONE
    mutual = server_context(TlsFiles.of(a.cert, a.key, client_ca=ca))
    assert mutual.verify_mode == ssl.CERT_REQUIRED


def test_missing_file_is_named(issued: tuple[Path, Issued, Issued], tmp_path: Path) -> None:
    _, a, _ = issued
    with pytest.raises(ConfigError, match=r"broker TLS key .*nope\.key: no such file"):
        server_context(TlsFiles.of(a.cert, tmp_path / "nope.key"))
    with pytest.raises(ConfigError, match="client CA"):
        server_context(TlsFiles.of(a.cert, a.key, client_ca=tmp_path / "nope.crt"))


def test_key_of_another_certificate_is_refused(issued: tuple[Path, Issued, Issued]) -> None:
    _, a, b = issued
    with pytest.raises(ConfigError, match=r"a\.crt with key .*b\.key is unusable"):
        server_context(TlsFiles.of(a.cert, b.key))


def test_not_a_pem_client_ca_is_refused(issued: tuple[Path, Issued, Issued], tmp_path: Path) -> None:
    _, a, _ = issued
    junk = tmp_path / "junk.crt"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"client CA .*junk\.crt is unusable"):
        server_context(TlsFiles.of(a.cert, a.key, client_ca=junk))


def test_refusal_log_logs_first_then_one_per_interval_with_the_count_left_out() -> None:
    now = [0.0]
    refusals = RefusalLog(interval=60.0, clock=lambda: now[0])
    assert refusals.admit("10.0.0.1", "unknown ca") == 0
    for step in range(5):
        now[0] = 1.0 + step
        assert refusals.admit("10.0.0.1", "unknown ca") is None
    assert refusals.admit("10.0.0.2", "unknown ca") == 0  # another host is news
    assert refusals.admit("10.0.0.1", "bad certificate") == 0  # another reason is news
    now[0] = 61.0
    assert refusals.admit("10.0.0.1", "unknown ca") == 5
    assert refusals.admit("10.0.0.1", "unknown ca") is None


def test_api_versions_probe_frames() -> None:
    frame = api_versions_request(7, client_id="p")
    size, api_key, version, correlation, name_len = struct.unpack(">ihhih", frame[:14])
    assert (size, api_key, version, correlation, name_len, frame[14:]) == (len(frame) - 4, 18, 0, 7, 1, b"p")
    assert api_versions_ok(struct.pack(">ih", 7, 0) + b"\x00\x00\x00\x00", 7)
    assert not api_versions_ok(struct.pack(">ih", 8, 0), 7)  # someone else's answer
    assert not api_versions_ok(struct.pack(">ih", 7, 35), 7)  # UNSUPPORTED_VERSION
    assert not api_versions_ok(b"\x00\x00", 7)


def test_with_tls_tansu_listens_on_loopback_and_advertises_the_front(
    issued: tuple[Path, Issued, Issued],
) -> None:
    ca, a, _ = issued
    broker = EmbeddedBroker(
        port=19093, host="0.0.0.0", tls=TlsFiles.of(a.cert, a.key, ca=ca), advertised_host="kafka.example"
    )
    cmd = broker.command()
    listener = cmd[cmd.index("--listener-url") + 1]
    assert listener == f"tcp://127.0.0.1:{broker.broker_port}" and broker.broker_port != 19093
    assert cmd[cmd.index("--advertised-listener-url") + 1] == "tcp://kafka.example:19093"
    assert broker.client_settings() == {
        "bootstrap.servers": "kafka.example:19093",
        "security.protocol": "SSL",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": str(ca),
    }


def test_without_tls_nothing_changes() -> None:
    broker = EmbeddedBroker(port=19094)
    cmd = broker.command()
    assert cmd[cmd.index("--listener-url") + 1] == "tcp://127.0.0.1:19094"
    assert cmd[cmd.index("--advertised-listener-url") + 1] == "tcp://127.0.0.1:19094"
    assert broker.client_settings() == {"bootstrap.servers": "127.0.0.1:19094"}


def test_bad_tls_files_fail_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="certificate"):
        EmbeddedBroker(tls=TlsFiles.of(tmp_path / "x.crt", tmp_path / "x.key"))


def test_cli_tls_flags_go_together() -> None:
    assert tls_files(None, None, None) is None
    assert tls_files("c.pem", "k.pem", None) == TlsFiles(Path("c.pem"), Path("k.pem"))
    with pytest.raises(click.UsageError, match="--tls-key is missing"):
        tls_files("c.pem", None, None)
    with pytest.raises(click.UsageError, match="--tls-cert is missing"):
        tls_files(None, "k.pem", None)
    with pytest.raises(click.UsageError, match="--tls-client-ca needs"):
        tls_files(None, None, "ca.pem")
