"""``streamer warehouse``: an operator creates a warehouse, drives it, and reads its log."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from streamer.hive.commands import hive
from streamer.warehouse.commands import warehouse


def test_operator_session_and_log_feeds_hive_decode(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--url", str(tmp_path / "m.sqlite")]

    def run(*args: str) -> str:
        result = runner.invoke(warehouse, [*base, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    init = json.loads(run("--root", str(tmp_path / "w"), "--cmroot", str(tmp_path / "cm"),
                          "--message-format", "gzip(json-2.0)", "init"))  # fmt: skip
    assert init["current_event_id"] == 0 and init["message_format"] == "gzip(json-2.0)"
    run("create-database", "shop", "--param", "team=web")
    run("create-table", "shop", "orders", "--column", "id:bigint,name:string", "--partition-key", "dt:string")
    run("insert", "shop", "orders", "--partition", "dt=2024-01-01", "--files", "2",
        "--rows", json.dumps([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]))  # fmt: skip
    stats = json.loads(run("workload", "--events", "20", "--seed", "1"))
    assert stats["first_event_id"] == 4 and stats["last_event_id"] >= 23

    lines = run("log").splitlines()
    assert len(lines) == stats["last_event_id"]
    first = json.loads(lines[0])
    assert set(first) >= {
        "eventId",
        "eventTime",
        "eventType",
        "messageFormat",
        "message",
        "dbName",
        "tableName",
    }
    assert [json.loads(line)["eventType"] for line in lines[:3]] == ["CREATE_DATABASE", "CREATE_TABLE",
                                                                     "ADD_PARTITION"]  # fmt: skip
    decoded = runner.invoke(hive, ["decode"], input="\n".join(lines) + "\n")
    assert decoded.exit_code == 0, decoded.output
    assert len(decoded.output.splitlines()) == len(lines)

    assert len(run("log", "--after", "2", "--limit", "1").splitlines()) == 1


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(warehouse, ["--url", str(tmp_path / "m.sqlite"), "init"])
    assert result.exit_code != 0
    assert "pass --root on first use" in str(result.exception)


def test_workload_command_runs_transactions(tmp_path: Path) -> None:
    base = [
        "--url",
        str(tmp_path / "m.sqlite"),
        "--root",
        str(tmp_path / "w"),
        "--cmroot",
        str(tmp_path / "c"),
    ]
    args = ["workload", "--events", "40", "--seed", "2", "--txn-share", "0.6", "--abort-ratio", "0.5"]
    result = CliRunner().invoke(warehouse, [*base, *args], catch_exceptions=False)
    out = json.loads(result.output)
    assert out["txns_committed"] + out["txns_aborted"] > 0
