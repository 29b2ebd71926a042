"""An embedded Hive Metastore: the Hive 2.3 server inside PySpark's jars, run as a Java subprocess.

The demo and the tests need a real metastore as the replication target, and no Hive installation
exists here; PySpark's wheel already carries a complete one. ``EmbeddedMetastore`` writes a
``hive-site.xml``, starts ``HiveMetaStore`` on a free port and returns only once a real Thrift call
succeeds, so callers never race the server's schema creation.

Hive 2.3's server has no bind-host setting: it listens on every interface. Clients here always
connect to 127.0.0.1.

``site_overrides`` and ``jvm_options`` run it secured (e.g. ``hive.metastore.sasl.enabled`` with a
Kerberos keytab and ``-Djava.security.krb5.conf=...``); ``client_auth`` is then how the readiness
probe authenticates. ``hadoop.*`` overrides also go to a ``core-site.xml``, which is where Hadoop's
``UserGroupInformation`` looks for ``hadoop.security.authentication``.

``file://`` paths go through streamer's local filesystem (``streamer.embedded_metastore.localfs``: Hadoop's,
without a process per permission) unless ``streamer_local_fs=False``.

``notifications=True`` adds streamer's notification listener (``streamer.embedded_metastore.listener``): every
change is then logged in ``NOTIFICATION_LOG`` and served by ``get_next_notification``, as a
production metastore with Hive's listener does. ``cmroot=DIR`` turns on Hive's change management
into that folder (``streamer.embedded_metastore.cm``).

The parts: ``launch`` (configuration files, classpath), ``schema`` (PostgreSQL's tables),
``process`` (the JVM: start, readiness, stop); ``EmbeddedMetastore`` composes them.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from streamer.embedded_metastore.errors import MetastoreError
from streamer.embedded_metastore.launch import ServerOptions, prepare, pyspark_jars_dir
from streamer.embedded_metastore.process import (
    LOG4J_FLAG,
    MAIN_CLASS,
    JavaProcess,
    free_port,
    java_command,
)
from streamer.embedded_metastore.schema import SCHEMA_TOOL, create_schema
from streamer.embedded_metastore.site import MetastoreSettings, derby_url
from streamer.metastore.transport import HmsAuth, open_client

__all__ = [
    "LOG4J_FLAG",
    "LOG_NAME",
    "MAIN_CLASS",
    "SCHEMA_TOOL",
    "EmbeddedMetastore",
    "free_port",
    "java_command",
    "pyspark_jars_dir",
]

log = logging.getLogger(__name__)

LOG_NAME = "metastore.log"


def ping(uri: str, auth: HmsAuth, timeout_ms: int = 5000) -> list[str]:
    """One real Thrift call (``get_all_databases``); raises if the server does not answer."""
    client = open_client(uri, timeout_s=timeout_ms / 1000, auth=auth)
    try:
        names: list[str] = client.get_all_databases()
        return names
    finally:
        client.close()


def probe(port: int, auth: HmsAuth) -> None:
    """Readiness: a bare TCP connect first (Thrift's socket logs every refused one loudly), then ``ping``."""
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    ping(f"thrift://127.0.0.1:{port}", auth)


class EmbeddedMetastore:
    """A metastore server process with its configuration, logs and (for Derby) database in ``work_dir``.

    Use as a context manager, or call ``start()`` and ``stop()``. ``work_dir`` defaults to a fresh
    temporary folder that ``stop()`` removes; a given ``work_dir`` is kept, so a Derby-backed
    metastore started again on it finds its previous state.
    """

    def __init__(
        self,
        *,
        work_dir: Path | None = None,
        warehouse_dir: Path | None = None,
        jdbc_url: str | None = None,
        jdbc_user: str | None = None,
        jdbc_password: str | None = None,
        port: int | None = None,
        start_timeout: float = 120.0,
        site_overrides: Mapping[str, str] | None = None,
        jvm_options: Sequence[str] = (),
        client_auth: HmsAuth | None = None,
        notifications: bool = False,
        streamer_local_fs: bool = True,
        cmroot: Path | None = None,
    ) -> None:
        self._owns_work_dir = work_dir is None
        self._work_dir = Path(work_dir or tempfile.mkdtemp(prefix="streamer-hms-")).resolve()
        self._warehouse_dir = Path(warehouse_dir or self._work_dir / "warehouse").resolve()
        self._settings = MetastoreSettings(
            warehouse_dir=self._warehouse_dir,
            jdbc_url=jdbc_url or derby_url(self._work_dir),
            jdbc_user=jdbc_user,
            jdbc_password=jdbc_password,
        )
        self._options = ServerOptions(
            settings=self._settings,
            site_overrides=dict(site_overrides or {}),
            notifications=notifications,
            streamer_local_fs=streamer_local_fs,
            cmroot=Path(cmroot).resolve() if cmroot is not None else None,
        )
        self._requested_port = port
        self._port: int | None = None
        self._start_timeout = start_timeout
        self._jvm_options = list(jvm_options)
        self._client_auth = client_auth or HmsAuth()
        self._process = JavaProcess(self._work_dir / LOG_NAME, cwd=self._work_dir)
        self.start_seconds: float | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise MetastoreError("the metastore is not started")
        return self._port

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def warehouse_dir(self) -> Path:
        return self._warehouse_dir

    @property
    def work_dir(self) -> Path:
        return self._work_dir

    @property
    def log_path(self) -> Path:
        return self._process.log_path

    @property
    def notifications(self) -> bool:
        """Whether the server logs its changes (streamer's notification listener is on)."""
        return self._options.notifications

    @property
    def cmroot(self) -> Path | None:
        """The change-management root (``hive.repl.cmrootdir``), or None when change management is off."""
        return self._options.cmroot

    @property
    def running(self) -> bool:
        return self._process.running

    @property
    def _proc(self) -> subprocess.Popen[bytes] | None:
        """The server's process (benchmarks read its pid)."""
        return self._process.popen

    def start(self) -> EmbeddedMetastore:
        """Start the server and wait until it answers Thrift calls; raises with the log tail if not."""
        if self.running:
            return self
        classpath = prepare(self._options, self._work_dir / "conf")
        self._warehouse_dir.mkdir(parents=True, exist_ok=True)
        if self._settings.is_postgres:
            create_schema(self._settings, classpath.conf_dir, classpath.jars_dir, classpath.extra_jars,
                          self._process, self._start_timeout)
        self._port = self._requested_port or free_port()
        cmd = java_command(classpath.conf_dir, classpath.jars_dir, self._port, classpath.extra_jars,
                           self._jvm_options)
        log.info("starting metastore on port %s (work dir %s)", self._port, self._work_dir)
        began = time.monotonic()
        self._process.start(cmd)
        try:
            self._process.wait_ready(lambda: probe(self.port, self._client_auth), began, self._start_timeout,
                                     self.uri)
        except BaseException:
            self._process.terminate()
            raise
        self.start_seconds = time.monotonic() - began
        log.info("metastore answered at %s after %.1f s", self.uri, self.start_seconds)
        return self

    def ping(self, timeout_ms: int = 5000) -> list[str]:
        """One real Thrift call (``get_all_databases``); raises if the server does not answer."""
        return ping(self.uri, self._client_auth, timeout_ms)

    def log_tail(self, lines: int = 40) -> str:
        return self._process.log_tail(lines)

    def stop(self, timeout: float = 20.0) -> None:
        """Terminate the server (kill if it lingers) and remove a temporary work dir."""
        self._process.terminate(timeout)
        if self._owns_work_dir:
            shutil.rmtree(self._work_dir, ignore_errors=True)

    def wait(self) -> int:
        """Block until the server exits (foreground mode); returns its exit code."""
        return self._process.wait()

    def __enter__(self) -> EmbeddedMetastore:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
