"""Settings from a config file, environment variables and flags, in that order of precedence (lowest first).

Every command's flags have ``STREAMER_<COMMAND>_<SUBCOMMAND>_<FLAG>`` environment twins (click's
``auto_envvar_prefix``). A config file (TOML or YAML, ``--config`` or ``STREAMER_CONFIG``) holds one
table per command path, e.g. ``[source.run]`` or ``[target.run]``, whose keys are flag names with
dashes or underscores. Unknown sections or keys are rejected by name, so a typo never silently
falls back to a default.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from streamer.errors import ConfigError


def load_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML or YAML config file into a nested dict; errors name the file and the cause."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror or exc}") from exc
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = tomllib.loads(text)
    except Exception as exc:  # both parsers raise their own error types
        raise ConfigError(f"config file {path}: cannot parse: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a table of command sections")
    return data


def default_map_for(group: click.Group, data: Mapping[str, Any], ctx: click.Context) -> dict[str, Any]:
    """Turn ``{"source": {"run": {"batch-size": 10}}}`` into click's default_map, checking names."""
    result: dict[str, Any] = {}
    for name, section in data.items():
        command = group.get_command(ctx, name)
        if command is None:
            allowed = ", ".join(group.list_commands(ctx))
            raise ConfigError(f"config section [{name}]: unknown command (allowed: {allowed})")
        if not isinstance(section, Mapping):
            raise ConfigError(f"config section [{name}]: expected a table")
        if isinstance(command, click.Group):
            sub_ctx = click.Context(command, parent=ctx, info_name=name)
            result[name] = default_map_for(command, section, sub_ctx)
        else:
            result[name] = _check_keys(command, name, section)
    return result


def _check_keys(command: click.Command, name: str, section: Mapping[str, Any]) -> dict[str, Any]:
    # a setting may be named like its flag (``policy``, ``kafka-setting``) or its parameter
    names: dict[str, str] = {}
    for param in command.params:
        if not param.name or not isinstance(param, click.Option):
            continue
        names[param.name] = param.name
        for opt in param.opts:
            names[opt.lstrip("-").replace("-", "_")] = param.name
    out: dict[str, Any] = {}
    for key, value in section.items():
        pname = names.get(key.replace("-", "_"))
        if pname is None:
            allowed = ", ".join(sorted({n.replace("_", "-") for n in names}))
            raise ConfigError(f"config [{name}]: unknown setting {key!r} (allowed: {allowed})")
        out[pname] = value
    return out
