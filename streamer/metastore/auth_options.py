"""The ``--hms-auth`` flags every command that talks to a metastore shares (agent, target, status).

One definition keeps the names, help and validation the same everywhere; ``HmsAuth`` does the
validation, so a bad combination is a ``ConfigError`` (exit 2) before anything connects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from streamer.metastore.transport import MECHANISMS, NONE, HmsAuth

F = TypeVar("F", bound=Callable[..., Any])


def hms_auth_options(env_prefix: str | None = None) -> Callable[[F], F]:
    """Adds the four flags; ``env_prefix`` gives explicit env twins (``STREAMER_HMS_AUTH``...).

    Without it the command's automatic twins apply (``STREAMER_TARGET_RUN_HMS_AUTH``...).
    """

    def env(name: str) -> dict[str, Any]:
        return {"envvar": f"{env_prefix}{name}", "show_envvar": True} if env_prefix else {}

    options = [
        click.option(
            "--hms-auth",
            type=click.Choice(MECHANISMS),
            default=NONE,
            show_default=True,
            **env("HMS_AUTH"),
            help="How to authenticate to the metastore: plain Thrift, or SASL/GSSAPI (Kerberos) for a "
            "metastore with hive.metastore.sasl.enabled=true.",
        ),
        click.option(
            "--hms-kerberos-principal",
            default=None,
            **env("HMS_KERBEROS_PRINCIPAL"),
            help="The metastore's principal, as its hive.metastore.kerberos.principal "
            "(e.g. hive/_HOST@EXAMPLE.COM; _HOST = the URI's canonical host name).",
        ),
        click.option(
            "--hms-client-principal",
            default=None,
            **env("HMS_CLIENT_PRINCIPAL"),
            help="Principal to log in as with --hms-client-keytab (else the ticket cache's, KRB5CCNAME).",
        ),
        click.option(
            "--hms-client-keytab",
            default=None,
            type=click.Path(dir_okay=False),
            **env("HMS_CLIENT_KEYTAB"),
            help="Keytab of --hms-client-principal, for a service without a ticket cache.",
        ),
    ]

    def decorate(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def auth_from_options(
    hms_auth: str,
    hms_kerberos_principal: str | None,
    hms_client_principal: str | None,
    hms_client_keytab: str | None,
) -> HmsAuth:
    """The validated setting from the flags' values (ConfigError names what is wrong)."""
    return HmsAuth(
        mechanism=hms_auth,
        principal=hms_kerberos_principal or None,
        client_principal=hms_client_principal or None,
        client_keytab=hms_client_keytab or None,
    )
