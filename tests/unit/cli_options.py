"""Every option of streamer's command line that matches a test, by command path ("target run")."""

from __future__ import annotations

from collections.abc import Callable

import click

from streamer.cli import cli


def cli_options(matches: Callable[[click.Option], bool]) -> dict[str, click.Option]:
    found: dict[str, click.Option] = {}
    ctx = click.Context(cli)
    todo: list[tuple[str, click.Command]] = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        todo.append((name, command))
    while todo:
        path, command = todo.pop()
        if isinstance(command, click.Group):
            todo.extend((f"{path} {n}", c) for n, c in command.commands.items())
        for param in command.params:
            if isinstance(param, click.Option) and matches(param):
                found[path] = param
    return found
