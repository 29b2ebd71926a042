"""The flags naming the live source (``streamer verify --against-source``, ``target run``), and
the job's loop running that check."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from streamer.errors import ConfigError
from streamer.metastore.memory import MemoryCatalog
from streamer.metastore.transport import HmsAuth
from streamer.target.dr.commands import source_connection
from streamer.target.dr.verify import Guard, VerifyLoop, VerifyReport, VerifySettings
from streamer.target.options import against_source_options, verify_source_options


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


def test_the_job_s_verification_loop_runs_the_further_check_with_its_catalog_under_the_batch_lock(
    tmp_path: Path,
) -> None:
    lock = threading.Lock()
    calls: list[tuple[object, bool]] = []

    def further(catalog: object, guard: Guard) -> VerifyReport:
        with guard():
            calls.append((catalog, lock.locked()))
        return VerifyReport()

    settings = VerifySettings("thrift://unused:1", str(tmp_path), "unused:9092", "t")
    catalog = MemoryCatalog()
    loop = VerifyLoop(settings, 60, lock, also=further)
    assert loop.run_once(catalog).ok
    assert calls == [(catalog, True)] and not lock.locked()
