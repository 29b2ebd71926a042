"""One Thrift connection to a Hive Metastore and the call wrapper every ``HmsCatalog`` operation uses.

A broken connection is reopened once and the call repeated; metastore errors become ``CatalogError``
subclasses naming the object, and "no such object" answers become ``ObjectMissing`` for the
operations to read as ``None`` or ignore. See docs/design/metastore.md.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Self, TypeVar
from urllib.parse import urlparse

from hmsclient import hmsclient
from hmsclient.genthrift.hive_metastore import ttypes as tt
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TException
from thrift.transport import TTransport

from streamer.errors import ApplyError, ConfigError, StreamerError
from streamer.metastore.transport import HmsAuth, open_transport

log = logging.getLogger(__name__)

T = TypeVar("T")

# Hive's StatsSetupConst.DO_NOT_UPDATE_STATS: keep the statistics parameters we send.
KEEP_STATS = tt.EnvironmentContext(properties={"DO_NOT_UPDATE_STATS": "true"})


class CatalogError(ApplyError):
    """A metastore call failed; ``obj`` names the database/table/partition/function concerned."""


class ObjectExistsError(CatalogError):
    """The object to create already exists on the target."""


class CatalogUnsupportedError(CatalogError):
    """The operation exists in newer Hive but not in this metastore's API (Hive 2.3)."""


class CatalogUnavailableError(CatalogError):
    """The metastore could not be reached, even after reconnecting once."""


class ObjectMissing(StreamerError):
    """Internal: the metastore said the object does not exist."""

    def __init__(self, obj: str) -> None:
        super().__init__(obj)
        self.obj = obj


_BROKEN = (TTransport.TTransportException, OSError, EOFError)


class CallCounter:
    """Metastore round trips made by every ``ThriftConnection`` of this process, the seconds spent
    waiting for their answers (summed over threads), and the wall-clock seconds with at least one
    call in flight (``busy_seconds``: lanes' calls at once count once), for the benches'
    ``metastore_calls_per_event``, ``metastore_seconds_per_event`` and ``metastore_busy_share``."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self._busy = 0.0
        self._in_flight = 0
        self._since = 0.0  # when the calls in flight began to be (with one or more)
        self._lock = threading.Lock()

    def begin(self) -> float:
        """A call starts; returns its start for ``end``."""
        now = time.perf_counter()
        with self._lock:
            self.calls += 1
            if self._in_flight == 0:
                self._since = now
            self._in_flight += 1
        return now

    def end(self, started: float) -> None:
        now = time.perf_counter()
        with self._lock:
            self.seconds += now - started
            self._in_flight -= 1
            if self._in_flight == 0:
                self._busy += now - self._since

    @property
    def busy_seconds(self) -> float:
        with self._lock:
            return self._busy + (time.perf_counter() - self._since if self._in_flight else 0.0)

    def reset(self) -> int:
        """The count so far (``seconds``, ``busy_seconds``: read them before), then all zero."""
        with self._lock:
            calls, self.calls, self.seconds, self._busy = self.calls, 0, 0.0, 0.0
            self._since = time.perf_counter()
        return calls


CALLS = CallCounter()


def parse_uri(uri: str) -> tuple[str, int]:
    parsed = urlparse(uri)
    if parsed.scheme != "thrift" or not parsed.hostname:
        raise ConfigError(f"metastore URI {uri!r} is not of the form thrift://HOST:PORT")
    return parsed.hostname, parsed.port or hmsclient.DEFAULT_PORT


class ThriftConnection:
    """A metastore client at ``uri`` (``thrift://host:port``), connected on creation, and its calls:
    ``call`` (errors mapped), ``get`` (missing -> ``None``), ``drop`` (missing ignored), ``must`` (missing
    is a ``CatalogError``).

    ``auth`` chooses plain Thrift (default) or SASL/GSSAPI (Kerberos), see ``streamer.metastore.transport``.
    """

    def __init__(self, uri: str, *, timeout_s: float = 60.0, auth: HmsAuth | None = None) -> None:
        self.uri = uri
        self._host, self._port = parse_uri(uri)
        self._timeout_s = timeout_s
        self._auth = auth or HmsAuth()
        self._client: hmsclient.HMSClient | None = None
        # one socket carries one call at a time: threads that share a connection take turns (two
        # calls at once read each other's answers; with the C codec that race runs in native code)
        self._turn = threading.RLock()
        self._connect()

    def _connect(self) -> hmsclient.HMSClient:
        try:
            transport = open_transport(self.uri, timeout_s=self._timeout_s, auth=self._auth)
        except _BROKEN as exc:
            how = " with Kerberos" if self._auth.kerberos else ""
            raise CatalogUnavailableError(
                f"cannot connect to the metastore at {self.uri}{how}: {exc}"
            ) from exc
        client = hmsclient.HMSClient(iprot=TBinaryProtocol.TBinaryProtocolAccelerated(transport))
        self._client = client
        return client

    def _drop_connection(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(*_BROKEN):
                client.close()

    def call(self, obj: str, fn: Callable[[hmsclient.HMSClient], T]) -> T:
        """Run one Thrift call, reconnecting once if the connection broke; map Thrift errors."""
        with self._turn:
            return self._call(obj, fn)

    def _call(self, obj: str, fn: Callable[[hmsclient.HMSClient], T]) -> T:
        for attempt in (1, 2):
            client = self._client or self._connect()
            started = CALLS.begin()
            try:
                return fn(client)
            except _BROKEN as exc:
                self._drop_connection()
                if attempt == 2:
                    raise CatalogUnavailableError(
                        f"metastore at {self.uri} connection lost: {exc}", obj=obj
                    ) from exc
                log.warning("metastore connection lost (%s) during a call on %s; reconnecting", exc, obj)
            except tt.AlreadyExistsException as exc:
                raise ObjectExistsError(f"already exists: {exc.message}", obj=obj) from exc
            except (tt.NoSuchObjectException, tt.UnknownDBException, tt.UnknownTableException) as exc:
                raise ObjectMissing(obj) from exc
            except TException as exc:
                message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                raise CatalogError(f"{type(exc).__name__}: {message}", obj=obj) from exc
            finally:
                CALLS.end(started)
        raise AssertionError("unreachable")

    def get(self, obj: str, fn: Callable[[hmsclient.HMSClient], T]) -> T | None:
        try:
            return self.call(obj, fn)
        except ObjectMissing:
            return None

    def drop(self, obj: str, fn: Callable[[hmsclient.HMSClient], Any]) -> None:
        try:
            self.call(obj, fn)
        except ObjectMissing:
            log.debug("%s is already gone", obj)

    def must(self, obj: str, fn: Callable[[hmsclient.HMSClient], T]) -> T:
        try:
            return self.call(obj, fn)
        except ObjectMissing as exc:
            raise CatalogError("does not exist on the target", obj=obj) from exc

    def close(self) -> None:
        with self._turn:  # never under a call in flight
            self._drop_connection()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
