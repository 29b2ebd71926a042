"""The ``streamer`` command line: one click group, subcommands loaded lazily.

Subcommands live next to the code they drive (``streamer/<area>/commands.py``) and are imported
only when invoked, so ``streamer --help`` stays fast and an optional backend that is missing only
breaks the command that needs it. Errors are caught here, at the edge, and become exit codes:
1 for a failure, 2 for a usage or configuration error.
"""

from __future__ import annotations

import faulthandler
import importlib
import logging
import sys
from pathlib import Path
from typing import Any

import click

from streamer.errors import ConfigError, StreamerError

# name -> ("module:attribute", short help shown by `streamer --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "hive": ("streamer.hive.commands:hive", "Decode Hive notification-log rows (operator tools)."),
    "warehouse": ("streamer.warehouse.commands:warehouse", "Drive the bundled Hive-compatible source."),
    "broker": ("streamer.kafka.commands:broker", "Run the embedded Kafka-protocol broker (Tansu)."),
    "source": ("streamer.source.commands:source", "Run the source agent: notification log -> Kafka."),
    "hms": (
        "streamer.embedded_metastore.commands:hms",
        "Run an embedded Hive Metastore (from PySpark's jars).",
    ),
    "target": ("streamer.target.commands:target", "Run the target job and operate halted databases."),
    "status": ("streamer.target.commands:status", "Show replication status per target database."),
    "verify": ("streamer.target.commands:verify_cmd", "Compare a replica with its source; report drift."),
    "demo": ("streamer.demo:demo", "Run the whole pipeline on embedded services and compare."),
    "bootstrap": ("streamer.source.bootstrap_commands:bootstrap", "Dump a source's policy into the topic."),
    "failover": ("streamer.target.dr.commands:failover", "Promote a replica at a recorded cut."),
    "failback": ("streamer.target.dr.commands:failback", "Check the old source before it rejoins."),
    "archive": ("streamer.archive.commands:archive", "Keep the topic as Avro files (REPL DUMP)."),
    "load": ("streamer.archive.commands:load_cmd", "Apply an event archive with no broker (REPL LOAD)."),
    "dump": ("streamer.archive.dump:dump_cmd", "A bootstrap and the log after it as an archive (REPL DUMP)."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module_name, attr = spec[0].split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("streamer"):
                return _unavailable(cmd_name, spec[1])
            raise
        command = getattr(module, attr)
        assert isinstance(command, click.Command)
        _show_envvars(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _show_envvars(command: click.Command) -> None:
    """Every flag's environment twin is listed in ``--help`` (bytewax's habit), once: by click's
    ``show_envvar`` (``[env var: NAME]``), never written into a help string as well."""
    for param in command.params:
        if isinstance(param, click.Option) and param.expose_value:  # not --version
            param.show_envvar = True
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _show_envvars(sub)


def _unavailable(name: str, help_text: str) -> click.Command:
    @click.command(name=name, help=f"{help_text} (not available in this build)")
    def missing() -> None:
        raise click.UsageError(f"command {name!r} is not available in this build of streamer")

    return missing


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "STREAMER"},
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="Logging threshold.",
)
@click.option(
    "--log-format",
    default="text",
    show_default=True,
    type=click.Choice(["text", "json"]),
    help="Human-readable lines or one JSON object per line.",
)
@click.option(
    "--config",
    "config_file",
    envvar="STREAMER_CONFIG",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="TOML or YAML file with one table per command, e.g. [source.run].",
)
@click.version_option(package_name="streamer")
@click.pass_context
def cli(ctx: click.Context, log_level: str, log_format: str, config_file: Path | None) -> None:
    """streamer: continuous, event-ordered replication of Hive warehouses over Kafka.

    Every flag has an environment-variable twin: STREAMER_<COMMAND>_<SUBCOMMAND>_<FLAG>, e.g.
    STREAMER_SOURCE_RUN_BATCH_SIZE. Precedence: flag > environment > config file > default.
    """
    from streamer.config import default_map_for, load_config_file
    from streamer.logs import configure_logging

    configure_logging(level=log_level, fmt=log_format)
    if config_file is not None:
        assert isinstance(ctx.command, click.Group)
        ctx.default_map = default_map_for(ctx.command, load_config_file(config_file), ctx)


_show_envvars(cli)  # the group's own options (subcommands get theirs when loaded)


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI; every error line it prints has its secrets masked (``streamer.logs.mask_secrets``)."""
    from streamer.logs import mask_secrets

    if not faulthandler.is_enabled():  # a crash in native code (librdkafka, a codec) leaves every
        faulthandler.enable()  # thread's Python stack on stderr, the job's log, not a bare signal
    try:
        return cli.main(args=argv, prog_name="streamer", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        masked = mask_secrets(exc.message)
        if masked != exc.message:  # click's message is final: show a copy with the same usage context
            exc = _with_message(exc, masked)
        exc.show()
        sys.exit(exc.exit_code)
    except ConfigError as exc:
        click.echo(f"error: {mask_secrets(str(exc))}", err=True)
        sys.exit(2)
    except StreamerError as exc:
        logging.getLogger("streamer").debug("failed", exc_info=True)
        click.echo(f"error: {mask_secrets(str(exc))}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # a failure streamer did not foresee: its traceback, masked, through logging
        _unforeseen(exc)
        sys.exit(1)


def _with_message(exc: click.ClickException, message: str) -> click.ClickException:
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError):
        return click.UsageError(message, ctx)
    return click.ClickException(message)


def _unforeseen(exc: Exception) -> None:
    from streamer.logs import configure_logging, mask_secrets

    root = logging.getLogger()
    if not root.handlers:  # failed before the group's callback set logging up
        configure_logging()
    logging.getLogger("streamer").error("unexpected failure", exc_info=exc)
    click.echo(f"error: {type(exc).__name__}: {mask_secrets(str(exc))}", err=True)
