from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from streamer.cli import cli
from streamer.errors import ConfigError
from streamer.target.state.dir_option import new_state_dir_callback, parse_state_dir, state_dir_callback
from streamer.target.state.state_file import TargetState
from tests.unit.cli_options import cli_options


def _state_dir_options() -> dict[str, click.Option]:
    """Every ``--state-dir`` option of the command line, by command path."""
    return cli_options(lambda param: "--state-dir" in param.opts)


OPTIONS = _state_dir_options()


@pytest.mark.parametrize(
    ("value", "path"),
    [("/s/state", "/s/state"), ("rel/state", "rel/state"), ("file:/s/state", "/s/state"),
     ("file:///s/state", "/s/state"), ("file://localhost/s/state", "/s/state"),
     ("file:///s/my%20state", "/s/my state"), (r"C:\state", r"C:\state")],
)
def test_paths_and_file_urls_name_a_local_directory(value: str, path: str) -> None:
    assert parse_state_dir(value) == Path(path)


@pytest.mark.parametrize(
    ("value", "match"),
    [("s3://bucket/state", "must be a mounted filesystem"),
     ("hdfs://nn/state", "must be a mounted filesystem"),
     ("file://other/state", "names host 'other'")],
)
def test_other_schemes_and_hosts_are_refused(value: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_state_dir(value)


def test_every_state_dir_option_is_the_shared_one() -> None:
    assert {"target run", "target retry", "target skip", "target reset-chain", "status", "verify",
            "failover", "failback"} <= set(OPTIONS)
    for path, option in OPTIONS.items():
        # only the job and a load (the job's apply, from an archive) create their state dir; every
        # other command needs it to exist
        expected = new_state_dir_callback if path in ("target run", "load") else state_dir_callback
        assert option.callback is expected, path
        assert option.required, path


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_every_command_accepts_a_file_url(command: str, tmp_path: Path) -> None:
    TargetState(tmp_path).halt("a", 1, "x")  # a state dir a job wrote
    option = OPTIONS[command]
    ctx = click.Context(click.Command(command))
    assert option.process_value(ctx, f"file://{tmp_path}") == tmp_path


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_every_command_refuses_s3_with_the_message(command: str) -> None:
    result = CliRunner().invoke(cli, [*command.split(), "--state-dir", "s3://bucket/state"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--state-dir'" in result.output
    assert "must be a mounted filesystem (a path or file:// URL)" in result.output


def test_a_file_is_not_a_state_dir(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    result = CliRunner().invoke(cli, ["target", "retry", "--state-dir", str(tmp_path / "f"), "--db", "a"])
    assert result.exit_code == 2 and "is a file, not a directory" in result.output


def test_failback_reads_the_state_of_a_file_url(tmp_path: Path) -> None:
    TargetState(tmp_path).halt("a", 1, "x")
    result = CliRunner().invoke(cli, ["failback", "--state-dir", f"file://{tmp_path}",
                                      "--notification-db", "sqlite:///unused.db"])
    assert isinstance(result.exception, ConfigError)
    assert f"{tmp_path} records no finished failover" in str(result.exception)


def test_target_retry_reads_the_state_of_a_file_url(tmp_path: Path) -> None:
    TargetState(tmp_path).record_applied("a", 3)
    result = CliRunner().invoke(cli, ["target", "retry", "--state-dir", f"file://{tmp_path}", "--db", "a"])
    assert result.exit_code == 1 and "'a' is not halted" in result.output


@pytest.mark.parametrize("command", sorted(set(OPTIONS) - {"target run", "load"}))
def test_a_directory_without_target_state_is_refused_by_every_reader(command: str, tmp_path: Path) -> None:
    """An empty (or unrelated) directory is no target's state dir: `status` must not show it as
    "nothing halted", `retry` as "not halted", `failover` fence no job through it (issue 40 item 5)."""
    (tmp_path / "notes.txt").write_text("unrelated")
    option = OPTIONS[command]
    ctx = click.Context(click.Command(command))
    with pytest.raises(ConfigError, match="holds no target state"):
        option.process_value(ctx, str(tmp_path))


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_a_state_dir_every_user_may_write_is_refused(command: str, tmp_path: Path) -> None:
    """Issue 38 item 11: any user could plant a link or forge a halt in it; the sticky bit (as /tmp
    has) keeps others' entries theirs and is accepted."""
    state = tmp_path / "state"
    TargetState(state).halt("a", 1, "x")
    option = OPTIONS[command]
    ctx = click.Context(click.Command(command))
    state.chmod(0o777)
    with pytest.raises(ConfigError, match=r"every user may write to it \(mode 777\).*chmod o-w"):
        option.process_value(ctx, str(state))
    state.chmod(0o1777)
    assert option.process_value(ctx, str(state)) == state
    state.chmod(0o775)  # a group's: an operator's choice
    assert option.process_value(ctx, str(state)) == state
