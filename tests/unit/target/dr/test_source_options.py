"""The flags that name the live source for ``streamer verify --against-source`` and ``target run``."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from streamer.errors import ConfigError
from streamer.metastore.transport import HmsAuth
from streamer.target.dr.commands import against_source_options, source_connection, verify_source_options


def test_the_options_parse_into_a_source_connection_and_one_source_is_required() -> None:
    seen: dict[str, Any] = {}

    @click.command()
    @against_source_options
    @verify_source_options
    def cmd(**kw: Any) -> None:
        seen.update(kw)

    done = CliRunner().invoke(cmd, ["--against-source", "--source-hms-uri", "thrift://src:9083",
                                    "--verify-source-notification-db", "sqlite:///w.db"])
    assert done.exit_code == 0, done.output
    assert seen["against_source"] and seen["verify_source_hms_uri"] is None
    conn = source_connection(seen["source_hms_uri"], seen["source_notification_db"], HmsAuth())
    assert conn.hms_uri == "thrift://src:9083" and conn.notification_db is None
    assert source_connection(None, None, HmsAuth()) is None
    with pytest.raises(ConfigError, match="exactly one"):
        source_connection("thrift://a:1", "sqlite:///w.db", HmsAuth())
