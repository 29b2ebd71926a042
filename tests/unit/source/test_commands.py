import logging
import re

import pytest
from click.testing import CliRunner

from streamer.cli import cli
from streamer.errors import ConfigError
from streamer.source.commands import metrics_bind

FLAGS = [
    "--source-id", "--notification-db", "--hms-uri", "--policy", "--bootstrap-servers", "--kafka-setting",
    "--topic", "--batch-size", "--poll-interval", "--gap-settle-seconds", "--checksum-algorithm", "--cmroot",
    "--metrics-port", "--metrics-addr", "--once", "--compression", "--max-record-bytes",
    "--kafka-connect-timeout",
]


def test_help_documents_every_flag_with_its_env_twin() -> None:
    result = CliRunner().invoke(cli, ["source", "run", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for flag in FLAGS:
        assert flag in result.output
        env = "STREAMER_" + flag.lstrip("-").replace("-", "_").upper()
        assert re.search(env, result.output), env


def test_exactly_one_reader_is_required() -> None:
    result = CliRunner().invoke(cli, ["source", "run", "--source-id", "s", "--bootstrap-servers", "x:1"])
    assert result.exit_code != 0
    assert "exactly one of --notification-db" in str(result.exception)


def test_bad_policy_is_a_config_error() -> None:
    result = CliRunner().invoke(cli, ["source", "run", "--source-id", "s", "--bootstrap-servers", "x:1",
                                      "--notification-db", "x.db", "--policy", "sales.["])
    assert "position 7" in str(result.exception)


def test_checksum_algorithm_is_one_the_target_verifies() -> None:
    base = ["source", "run", "--source-id", "s", "--bootstrap-servers", "x:1", "--notification-db", "x.db"]
    result = CliRunner().invoke(cli, [*base, "--checksum-algorithm", "hdfs-md5-of-crc32c"])
    assert result.exit_code == 2 and "hdfs-md5-of-md5-of-crc32c" in result.output


def test_metrics_host_is_a_hidden_deprecated_alias_of_metrics_addr(caplog: pytest.LogCaptureFixture) -> None:
    result = CliRunner().invoke(cli, ["source", "run", "--help"], terminal_width=200)
    assert "--metrics-host" not in result.output
    assert metrics_bind(None, None) == "127.0.0.1"
    assert metrics_bind("0.0.0.0", None) == "0.0.0.0"
    logger = logging.getLogger("streamer.source.commands")  # the CLI's logging may not propagate
    logger.addHandler(caplog.handler)
    try:
        assert metrics_bind(None, "10.1.2.3") == "10.1.2.3"
    finally:
        logger.removeHandler(caplog.handler)
    assert "deprecated" in caplog.text and "--metrics-addr" in caplog.text
    with pytest.raises(ConfigError, match="disagree"):
        metrics_bind("0.0.0.0", "10.1.2.3")
