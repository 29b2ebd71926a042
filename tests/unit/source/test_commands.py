import re

from click.testing import CliRunner

from streamer.cli import cli

FLAGS = [
    "--source-id", "--notification-db", "--hms-uri", "--policy", "--bootstrap-servers", "--kafka-setting",
    "--topic", "--batch-size", "--poll-interval", "--gap-settle-seconds", "--checksum-algorithm", "--cmroot",
    "--metrics-port", "--once",
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
