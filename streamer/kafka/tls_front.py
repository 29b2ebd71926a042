"""A TLS-terminating TCP front for the embedded broker.

The bundled Tansu build cannot serve TLS (`--cert` and `--key` are mutually exclusive, and either
alone still serves plaintext), so TLS ends here instead: clients talk TLS to this front, which
forwards the bytes to Tansu's plaintext port on the loopback interface. Tansu advertises the front's
address in its metadata, so clients that follow the metadata keep talking TLS.

The front runs an asyncio loop in a daemon thread of the process that owns the broker. The TLS
handshake happens inside the connection handler (not in the listening socket) so that a refused
client (untrusted certificate, plaintext speaker, timeout) is logged with its address and cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from streamer.errors import ConfigError
from streamer.kafka.errors import BrokerError

log = logging.getLogger(__name__)

CHUNK = 64 * 1024


@dataclass(frozen=True)
class TlsFiles:
    """PEM files the embedded broker serves TLS with.

    `client_ca` turns on mutual TLS: every client must present a certificate signed by it. `ca` is
    only what `EmbeddedBroker.client_settings()` tells clients to trust (the server itself never
    reads it); leave it out when clients bring their own `ssl.ca.location`.
    """

    cert: Path
    key: Path
    client_ca: Path | None = None
    ca: Path | None = None

    @classmethod
    def of(
        cls,
        cert: str | os.PathLike[str],
        key: str | os.PathLike[str],
        client_ca: str | os.PathLike[str] | None = None,
        ca: str | os.PathLike[str] | None = None,
    ) -> TlsFiles:
        return cls(
            Path(cert),
            Path(key),
            Path(client_ca) if client_ca is not None else None,
            Path(ca) if ca is not None else None,
        )


def server_context(files: TlsFiles) -> ssl.SSLContext:
    """A TLS 1.2+ server context from `files`, or ConfigError naming the file that is unusable."""
    named = (("certificate", files.cert), ("key", files.key), ("client CA", files.client_ca))
    for label, path in named:
        if path is not None and not path.is_file():
            raise ConfigError(f"broker TLS {label} {path}: no such file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.cert, files.key)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(
            f"broker TLS certificate {files.cert} with key {files.key} is unusable "
            f"(not PEM, encrypted, or the key does not match the certificate): {exc}"
        ) from exc
    if files.client_ca is not None:
        try:
            context.load_verify_locations(cafile=files.client_ca)
        except ssl.SSLError as exc:
            raise ConfigError(f"broker TLS client CA {files.client_ca} is unusable: {exc}") from exc
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@dataclass
class RefusalLog:
    """Decides which refused handshakes to log: librdkafka retries every ~100 ms.

    The first refusal of a (client host, reason) pair is logged, then at most one per `interval`
    seconds, carrying the count of those left out in between.
    """

    interval: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _last: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)

    def admit(self, host: str, reason: str) -> int | None:
        """None to stay quiet; otherwise how many like it were left out since the last one logged."""
        now = self.clock()
        key = (host, reason)
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval:
            self._last[key] = (last[0], last[1] + 1)
            return None
        self._last[key] = (now, 0)
        if len(self._last) > 1024:  # a scan from many hosts must not grow this without bound
            cutoff = now - self.interval
            self._last = {k: v for k, v in self._last.items() if v[0] >= cutoff}
        return 0 if last is None else last[1]


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until EOF; Kafka never half-closes, so EOF on either side ends the connection."""
    while data := await src.read(CHUNK):
        dst.write(data)
        await dst.drain()


async def _splice(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Forward both ways until either side closes or fails, then stop the other direction."""
    tasks = {
        asyncio.create_task(_pipe(client_reader, upstream_writer)),
        asyncio.create_task(_pipe(upstream_reader, client_writer)),
    }
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.debug("TLS front connection ended: %r", task.exception())
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _reason(exc: BaseException) -> str:
    return str(exc) or f"{type(exc).__name__} (the client closed the connection)"


async def _close(writer: asyncio.StreamWriter | None) -> None:
    if writer is None:
        return
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), 1.0)


class TlsFront:
    """Accepts TLS on `host:port` and forwards each connection to `upstream` in plaintext."""

    def __init__(
        self,
        context: ssl.SSLContext,
        host: str,
        port: int,
        upstream: tuple[str, int],
        handshake_timeout: float = 10.0,
    ) -> None:
        self.context = context
        self.host = host
        self.port = port
        self.upstream = upstream
        self.handshake_timeout = handshake_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._error: BaseException | None = None
        self._refusals = RefusalLog()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> TlsFront:
        """Listen, and return once the socket is bound (or raise BrokerError if it cannot be)."""
        if self.running:
            return self
        ready = threading.Event()
        self._error = None
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"tls-front-{self.port}", daemon=True
        )
        self._thread.start()
        ready.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise BrokerError(f"broker TLS front cannot listen on {self.host}:{self.port}: {self._error}")
        log.debug("TLS front on %s:%d -> %s:%d", self.host, self.port, *self.upstream)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Close the listener and every forwarded connection; safe to call twice."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        self._thread = None
        if thread is None or loop is None or stopping is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(stopping.set)
        thread.join(timeout)

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready))
        except BaseException as exc:  # keep the caller from waiting forever
            self._error = exc
            ready.set()
        finally:
            loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        try:
            server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True)
        except OSError as exc:
            self._error = exc
            ready.set()
            return
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()

    def _warn(self, peer: object, what: str, reason: str) -> None:
        host = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)
        left_out = self._refusals.admit(host, f"{what}: {reason}")
        if left_out is not None:
            more = f" ({left_out} more like it not logged)" if left_out else ""
            log.warning("broker TLS front %s %s: %s%s", what, peer, reason, more)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        peer = writer.get_extra_info("peername")
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            try:
                await writer.start_tls(self.context, ssl_handshake_timeout=self.handshake_timeout)
            except (ssl.SSLError, OSError, TimeoutError) as exc:
                self._warn(peer, "refused", f"TLS handshake failed: {_reason(exc)}")
                return
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            except OSError as exc:
                host, port = self.upstream
                self._warn(peer, "dropped", f"broker at {host}:{port} unreachable: {exc}")
                return
            await _splice(reader, writer, upstream_reader, upstream_writer)
        except asyncio.CancelledError:
            # stop(): ending normally keeps asyncio from reporting the cancelled handler as an error
            pass
        finally:
            self._tasks.discard(task)
            await _close(upstream_writer)
            await _close(writer)
