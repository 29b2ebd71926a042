"""The Spark driver JVM that streamer starts itself, with quiet defaults.

``streamer target run`` and ``streamer demo`` start Spark from this process (unless spark-submit
started them, which owns the JVM then). Spark's defaults print a dozen lines that report nothing
wrong; here each has its cause removed, or its line dropped where the cause cannot be:

- ``Using Spark's default log4j profile`` (twice), ``Setting default log level to "WARN"``, and
  ``WARN NativeCodeLoader``: the driver gets ``log4j2.properties`` of this package
  (``-Dlog4j2.configurationFile`` in ``spark.driver.extraJavaOptions``, set before the JVM starts,
  after any the user configured), at the level of :func:`streamer.logs.spark_log_level`.
- ``Your hostname ... resolves to a loopback address`` and ``Set SPARK_LOCAL_IP``: a local master
  binds to 127.0.0.1 (``SPARK_LOCAL_IP`` for the JVM, ``spark.driver.host``/``bindAddress``), unless
  the user chose an address; everything of a local master runs on this machine.
- ``WARNING: Using incubator modules: jdk.incubator.vector``: Spark's launcher always adds
  ``--add-modules=jdk.incubator.vector`` (its ``JavaModuleOptions``, for MLlib's vectorised BLAS),
  and Java prints that line for any incubator module, with no option to turn it off. The JVM is
  started through PySpark's ``launch_gateway`` with its stderr on a pipe that is copied to ours line
  by line, that one line left out (all of it is copied under ``--log-level DEBUG``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
# lines of the JVM's stderr that are left out (see the module docstring), exactly
DROPPED_LINES = frozenset({b"WARNING: Using incubator modules: jdk.incubator.vector"})
LOOPBACK = "127.0.0.1"
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def is_local(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``local-cluster[...]``: all on this machine."""
    return master.strip().startswith("local")


def spark_defaults(env: Mapping[str, str]) -> dict[str, str]:
    """The user's ``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``), if any."""
    conf_dir = env.get("SPARK_CONF_DIR") or (f"{env['SPARK_HOME']}/conf" if env.get("SPARK_HOME") else "")
    path = Path(conf_dir, "spark-defaults.conf") if conf_dir else None
    if path is None or not path.is_file():
        return {}
    out: dict[str, str] = {}
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.replace("\t", " ").partition(" ")
        out[key.strip()] = value.strip()
    return out


def driver_conf(master: str, level: str, user: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """Settings of a driver JVM this process starts (pure): streamer's log4j2 configuration at
    ``level``, and for a local master the loopback address, each unless the user set its own.

    ``user`` holds what the user configured already (spark-defaults.conf, the session's settings)."""
    out: dict[str, str] = {}
    submit_args = env.get("PYSPARK_SUBMIT_ARGS", "")
    if "driver-java-options" not in submit_args and _JAVA_OPTIONS not in submit_args:
        theirs = user.get(_JAVA_OPTIONS, "").strip()
        ours = [f"-Dstreamer.spark.logLevel={level}", f"-Dstreamer.spark.quietLevel={_quiet_level(level)}"]
        if "log4j2.configurationFile" not in theirs and "log4j.configuration" not in theirs:
            ours.insert(0, f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.resolve().as_uri()}")
        out[_JAVA_OPTIONS] = " ".join([theirs, *ours]).strip()
    if is_local(master) and not env.get("SPARK_LOCAL_IP") and not env.get("SPARK_LOCAL_HOSTNAME"):
        for key in ("spark.driver.host", "spark.driver.bindAddress"):
            if key not in user:
                out[key] = LOOPBACK
    return out


def _quiet_level(level: str) -> str:
    """The level of the loggers whose lines report nothing wrong: ERROR, unless Spark logs in detail."""
    return level if level in ("INFO", "DEBUG", "TRACE", "ALL") else "ERROR"


def start(conf: Mapping[str, str], master: str, level: str) -> None:
    """Start the driver JVM with the session's settings ``conf`` (the JVM reads its options at start)
    and :func:`driver_conf`'s, unless this process has one already (spark-submit's, or a session
    started before: then nothing changes)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    user = {**spark_defaults(os.environ), **conf}
    spark_conf = SparkConf(loadDefaults=False)
    for key, value in {**conf, **driver_conf(master, level, user, os.environ)}.items():
        spark_conf.set(key, value)
    with _local_ip(master):
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        drop = frozenset() if logging.getLogger().isEnabledFor(logging.DEBUG) else DROPPED_LINES
        threading.Thread(target=relay, args=(proc.stderr, drop), name="spark-jvm-stderr", daemon=True).start()
    SparkContext(conf=spark_conf, gateway=gateway)


@contextlib.contextmanager
def _local_ip(master: str) -> Iterator[None]:
    """``SPARK_LOCAL_IP`` for the JVM being started, when the master is local and the user set none."""
    if not is_local(master) or os.environ.get("SPARK_LOCAL_IP") or os.environ.get("SPARK_LOCAL_HOSTNAME"):
        yield
        return
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    try:
        yield
    finally:
        os.environ.pop("SPARK_LOCAL_IP", None)


def relay(stream: IO[bytes], drop: frozenset[bytes], out_fd: int = 2) -> None:
    """Copy the JVM's stderr to ours (file descriptor ``out_fd``) line by line, without ``drop``."""
    with contextlib.suppress(OSError, ValueError):
        for line in iter(stream.readline, b""):
            if line.rstrip(b"\r\n") in drop:
                continue
            os.write(out_fd, line)

