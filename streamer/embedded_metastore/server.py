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
production metastore with Hive's listener does.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from streamer.embedded_metastore import javabuild, listener, localfs
from streamer.embedded_metastore.errors import MetastoreError, MetastoreStartError
from streamer.embedded_metastore.site import (
    POSTGRES_JAR,
    POSTGRES_JAR_HINT,
    MetastoreSettings,
    derby_url,
    render_site_xml,
    site_properties,
)
from streamer.errors import ConfigError
from streamer.metastore.transport import HmsAuth, open_client

log = logging.getLogger(__name__)

MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
SCHEMA_TOOL = "org.datanucleus.store.schema.SchemaTool"
# Without it log4j2 fails to start inside the metastore (DESIGN §3.6).
LOG4J_FLAG = "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector"
LOG_NAME = "metastore.log"


def pyspark_jars_dir() -> Path:
    """The ``jars`` folder of the installed PySpark, which holds Hive 2.3 and its dependencies."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - pyspark is a hard dependency
        raise MetastoreError("pyspark is not installed: the metastore runs from its jars") from exc
    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        raise MetastoreError(f"no hive-metastore jar under {jars}: this PySpark build lacks Hive")
    return jars


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def java_command(
    conf_dir: Path,
    jars_dir: Path,
    port: int,
    extra_jars: Sequence[Path] = (),
    jvm_options: Sequence[str] = (),
) -> list[str]:
    """The server's command line; the conf dir comes first so our hive-site.xml wins."""
    java = shutil.which("java")
    if java is None:
        raise MetastoreError("no `java` on PATH: install a JDK 17 (e.g. `apt-get install openjdk-17-jdk`)")
    classpath = os.pathsep.join([str(conf_dir), f"{jars_dir}/*", *(str(j) for j in extra_jars)])
    return [java, LOG4J_FLAG, "-Xmx512m", *jvm_options, "-cp", classpath, MAIN_CLASS, "-p", str(port)]


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
        self._requested_port = port
        self._port: int | None = None
        self._start_timeout = start_timeout
        self._site_overrides = dict(site_overrides or {})
        self._jvm_options = list(jvm_options)
        self._client_auth = client_auth or HmsAuth()
        self._notifications = notifications
        self._streamer_local_fs = streamer_local_fs
        self._proc: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None

    # --- properties -------------------------------------------------------------------------

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
        return self._work_dir / LOG_NAME

    @property
    def notifications(self) -> bool:
        """Whether the server logs its changes (streamer's notification listener is on)."""
        return self._notifications

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> EmbeddedMetastore:
        """Start the server and wait until it answers Thrift calls; raises with the log tail if not."""
        if self.running:
            return self
        extra_jars: list[Path] = []
        if self._settings.is_postgres:
            if not POSTGRES_JAR.exists():
                raise MetastoreError(f"{POSTGRES_JAR} is missing: {POSTGRES_JAR_HINT}")
            extra_jars.append(POSTGRES_JAR)
        conf_dir = self._work_dir / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        self._warehouse_dir.mkdir(parents=True, exist_ok=True)
        jars_dir = pyspark_jars_dir()
        props = site_properties(self._settings)
        if self._notifications:
            extra_jars.append(listener.listener_classes(jars_dir))
            props.update(listener.site_properties())
        classes = self._local_fs_classes(jars_dir) if self._streamer_local_fs else None
        if classes is not None:
            if classes not in extra_jars:
                extra_jars.append(classes)
            props.update(localfs.site_properties())
        site = conf_dir / "hive-site.xml"
        site.write_text(render_site_xml({**props, **self._site_overrides}))
        site.chmod(0o600)  # may hold the database password
        core = {k: v for k, v in self._site_overrides.items() if k.startswith("hadoop.")}
        if core:
            (conf_dir / "core-site.xml").write_text(render_site_xml(core))

        if self._settings.is_postgres:
            self._create_schema(conf_dir, jars_dir, extra_jars)

        self._port = self._requested_port or free_port()
        cmd = java_command(conf_dir, jars_dir, self._port, extra_jars, self._jvm_options)
        log.info("starting metastore on port %s (work dir %s)", self._port, self._work_dir)
        began = time.monotonic()
        with self.log_path.open("ab") as log_file:
            self._proc = subprocess.Popen(
                cmd,
                cwd=self._work_dir,  # derby.log and any relative output land here
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, not Java directly
            )
        try:
            self._wait_ready(began)
        except BaseException:
            self._terminate()
            raise
        self.start_seconds = time.monotonic() - began
        log.info("metastore answered at %s after %.1f s", self.uri, self.start_seconds)
        return self

    @staticmethod
    def _local_fs_classes(jars_dir: Path) -> Path | None:
        """streamer's local filesystem (``embedded_metastore.localfs``), or None to run on Hadoop's."""
        try:
            return javabuild.classes_dir(jars_dir, "the metastore's local filesystem")
        except MetastoreError as exc:
            log.warning("%s; the metastore uses Hadoop's local filesystem (a process per permission)", exc)
            return None

    def _create_schema(self, conf_dir: Path, jars_dir: Path, extra_jars: Sequence[Path]) -> None:
        """Create every metastore table up front with DataNucleus' SchemaTool.

        With ``autoCreateAll`` alone DataNucleus creates tables lazily, inside whichever request
        first needs them; on PostgreSQL that DDL waits for locks the request itself holds and the
        call hangs (seen with drop_database). Creating missing tables is idempotent.
        """
        jar = next(jars_dir.glob("hive-metastore-*.jar"))
        with zipfile.ZipFile(jar) as zf:
            (conf_dir / "package.jdo").write_bytes(zf.read("package.jdo"))
        props = {
            k: v
            for k, v in site_properties(self._settings).items()
            if k.startswith("javax.jdo.option.Connection")
        }
        props["datanucleus.identifierFactory"] = "datanucleus1"  # Hive's default naming
        props["datanucleus.rdbms.useLegacyNativeValueStrategy"] = "true"
        props_file = conf_dir / "schema.properties"
        props_file.write_text("".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in props.items()))
        props_file.chmod(0o600)
        cmd = java_command(conf_dir, jars_dir, 0, extra_jars)
        cmd = [
            *cmd[: cmd.index(MAIN_CLASS)],
            SCHEMA_TOOL,
            "-create",
            "-api",
            "JDO",
            "-props",
            str(props_file),
        ]
        cmd.append(str(conf_dir / "package.jdo"))
        log.info("creating the metastore schema in %s", self._settings.jdbc_url)
        with self.log_path.open("ab") as log_file:
            try:
                done = subprocess.run(
                    cmd,
                    cwd=self._work_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    timeout=self._start_timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise MetastoreStartError(f"schema creation timed out; log tail:\n{self.log_tail()}") from exc
        if done.returncode != 0:
            raise MetastoreStartError(
                f"schema creation failed with code {done.returncode}; log tail:\n{self.log_tail()}"
            )

    def _wait_ready(self, began: float) -> None:
        deadline = began + self._start_timeout
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            assert self._proc is not None
            code = self._proc.poll()
            if code is not None:
                raise MetastoreStartError(
                    f"metastore exited with code {code} during start-up; log tail:\n{self.log_tail()}"
                )
            try:
                # A bare TCP probe first: Thrift's socket logs every refused connection loudly.
                socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
                self.ping()
                return
            except ConfigError:
                raise  # the probe's own settings are wrong: waiting will not help
            except (OSError, EOFError, ConnectionError) as exc:
                last_error = str(exc)
            except Exception as exc:  # a Thrift error while the schema is still being created
                last_error = f"{type(exc).__name__}: {exc}"
            time.sleep(0.5)
        raise MetastoreStartError(
            f"metastore did not answer at {self.uri} within {self._start_timeout:.0f} s "
            f"(last: {last_error}); log tail:\n{self.log_tail()}"
        )

    def ping(self, timeout_ms: int = 5000) -> list[str]:
        """One real Thrift call (``get_all_databases``); raises if the server does not answer."""
        client = open_client(self.uri, timeout_s=timeout_ms / 1000, auth=self._client_auth)
        try:
            names: list[str] = client.get_all_databases()
            return names
        finally:
            client.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        """Terminate the server (kill if it lingers) and remove a temporary work dir."""
        self._terminate(timeout)
        if self._owns_work_dir:
            shutil.rmtree(self._work_dir, ignore_errors=True)

    def _terminate(self, timeout: float = 20.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("metastore (pid %s) ignored SIGTERM for %.0f s; killing it", proc.pid, timeout)
            proc.kill()
            proc.wait(timeout)

    def wait(self) -> int:
        """Block until the server exits (foreground mode); returns its exit code."""
        if self._proc is None:
            raise MetastoreError("the metastore is not started")
        return self._proc.wait()

    def __enter__(self) -> EmbeddedMetastore:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
