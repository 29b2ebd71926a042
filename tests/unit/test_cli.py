import logging

import click
from click.testing import CliRunner

from streamer.cli import COMMANDS, cli


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    for name in COMMANDS:
        assert name in result.output


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["no-such-command"])
    assert result.exit_code == 2
    assert "No such command" in result.output


def _all_commands() -> list[list[str]]:
    paths: list[list[str]] = []
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        paths.append([name])
        if isinstance(command, click.Group):
            paths.extend([name, sub] for sub in command.list_commands(ctx))
    return paths


def test_every_command_has_help() -> None:
    runner = CliRunner()
    for path in _all_commands():
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output


def test_wrong_flag_exits_2_with_a_message(capsys: object) -> None:
    import pytest

    from streamer.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["target", "run", "--no-such-flag"])
    assert exc.value.code == 2


def test_config_file_with_unknown_setting_exits_2(tmp_path: object) -> None:
    from pathlib import Path

    import pytest

    from streamer.cli import main

    config = Path(str(tmp_path)) / "streamer.toml"
    config.write_text('[target.run]\nno-such-setting = 1\n')
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(config), "target", "retry", "--state-dir", str(tmp_path), "--db", "x"])
    assert exc.value.code == 2


def test_config_file_supplies_flags_by_their_names(tmp_path: object) -> None:
    from pathlib import Path

    from streamer.target.state.state_file import TargetState

    state_dir = Path(str(tmp_path)) / "state"
    TargetState(state_dir).halt("sales", 7, "boom")
    config = Path(str(tmp_path)) / "streamer.yaml"
    config.write_text(f"target:\n  skip:\n    state-dir: {state_dir}\n    db: sales\n    event: 7\n")
    result = CliRunner().invoke(cli, ["--config", str(config), "target", "skip"])
    assert result.exit_code == 0, result.output
    assert not TargetState(state_dir).is_halted("sales")


def test_warehouse_without_url_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["warehouse", "init"], env={"STREAMER_WAREHOUSE_URL": ""})
    assert result.exit_code == 2
    assert "--url" in result.output


def test_every_option_shows_its_environment_variable_once() -> None:
    """One mechanism (click's ``show_envvar``): no help string also writes ``[env: NAME]`` itself."""
    import re

    from tests.unit.cli_options import cli_commands

    runner = CliRunner()
    problems: list[str] = []
    for path, command, ctx in cli_commands():
        where = f"streamer {path}".rstrip()
        for param in command.params:
            if not isinstance(param, click.Option) or not param.expose_value:
                continue  # --version: a flag with no value to take from the environment
            record = param.get_help_record(ctx)
            if record is None:
                continue  # hidden
            mentions = re.findall(r"\[env(?: var)?:", record[1])
            if len(mentions) != 1 or "[env var:" not in record[1]:
                problems.append(f"{where} {param.opts[0]}: {record[1]!r}")
        page = " ".join(runner.invoke(cli, [*path.split(), "--help"], prog_name="streamer").output.split())
        shown = re.findall(r"\[env var: ([^\];]+)", page)  # "[env var: A, B; default: x]"
        names = [n for group in shown for n in group.split(", ")]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if "[env:" in page or dupes:
            problems.append(f"{where} --help: [env: ...] or a repeated variable {dupes}")
    assert not problems, "\n".join(problems)


@click.command("leaky")
@click.option("--notification-db", required=True)
def leaky(notification_db: str) -> None:
    """Opens a notification database as the agent does (``reader.connect``): a typo'd scheme fails."""
    from streamer.source.reader import connect

    connect(notification_db)


def test_an_error_line_never_shows_a_password(monkeypatch: object, capsys: object) -> None:
    import pytest

    from streamer import cli as cli_module
    from streamer.cli import main

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setitem(cli_module.COMMANDS, "leaky", ("tests.unit.test_cli:leaky", "test"))
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", root.handlers[:])  # main() sets logging up: undone after
    monkeypatch.setattr(root, "level", root.level)
    for argv, code in (
        (["leaky", "--notification-db", "postgress://hive:Sup3rS3cret@db/metastore"], 2),  # ConfigError
        (["target", "run", "--metrics-port", "postgresql://hive:Sup3rS3cret@db/m"], 2),  # a usage error
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == code
        err = capsys.readouterr().err  # type: ignore[attr-defined]
        assert "error" in err.lower() and "Sup3rS3cret" not in err, err


def test_a_crash_in_native_code_leaves_the_python_stacks_on_stderr() -> None:
    """``main`` enables faulthandler: a process killed by SIGSEGV (librdkafka, a C codec) says where
    each thread was, instead of dying with a bare signal."""
    import signal
    import subprocess
    import sys

    code = (
        "import os, signal\n"
        "from streamer import cli\n"
        "def crash_now(**_):\n"
        "    os.kill(os.getpid(), signal.SIGSEGV)\n"
        "cli.cli.main = crash_now\n"
        "cli.main(['--help'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert "crash_now" in done.stderr and "streamer/cli.py" in done.stderr, done.stderr
