"""`streamer broker`: run the embedded Kafka-protocol broker in the foreground."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.tls_front import TlsFiles


@click.group()
def broker() -> None:
    """Run the embedded Kafka-protocol broker (Tansu, memory storage: topics vanish on stop)."""


@broker.command("run")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Listen address."
)
@click.option(
    "--port", type=int, default=None, help="Listen port (default: any free)."
)
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where the broker's own output goes (default: a file in the temp dir).",
)
@click.option(
    "--advertised-host",
    default=None,
    help="Host name clients are told to connect to, and with TLS verify the certificate against "
    "(default: --host).",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False),
    default=None,
    help="PEM certificate (chain) to serve TLS with; needs --tls-key. Tansu then listens on loopback "
    "only, behind a TLS front on --host:--port.",
)
@click.option(
    "--tls-key", type=click.Path(dir_okay=False), default=None, help="PEM private key of --tls-cert."
)
@click.option(
    "--tls-client-ca",
    type=click.Path(dir_okay=False),
    default=None,
    help="Require client certificates signed by this CA (mutual TLS); needs --tls-cert.",
)
def run(
    host: str,
    port: int | None,
    log_file: str | None,
    advertised_host: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
) -> None:
    """Start the broker, print its bootstrap address, and stop it on Ctrl-C or SIGTERM."""
    tls = tls_files(tls_cert, tls_key, tls_client_ca)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    embedded = EmbeddedBroker(
        port=port, host=host, log_path=log_file, tls=tls, advertised_host=advertised_host
    )
    try:
        with embedded:
            click.echo(f"bootstrap servers: {embedded.bootstrap_servers}", nl=True)
            if tls is not None:
                click.echo(
                    "security.protocol: SSL (clients set ssl.ca.location to the CA that signed --tls-cert)"
                )
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


def tls_files(cert: str | None, key: str | None, client_ca: str | None) -> TlsFiles | None:
    """The TLS options as one value; a half-given pair is a usage error naming the missing flag."""
    if cert is None and key is None:
        if client_ca is not None:
            raise click.UsageError("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise click.UsageError(f"{'--tls-key' if cert else '--tls-cert'} is missing: TLS needs both")
    return TlsFiles.of(cert, key, client_ca=client_ca)
