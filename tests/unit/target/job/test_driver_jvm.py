"""The Spark driver JVM streamer starts: quiet log4j2 defaults, loopback for local masters, the user's
settings kept, and the one start-up line Java cannot be told to skip left out of its stderr."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from streamer.errors import ConfigError
from streamer.logs import spark_log_level
from streamer.target.job import driver_jvm
from streamer.target.job.driver_jvm import LOG4J2_PROPERTIES, driver_conf, relay, spark_defaults

OPTS = "spark.driver.extraJavaOptions"


def test_the_log4j2_configuration_ships_with_the_package() -> None:
    text = LOG4J2_PROPERTIES.read_text()
    assert "rootLogger.level = ${sys:streamer.spark.logLevel:-WARN}" in text
    assert "org.apache.hadoop.util.NativeCodeLoader" in text
    # the "interpreter" logger PySpark's gateway initialises Spark's logging with
    gateway = r"^logger\.\w+\.name = org\.apache\.spark\.api\.python\.PythonGatewayServer$"
    assert re.search(gateway, text, re.M)
    pyproject = (Path(__file__).parents[4] / "pyproject.toml").read_text()
    assert "target/job/log4j2.properties" in pyproject  # package data: installed with the code


def test_a_local_driver_gets_the_configuration_and_the_loopback_address() -> None:
    conf = driver_conf("local[2]", "WARN", {}, {})
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.resolve().as_uri()}" in conf[OPTS]
    assert "-Dstreamer.spark.logLevel=WARN" in conf[OPTS]
    assert "-Dstreamer.spark.quietLevel=ERROR" in conf[OPTS]
    assert driver_conf("local-cluster[2,1,1024]", "WARN", {}, {})["spark.driver.host"] == "127.0.0.1"


def test_detail_brings_the_quiet_loggers_back() -> None:
    assert "-Dstreamer.spark.quietLevel=INFO" in driver_conf("local", "INFO", {}, {})[OPTS]


def test_the_user_s_choices_win() -> None:
    user = {"spark.driver.host": "10.0.0.5", OPTS: "-Xss4m -Dlog4j2.configurationFile=/etc/spark/log4j2.xml"}
    conf = driver_conf("local[2]", "WARN", user, {})
    assert "spark.driver.host" not in conf and conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf[OPTS].startswith("-Xss4m -Dlog4j2.configurationFile=/etc/spark/log4j2.xml ")
    assert conf[OPTS].count("log4j2.configurationFile") == 1
    assert "spark.driver.host" not in driver_conf("local", "WARN", {}, {"SPARK_LOCAL_IP": "10.0.0.5"})
    assert OPTS not in driver_conf("local", "WARN", {}, {"PYSPARK_SUBMIT_ARGS": "--driver-java-options x"})


def test_a_cluster_master_keeps_its_addresses() -> None:
    conf = driver_conf("spark://master:7077", "WARN", {}, {})
    assert "spark.driver.host" not in conf and "spark.driver.bindAddress" not in conf
    assert OPTS in conf


def test_spark_defaults_are_read_from_the_conf_dir(tmp_path: Path) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# comment\nspark.driver.host   10.0.0.5\n\nspark.driver.extraJavaOptions\t-Xss4m -Dx=y\n"
    )
    assert spark_defaults({"SPARK_CONF_DIR": str(tmp_path)}) == {
        "spark.driver.host": "10.0.0.5",
        OPTS: "-Xss4m -Dx=y",
    }
    assert spark_defaults({}) == {}


def test_the_relay_leaves_out_only_the_incubator_line(tmp_path: Path) -> None:
    source, sink = tmp_path / "jvm-stderr", tmp_path / "ours"
    source.write_bytes(
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"26/11/26 12:00:00 ERROR Something: real trouble\n"
        b"WARNING: Using incubator modules: jdk.incubator.vector, jdk.incubator.foreign\n"
    )
    fd = os.open(sink, os.O_WRONLY | os.O_CREAT)
    try:
        with source.open("rb") as stream:
            relay(stream, driver_jvm.DROPPED_LINES, out_fd=fd)
    finally:
        os.close(fd)
    assert sink.read_bytes() == (
        b"26/11/26 12:00:00 ERROR Something: real trouble\n"
        b"WARNING: Using incubator modules: jdk.incubator.vector, jdk.incubator.foreign\n"
    )


def test_spark_log_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMER_SPARK_LOG_LEVEL", raising=False)
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.INFO)
    assert spark_log_level() == "WARN"
    assert spark_log_level(default="error") == "ERROR"
    monkeypatch.setattr(root, "level", logging.DEBUG)  # --log-level DEBUG: Spark's own detail
    assert spark_log_level(default="ERROR") == "INFO"
    monkeypatch.setenv("STREAMER_SPARK_LOG_LEVEL", "debug")
    assert spark_log_level() == "DEBUG"
    monkeypatch.setenv("STREAMER_SPARK_LOG_LEVEL", "LOUD")
    with pytest.raises(ConfigError, match="STREAMER_SPARK_LOG_LEVEL"):
        spark_log_level()
