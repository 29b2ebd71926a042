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
    import click

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
