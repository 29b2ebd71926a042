"""`streamer broker`: run the embedded Kafka-protocol broker in the foreground."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

from streamer.kafka.broker import EmbeddedBroker


@click.group()
def broker() -> None:
    """Run the embedded Kafka-protocol broker (Tansu, memory storage: topics vanish on stop)."""


@broker.command("run")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Listen address. [env: STREAMER_BROKER_RUN_HOST]"
)
@click.option(
    "--port", type=int, default=None, help="Listen port (default: any free). [env: STREAMER_BROKER_RUN_PORT]"
)
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where the broker's own output goes (default: a file in the temp dir).",
)
def run(host: str, port: int | None, log_file: str | None) -> None:
    """Start the broker, print its bootstrap address, and stop it on Ctrl-C or SIGTERM."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    embedded = EmbeddedBroker(port=port, host=host, log_path=log_file)
    try:
        with embedded:
            click.echo(f"bootstrap servers: {embedded.bootstrap_servers}", nl=True)
            click.echo(f"broker log: {embedded.log_path}", err=True)
            try:
                while not stop.wait(0.5):
                    if not embedded.running:
                        raise click.ClickException(f"broker exited unexpectedly; see {embedded.log_path}")
            except KeyboardInterrupt:
                pass
            click.echo("stopping broker", err=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
