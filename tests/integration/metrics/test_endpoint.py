"""The /metrics endpoint for real over HTTP: loopback by default, basic auth, and TLS with a verified host."""

from __future__ import annotations

import base64
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from streamer import metrics
from streamer.errors import ConfigError

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, *, auth: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def test_plain_endpoint_binds_loopback_and_serves_streamer_metrics() -> None:
    port = _free_port()
    server = metrics.serve(port)
    assert server is not None
    try:
        assert server.server_address[0] == "127.0.0.1"
        status, body = _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        assert "streamer_target_bytes_copied_total" in body
    finally:
        server.shutdown()
        server.server_close()


def test_basic_auth_refuses_missing_or_wrong_credentials() -> None:
    port = _free_port()
    endpoint = metrics.MetricsEndpoint(port, basic_auth_user="prom", basic_auth_password="s3cret")
    server = metrics.serve(endpoint)
    assert server is not None
    try:
        assert _get(f"http://127.0.0.1:{port}/metrics")[0] == 401
        assert _get(f"http://127.0.0.1:{port}/metrics", auth="prom:wrong")[0] == 401
        status, body = _get(f"http://127.0.0.1:{port}/metrics", auth="prom:s3cret")
        assert status == 200 and "streamer_source_gap" in body
    finally:
        server.shutdown()
        server.server_close()


def _make_certs(d: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for localhost/127.0.0.1 signed by it."""
    ca_key, ca_crt = d / "ca.key", d / "ca.crt"
    key, csr, crt, ext = d / "srv.key", d / "srv.csr", d / "srv.crt", d / "ext.cnf"
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_crt),
        "-days", "1", "-subj", "/CN=streamer test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=localhost")
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(crt), "-days", "1", "-extfile", str(ext))
    return ca_crt, crt, key


def test_tls_endpoint_verifies_against_its_ca(tmp_path: Path) -> None:
    ca, cert, key = _make_certs(tmp_path)
    port = _free_port()
    server = metrics.serve(metrics.MetricsEndpoint(port, tls_cert=str(cert), tls_key=str(key)))
    assert server is not None
    try:
        trusted = ssl.create_default_context(cafile=str(ca))  # hostname verification on
        status, body = _get(f"https://localhost:{port}/metrics", context=trusted)
        assert status == 200 and "streamer_target_halted" in body
        with pytest.raises(urllib.error.URLError):
            _get(f"https://localhost:{port}/metrics", context=ssl.create_default_context())  # unknown CA
    finally:
        server.shutdown()
        server.server_close()


def test_half_configured_tls_or_auth_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="certificate and a key"):
        metrics.serve(metrics.MetricsEndpoint(_free_port(), tls_cert="/x.pem"))
    with pytest.raises(ConfigError, match="user and a password"):
        metrics.serve(metrics.MetricsEndpoint(_free_port(), basic_auth_user="u"))


def _raw_get(port: int, header: bytes) -> bytes:
    """A request with ``header`` sent byte for byte (urllib refuses what is not latin-1)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n" + header + b"\r\n\r\n")
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    return reply


def test_an_undecodable_authorization_header_is_refused_without_a_traceback(
    capfd: pytest.CaptureFixture[str],
) -> None:
    port = _free_port()
    endpoint = metrics.MetricsEndpoint(port, basic_auth_user="prom", basic_auth_password="s3cret")
    server = metrics.serve(endpoint)
    assert server is not None
    try:
        for header in (
            "Authorization: Basic é€ü".encode(),
            b"Authorization: \xff\xfe\x00garbage",
            b"Authorization: Basic " + base64.b64encode("prom:s3crét".encode()),
        ):
            reply = _raw_get(port, header)
            assert reply.startswith(b"HTTP/1.0 401"), reply[:200]
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err


def test_each_role_serves_only_its_own_families() -> None:
    servers = {role: metrics.serve(_free_port(), role=role) for role in metrics.Role}
    try:
        pages = {}
        for role, server in servers.items():
            assert server is not None
            status, pages[role] = _get(f"http://127.0.0.1:{server.server_port}/metrics")
            assert status == 200
        agent, target = pages[metrics.Role.SOURCE], pages[metrics.Role.TARGET]
        assert "streamer_source_last_event_id" in agent
        assert "streamer_target_" not in agent and "streamer_verify_" not in agent
        assert "streamer_target_last_applied_event_id" in target
        assert "streamer_verify_failures_total" in target
        assert "streamer_source_" not in target
    finally:
        for server in servers.values():
            if server is not None:
                server.shutdown()
                server.server_close()


@pytest.mark.parametrize(
    ("module", "present", "absent"),
    [
        ("streamer.source.commands", "streamer_source_gap", "streamer_target_"),
        ("streamer.target.commands", "streamer_verify_failures_total", "streamer_source_"),
    ],
)
def test_a_command_that_names_no_role_serves_its_own_packages(module: str, present: str, absent: str) -> None:
    """``source run`` and ``target run`` call ``serve(endpoint)``: their package decides the role."""
    namespace: dict[str, object] = {"__name__": module, "metrics": metrics}
    exec("def start(port):\n    return metrics.serve(metrics.MetricsEndpoint(port))", namespace)
    port = _free_port()
    server = namespace["start"](port)  # type: ignore[operator]
    assert server is not None
    try:
        status, body = _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and present in body and absent not in body
    finally:
        server.shutdown()
        server.server_close()
    assert metrics.role_of_module("streamer.sourcery") is None
    assert metrics.role_of_module("tests.integration.metrics") is None


def test_an_idle_tls_client_blocks_no_other_scrape(tmp_path: Path) -> None:
    """One TCP connection that never starts its TLS handshake: the handshake runs in that
    connection's own thread (with a timeout), so scrapes beside it are answered."""
    ca, cert, key = _make_certs(tmp_path)
    port = _free_port()
    server = metrics.serve(metrics.MetricsEndpoint(port, tls_cert=str(cert), tls_key=str(key)))
    assert server is not None
    idle = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        trusted = ssl.create_default_context(cafile=str(ca))
        for _ in range(3):
            status, body = _get(f"https://localhost:{port}/metrics", context=trusted)
            assert status == 200 and "streamer_target_halted" in body
    finally:
        idle.close()
        server.shutdown()
        server.server_close()


def test_a_failed_handshake_prints_no_traceback(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Plain HTTP to the TLS port (a probe, a scanner): refused in its own thread, without a
    traceback on stderr; real scrapes go on."""
    ca, cert, key = _make_certs(tmp_path)
    port = _free_port()
    server = metrics.serve(metrics.MetricsEndpoint(port, tls_cert=str(cert), tls_key=str(key)))
    assert server is not None
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
            plain.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            plain.recv(100)
        trusted = ssl.create_default_context(cafile=str(ca))
        status, _ = _get(f"https://localhost:{port}/metrics", context=trusted)
        assert status == 200
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err
