"""The metastore's JVM: its command line, and one Java child process started, waited for and stopped.

``JavaProcess`` knows nothing of Hive: it runs a command with its output in a log file, waits until
a probe succeeds (or the process dies, or time runs out, each reported with the log's tail) and
terminates it, killing it if SIGTERM is ignored.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from streamer.embedded_metastore.errors import MetastoreError, MetastoreStartError
from streamer.errors import ConfigError

log = logging.getLogger(__name__)

MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
# Without it log4j2 fails to start inside the metastore (DESIGN §3.6).
LOG4J_FLAG = "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector"


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
    main: Sequence[str] | None = None,
) -> list[str]:
    """The server's command line; the conf dir comes first so our hive-site.xml wins.

    ``main`` replaces the server's class and arguments (another tool on the same classpath).
    """
    java = shutil.which("java")
    if java is None:
        raise MetastoreError("no `java` on PATH: install a JDK 17 (e.g. `apt-get install openjdk-17-jdk`)")
    classpath = os.pathsep.join([str(conf_dir), f"{jars_dir}/*", *(str(j) for j in extra_jars)])
    entry = list(main) if main is not None else [MAIN_CLASS, "-p", str(port)]
    return [java, LOG4J_FLAG, "-Xmx512m", *jvm_options, "-cp", classpath, *entry]


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class JavaProcess:
    """A Java child process in ``cwd`` whose output is appended to ``log_path``."""

    def __init__(self, log_path: Path, cwd: Path) -> None:
        self.log_path = log_path
        self.cwd = cwd
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def start(self, cmd: Sequence[str]) -> None:
        with self.log_path.open("ab") as log_file:
            self.popen = subprocess.Popen(
                list(cmd),
                cwd=self.cwd,  # derby.log and any relative output land here
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, not Java directly
            )

    def run(self, cmd: Sequence[str], timeout: float, what: str) -> None:
        """Run a one-off Java tool to the end (same cwd and log); raises with the log tail if it fails."""
        with self.log_path.open("ab") as log_file:
            try:
                done = subprocess.run(
                    list(cmd),
                    cwd=self.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise MetastoreStartError(f"{what} timed out; log tail:\n{self.log_tail()}") from exc
        if done.returncode != 0:
            raise MetastoreStartError(
                f"{what} failed with code {done.returncode}; log tail:\n{self.log_tail()}"
            )

    def wait_ready(self, probe: Callable[[], object], began: float, timeout: float, where: str) -> None:
        """Call ``probe`` every half second until it returns, the process dies or ``timeout`` seconds
        from ``began`` (a ``time.monotonic()``) pass.

        A ``ConfigError`` from the probe is raised at once (its own settings are wrong: waiting will
        not help); any other error means "not yet".
        """
        last_error = "no answer yet"
        while time.monotonic() < began + timeout:
            assert self.popen is not None
            code = self.popen.poll()
            if code is not None:
                raise MetastoreStartError(
                    f"metastore exited with code {code} during start-up; log tail:\n{self.log_tail()}"
                )
            try:
                probe()
                return
            except ConfigError:
                raise
            except (OSError, EOFError, ConnectionError) as exc:
                last_error = str(exc)
            except Exception as exc:  # a Thrift error while the schema is still being created
                last_error = f"{type(exc).__name__}: {exc}"
            time.sleep(0.5)
        raise MetastoreStartError(
            f"metastore did not answer at {where} within {timeout:.0f} s (last: {last_error}); "
            f"log tail:\n{self.log_tail()}"
        )

    def terminate(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; nothing if it is not running."""
        proc, self.popen = self.popen, None
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
        """Block until the process exits; returns its exit code."""
        if self.popen is None:
            raise MetastoreError("the metastore is not started")
        return self.popen.wait()
