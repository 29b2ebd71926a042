"""What the deploy tests check files against: the metric names streamer exports, and its CLI.

Both come from the code itself (``streamer.metrics.REGISTRY``, ``streamer.cli.cli``), so a renamed
metric or flag breaks the deploy files' tests instead of a dashboard or a pod in production.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"

# Suffixes each metric type's samples carry in the exposition format.
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
}
# Series Prometheus adds to every scrape target.
SCRAPE_SERIES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def exported_series() -> dict[str, set[str]]:
    """Series name -> label names, for every sample name streamer's registry can expose."""
    from streamer.metrics import REGISTRY

    out: dict[str, set[str]] = {}
    for family in REGISTRY.collect():
        collector_labels = _labels_of(family.name)
        for suffix in _SUFFIXES[family.type]:
            labels = set(collector_labels) | ({"le"} if suffix == "_bucket" else set())
            out[family.name + suffix] = labels
    return out


def _labels_of(family_name: str) -> tuple[str, ...]:
    from streamer import metrics

    for value in vars(metrics).values():
        name = getattr(value, "_name", None)
        if name == family_name:
            return tuple(getattr(value, "_labelnames", ()))
    return ()


def metric_names_in(expr: str) -> set[str]:
    """Names in a PromQL expression that denote series: streamer_*, process_* (the process collector's,
    which streamer serves too), recording rules (a:b), up."""
    without_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    without_labels = re.sub(r"\{[^}]*\}", "", without_strings)
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_labels)
    names = set(_NAME.findall(without_ranges))
    return {n for n in names if n.startswith(("streamer_", "process_")) or ":" in n or n in SCRAPE_SERIES}


def selector_labels(expr: str) -> dict[str, set[str]]:
    """Series name -> label names its selectors (``name{label=...}``) in ``expr`` match on."""
    out: dict[str, set[str]] = {}
    for name, body in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", expr):
        out.setdefault(name, set()).update(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", body))
    return out


@dataclass
class Invocation:
    """A parsed ``streamer`` command line: the command path and the values click gave each flag."""

    path: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)
    available: bool = True


def parse_streamer(argv: list[str], env: Mapping[str, str] | None = None) -> Invocation:
    """Parse ``argv`` as ``streamer`` would (flags, types, required options, env twins), without running it.

    Raises click.UsageError (or a subclass) for an unknown command or flag, or a bad or missing value.
    """
    import os

    from streamer.cli import cli

    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        ctx = cli.make_context("streamer", list(argv))
        if ctx.params.get("config_file") is not None:  # what cli's callback does with --config
            from streamer.config import default_map_for, load_config_file

            ctx.default_map = default_map_for(cli, load_config_file(ctx.params["config_file"]), ctx)
        path: list[str] = []
        command: click.Command = cli
        while isinstance(command, click.Group):
            rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
            if not rest:
                raise click.UsageError(f"streamer {' '.join(path)}: no subcommand given")
            name, sub, remaining = command.resolve_command(ctx, rest)
            assert name is not None and sub is not None
            path.append(name)
            if "not available in this build" in (sub.help or ""):
                return Invocation(tuple(path), available=False)
            ctx = sub.make_context(name, remaining, parent=ctx)
            command = sub
        return Invocation(tuple(path), dict(ctx.params))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def command_at(path: tuple[str, ...]) -> click.Command:
    """The click command at ``path`` (e.g. ``("target", "run")``)."""
    from streamer.cli import cli

    ctx = click.Context(cli, info_name="streamer")
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group), path
        sub = command.get_command(ctx, name)
        assert sub is not None, f"no command {name!r} in streamer {' '.join(path)}"
        ctx = click.Context(sub, parent=ctx, info_name=name)
        command = sub
    return command


def envvars_of(path: tuple[str, ...]) -> set[str]:
    """Environment variables the commands along ``path`` read (explicit ones and click's auto twins)."""
    from streamer.cli import cli

    out: set[str] = set()
    commands = [cli] + [command_at(path[: i + 1]) for i in range(len(path))]
    for depth, command in enumerate(commands):
        prefix = "_".join(["STREAMER", *path[:depth]]).upper().replace("-", "_")
        for param in command.params:
            if not isinstance(param, click.Option) or not param.name:
                continue
            if param.envvar:
                envs = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
                out.update(envs)
            else:
                out.add(f"{prefix}_{param.name.upper()}")
    return out


def built_settings(parsed: Invocation) -> object | None:
    """What the command builds from its flags before it connects to anything (``source run``: the
    auth, policy and agent config; ``target run``: the job's settings), so that a shipped config
    whose values the parser takes but the command refuses fails here; None for other commands.
    Raises the command's own error (``ConfigError``, ``PolicyParseError``, ``click.UsageError``)."""
    if parsed.path == ("source", "run"):
        from dataclasses import fields

        from streamer.source.options import SourceOptions

        params = dict(parsed.params)
        opts = SourceOptions(**{f.name: params.pop(f.name) for f in fields(SourceOptions)})
        opts.auth()
        opts.policy()
        return opts.agent_config(batch_size=params["batch_size"], poll_interval=params["poll_interval"],
                                 gap_settle_seconds=params["gap_settle_seconds"],
                                 start_after=params["start_after"])
    if parsed.path == ("target", "run"):
        from streamer.target.commands import run_settings

        return run_settings(parsed.params)
    return None
