"""``streamer hms``: operate an embedded Hive Metastore from the command line."""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType

import click

from streamer.embedded_metastore.server import EmbeddedMetastore


@click.group()
def hms() -> None:
    """Run an embedded Hive Metastore (Hive 2.3, from PySpark's jars)."""


@hms.command("run")
@click.option(
    "--port", type=int, default=None, help="Thrift port (default: a free one)."
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Config, logs and the Derby database (default: a temporary folder, removed on exit).",
)
@click.option(
    "--warehouse-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Root of managed tables (default: <work-dir>/warehouse).",
)
@click.option(
    "--jdbc-url",
    default=None,
    help="Metastore database, e.g. jdbc:postgresql://127.0.0.1:5432/hms (default: Derby in the work dir).",
)
@click.option("--jdbc-user", default=None, help="Database user for --jdbc-url.")
@click.option("--jdbc-password", default=None, help="Database password for --jdbc-url.")
@click.option(
    "--start-timeout", type=float, default=120.0, show_default=True, help="Seconds to wait for Thrift."
)
@click.option(
    "--notifications",
    is_flag=True,
    help="Log every change in NOTIFICATION_LOG (streamer's listener, compiled with javac on first "
    "use), so `streamer source run --hms-uri` can publish this metastore.",
)
@click.option(
    "--cmroot",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Turn on Hive's change management into DIR (hive.repl.cm.enabled=true, hive.repl.cmrootdir=DIR): "
    "files of a dropped table or partition are moved there first, named by their MD5 as Hive 2.3 names "
    "them (<cmroot>/<checksum>), and kept 24 h (hive.repl.cm.retain). Files an INSERT OVERWRITE "
    "replaces are not kept: Hive 2.3's metastore never sees them.",
)
def run(
    port: int | None,
    work_dir: Path | None,
    warehouse_dir: Path | None,
    jdbc_url: str | None,
    jdbc_user: str | None,
    jdbc_password: str | None,
    start_timeout: float,
    notifications: bool,
    cmroot: Path | None,
) -> None:
    """Start a metastore and keep it in the foreground until Ctrl-C or SIGTERM."""
    server = EmbeddedMetastore(
        work_dir=work_dir,
        warehouse_dir=warehouse_dir,
        jdbc_url=jdbc_url,
        jdbc_user=jdbc_user,
        jdbc_password=jdbc_password,
        port=port,
        start_timeout=start_timeout,
        notifications=notifications,
        cmroot=cmroot,
    )

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        with server:
            click.echo(f"metastore ready at {server.uri} (started in {server.start_seconds:.1f} s)")
            click.echo(f"warehouse dir: {server.warehouse_dir}")
            click.echo(f"log: {server.log_path}")
            if notifications:
                click.echo("notification log: on (streamer's listener)")
            if server.cmroot is not None:
                click.echo(f"change management: on, cmroot {server.cmroot}")
            code = server.wait()
            click.echo(f"metastore exited with code {code}", err=True)
    except KeyboardInterrupt:
        click.echo("stopping metastore", err=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
