"""Every option of streamer's command line that matches a test, by command path ("target run"), and
every command with the click context its ``--help`` is rendered in."""

from __future__ import annotations

from collections.abc import Callable

import click

from streamer.cli import cli


def cli_commands() -> list[tuple[str, click.Command, click.Context]]:
    """``(path, command, context)`` for the root group and every command below it, at any depth; each
    context has the parent chain (and so the ``STREAMER_...`` env-var prefix) of a real invocation."""
    root = click.Context(cli, info_name="streamer", auto_envvar_prefix="STREAMER")
    found: list[tuple[str, click.Command, click.Context]] = [("", cli, root)]
    todo: list[tuple[str, click.Command, click.Context]] = [("", cli, root)]
    while todo:
        path, command, ctx = todo.pop()
        if not isinstance(command, click.Group):
            continue
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{path} {name}"
            entry = (f"{path} {name}".strip(), sub, click.Context(sub, parent=ctx, info_name=name))
            found.append(entry)
            todo.append(entry)
    return found


def cli_options(matches: Callable[[click.Option], bool]) -> dict[str, click.Option]:
    found: dict[str, click.Option] = {}
    for path, command, _ in cli_commands():
        if not path:
            continue  # the root group's own options (--log-level, ...)
        for param in command.params:
            if isinstance(param, click.Option) and matches(param):
                found[path] = param
    return found
