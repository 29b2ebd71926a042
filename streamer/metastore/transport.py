"""One place that opens a Thrift client to a Hive Metastore: plain, or SASL/GSSAPI (Kerberos).

Kerberos follows Hive's own client: the server principal from ``hive.metastore.kerberos.principal``
with ``_HOST`` replaced by the URI's host as written, credentials from the ticket cache or a client
keytab (``KRB5_CLIENT_KTNAME``). Why each choice: docs/design/metastore.md. The pure parts
(``HmsAuth`` validation, ``server_principal``) do no I/O; ``open_client`` does.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from streamer.errors import ConfigError

NONE = "none"
KERBEROS = "kerberos"
MECHANISMS = (NONE, KERBEROS)
HOST_PATTERN = "_HOST"
DEFAULT_PORT = 9083
CLIENT_KEYTAB_ENV = "KRB5_CLIENT_KTNAME"


@dataclass(frozen=True)
class HmsAuth:
    """How to authenticate to a metastore; the default (``none``) is a plain Thrift connection.

    ``principal`` is the server's principal as Hive's ``hive.metastore.kerberos.principal`` gives it
    (``_HOST`` allowed); ``client_principal`` + ``client_keytab`` log in without a ticket cache.
    """

    mechanism: str = NONE
    principal: str | None = None
    client_principal: str | None = None
    client_keytab: str | None = None

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ConfigError(
                f"HMS auth {self.mechanism!r} is not supported: expected one of {', '.join(MECHANISMS)}"
            )
        if self.mechanism == NONE:
            given = [
                name
                for name, value in (
                    ("kerberos principal", self.principal),
                    ("client principal", self.client_principal),
                    ("client keytab", self.client_keytab),
                )
                if value
            ]
            if given:
                raise ConfigError(
                    f"HMS {', '.join(given)} set but HMS auth is 'none': set it to 'kerberos' "
                    "or drop the Kerberos settings"
                )
            return
        if not self.principal:
            raise ConfigError(
                "HMS auth 'kerberos' needs the metastore's Kerberos principal "
                "(hive.metastore.kerberos.principal, e.g. hive/_HOST@EXAMPLE.COM)"
            )
        split_principal(self.principal)  # raises on a malformed principal
        if self.client_keytab and not self.client_principal:
            raise ConfigError(
                f"HMS client keytab {self.client_keytab!r} given without a client principal: "
                "name the principal to log in as (e.g. streamer@EXAMPLE.COM)"
            )
        if self.client_principal and "@" not in self.client_principal:
            raise ConfigError(
                f"HMS client principal {self.client_principal!r} has no realm: expected NAME@REALM"
            )

    @property
    def kerberos(self) -> bool:
        return self.mechanism == KERBEROS


def split_principal(principal: str) -> tuple[str, str, str]:
    """``service/host@REALM`` → (service, host, realm); anything else is a ConfigError."""
    primary, at, realm = principal.partition("@")
    service, slash, host = primary.partition("/")
    if not (at and slash and service and host and realm) or "/" in host or "@" in realm:
        raise ConfigError(
            f"HMS Kerberos principal {principal!r} is not of the form SERVICE/HOST@REALM "
            "(e.g. hive/_HOST@EXAMPLE.COM)"
        )
    return service, host, realm


def server_principal(template: str, host: str) -> str:
    """The metastore's principal for ``host``: ``_HOST`` replaced by it, lower-cased (as Hadoop does)."""
    service, principal_host, realm = split_principal(template)
    if principal_host != HOST_PATTERN:
        return template
    if not host or host == "0.0.0.0":
        raise ConfigError(f"cannot fill {HOST_PATTERN} of {template!r}: no metastore host name")
    return f"{service}/{host.lower()}@{realm}"


def parse_uri(uri: str) -> tuple[str, int]:
    """``thrift://host[:port]`` → (host, port); the port defaults to the metastore's 9083."""
    parts = urlsplit(uri)
    if parts.scheme != "thrift" or not parts.hostname:
        raise ConfigError(f"metastore URI {uri!r} is not of the form thrift://HOST[:PORT]")
    return parts.hostname, parts.port or DEFAULT_PORT


class SaslAdapter:
    """``pure-sasl``'s client behind the Cyrus-style API ``thrift_sasl`` calls (start/step/encode)."""

    def __init__(self, host: str, service: str, client_principal: str | None) -> None:
        self._host, self._service, self._client_principal = host, service, client_principal
        self._error = ""
        self._client: Any = None

    def _guard(self, fn: Callable[[], bytes]) -> tuple[bool, bytes]:
        try:
            return True, fn()
        except Exception as exc:  # the kerberos module raises its own GSSError tuples
            self._error = f"{type(exc).__name__}: {exc}"
            return False, b""

    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        def first() -> bytes:
            from puresasl.client import SASLClient

            # creating the client already acquires credentials: its errors belong to start()
            self._client = SASLClient(
                self._host, self._service, mechanism=mechanism, principal=self._client_principal
            )
            return bytes(self._client.process())

        ok, response = self._guard(first)
        return ok, mechanism, response

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        return self._guard(lambda: bytes(self._client.process(challenge)))

    def encode(self, data: bytes) -> tuple[bool, bytes]:
        # thrift_sasl frames plain data itself when the length is unchanged (QOP auth); a wrapped
        # token must carry its own 4-byte length, as Cyrus' sasl_encode output does.
        def wrap() -> bytes:
            token = bytes(self._client.wrap(data))
            return token if token == data else struct.pack(">I", len(token)) + token

        return self._guard(wrap)

    def decode(self, data: bytes) -> tuple[bool, bytes]:
        return self._guard(lambda: bytes(self._client.unwrap(data[4:])))

    def getError(self) -> str:  # thrift_sasl calls this Cyrus-style name
        return self._error


def _use_client_keytab(keytab: str) -> None:
    """Point MIT Kerberos at the client keytab; one process logs in with one keytab only."""
    if not os.path.isfile(keytab):
        raise ConfigError(f"HMS client keytab {keytab!r} does not exist or is not a file")
    current = os.environ.get(CLIENT_KEYTAB_ENV)
    wanted = f"FILE:{os.path.abspath(keytab)}"
    if current and current not in (keytab, wanted):
        raise ConfigError(
            f"HMS client keytab {keytab!r} conflicts with {CLIENT_KEYTAB_ENV}={current!r} "
            "already set for this process"
        )
    os.environ[CLIENT_KEYTAB_ENV] = current or wanted


def open_transport(uri: str, *, timeout_s: float, auth: HmsAuth | None = None) -> Any:
    """An *opened* Thrift transport to the metastore; SASL negotiation is done when it returns.

    Raises ConfigError for unusable settings, and Thrift's TTransportException / OSError when the
    server cannot be reached or refuses the credentials (callers map those to their own errors).
    """
    from thrift.transport import TSocket, TTransport

    auth = auth or HmsAuth()
    host, port = parse_uri(uri)
    sock = TSocket.TSocket(host, port)
    sock.setTimeout(int(timeout_s * 1000))
    if not auth.kerberos:
        transport: Any = TTransport.TBufferedTransport(sock)
        transport.open()
        return transport

    try:
        import thrift_sasl
        from puresasl import mechanisms
    except ImportError as exc:  # pragma: no cover - both are dependencies
        raise ConfigError(f"HMS auth 'kerberos' needs thrift-sasl and pure-sasl: {exc}") from exc
    if not mechanisms.have_kerberos:
        raise ConfigError(
            "HMS auth 'kerberos' needs the `kerberos` Python package (pip install kerberos; "
            "building it needs libkrb5-dev)"
        )
    if auth.client_keytab:
        _use_client_keytab(auth.client_keytab)
    assert auth.principal is not None  # checked by HmsAuth
    principal = server_principal(auth.principal, host)
    service, sasl_host, _realm = split_principal(principal)
    client_principal = auth.client_principal

    def factory() -> SaslAdapter:
        return SaslAdapter(sasl_host, service, client_principal)

    transport = thrift_sasl.TSaslClientTransport(factory, "GSSAPI", sock)
    try:
        transport.open()
    except Exception:
        sock.close()
        raise
    return transport


def open_client(uri: str, *, timeout_s: float, auth: HmsAuth | None = None) -> Any:
    """An ``hmsclient.HMSClient`` on an opened transport (plain or Kerberos, per ``auth``)."""
    from hmsclient import hmsclient
    from thrift.protocol import TBinaryProtocol

    transport = open_transport(uri, timeout_s=timeout_s, auth=auth)
    return hmsclient.HMSClient(iprot=TBinaryProtocol.TBinaryProtocolAccelerated(transport))
