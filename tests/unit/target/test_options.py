"""The target's flags are declared once, in their settings group (``streamer.target.options``), and
every command that takes a flag takes that declaration; each builder reads only its own group's flags."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import pytest

from streamer.target import options as opts
from streamer.target.commands import run_cmd, run_settings, status, verify_cmd
from streamer.target.dr.commands import failback, failover


def _command(decorator: Any) -> click.Command:
    def body(**_: Any) -> None: ...

    return click.command("probe")(decorator(body))


def _flags(command: click.Command) -> list[str]:
    return [o for p in command.params for o in (*p.opts, *p.secondary_opts)]


@pytest.mark.parametrize("group", opts.GROUPS, ids=lambda g: g.name)
def test_a_groups_decorator_declares_each_of_its_flags_once(group: opts.Group) -> None:
    command = _command(group())
    names = [p.name for p in command.params]
    assert names == list(group.params())
    assert len(set(names)) == len(names)
    assert len(set(_flags(command))) == len(_flags(command))


def test_no_flag_is_in_two_groups() -> None:
    seen: dict[str, str] = {}
    for group in opts.GROUPS:
        for flag in _flags(_command(group())):
            assert flag not in seen, f"{flag} in {seen.get(flag)} and {group.name}"
            seen[flag] = group.name


def test_target_run_takes_every_group_once_and_nothing_else() -> None:
    names = [p.name for p in run_cmd.params]
    grouped = [n for g in opts.GROUPS for n in g.params() if n not in opts.AGAINST_SOURCE]
    assert sorted(names) == sorted([*grouped, "fs_option", "hdfs_driver"])
    assert len(set(_flags(run_cmd))) == len(_flags(run_cmd))


def _declared() -> dict[str, click.Parameter]:
    """Every grouped flag as its group declares it (``target run``'s declaration)."""
    return {p.name: p for g in opts.GROUPS for p in _command(g()).params if p.name}


def _load() -> click.Command:
    from streamer.archive.commands import load_cmd

    return load_cmd


@pytest.mark.parametrize("command", [run_cmd, verify_cmd, status, failover, failback, _load()],
                         ids=lambda c: c.name)
def test_a_command_takes_a_shared_flag_as_declared_changing_only_help_default_or_required(
    command: click.Command,
) -> None:
    declared = _declared()
    shared = [p for p in command.params if p.name in declared]
    assert shared, command.name
    for param in shared:
        want = declared[str(param.name)]
        assert (param.opts, param.secondary_opts, param.multiple, type(param.type), param.metavar) == (
            want.opts, want.secondary_opts, want.multiple, type(want.type), want.metavar), param.name
        assert getattr(param, "is_flag", False) == getattr(want, "is_flag", False), param.name
        if command is run_cmd:
            assert param.to_info_dict() == want.to_info_dict(), param.name


def test_verify_takes_the_trust_flags_with_reads_under_repair_named() -> None:
    helps = {p.name: getattr(p, "help", "") for p in verify_cmd.params}
    declared = _declared()
    for name in ("source_prefix", "source_cmroot", "allow_unverified_files"):
        assert helps[name] == "With --repair: " + getattr(declared[name], "help", "")


def test_a_group_refuses_a_flag_it_does_not_have() -> None:
    with pytest.raises(ValueError, match="the kafka group has no flag hms_uri"):
        opts.kafka_options("hms_uri")
    with pytest.raises(ValueError, match="no flag warehouse"):
        opts.layout_options(warehouse={"help": "x"})


class Recording(Mapping[str, Any]):
    """The parsed options, noting which ones a builder reads."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.data = dict(values)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_each_builder_reads_only_its_groups_flags(tmp_path: Path) -> None:
    argv = ["--bootstrap-servers", "k:9092", "--hms-uri", "thrift://h:1", "--warehouse-root", "/wh",
            "--state-dir", str(tmp_path / "state")]
    with run_cmd.make_context("run", argv) as ctx:
        params = dict(ctx.params)
    auth = opts.hms_auth(params)
    builders: list[tuple[Any, opts.Group]] = [
        (opts.kafka_settings, opts.kafka_options), (opts.metastore_settings, opts.metastore_options),
        (opts.layout_settings, opts.layout_options), (opts.trust_settings, opts.trust_options),
        (opts.scale_settings, opts.scale_options), (opts.external_sync_settings, opts.external_sync_options),
        (lambda o: opts.verify_loop_settings(o, auth), opts.verify_options),
        (opts.metrics_settings, opts.metrics_options),
    ]
    read: set[str] = set()
    for build, group in builders:
        recording = Recording(params)
        build(recording)
        assert recording.read <= set(group.params()), (group.name, recording.read - set(group.params()))
        read |= recording.read
    run = Recording(params)
    run_settings(run)
    assert run.read <= read | {"source_id"}
    assert set(params) - read == {"fs_option", "hdfs_driver"}  # every other flag reaches the settings
