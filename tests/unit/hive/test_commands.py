"""``streamer hive decode`` over JSON lines built from the real fixtures."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from streamer.hive.commands import hive
from streamer.hive.encode import encode_event
from tests.unit.hive.test_fixtures import TYPES, fixture_row
from tests.unit.hive.test_roundtrip import CASES, event


def _line(row: object) -> str:
    r = row.__dict__
    return json.dumps(
        {
            "eventId": r["event_id"],
            "eventTime": r["event_time"],
            "eventType": r["event_type"],
            "messageFormat": r["message_format"],
            "message": r["message"],
            "dbName": r["db_name"],
            "tableName": r["table_name"],
        }
    )


def test_decode_fixture_lines(tmp_path: Path) -> None:
    lines = [_line(fixture_row(name, i)) for i, name in enumerate(sorted(TYPES), start=1)]
    lines += [_line(encode_event(event(*CASES[i]))) for i in (11, 13, 24)]  # INSERT, CREATE_FUNCTION, ALLOC
    lines.insert(2, '{"eventType": "CREATE_TABLE", "messageFormat": "json-0.2", "message": "{"}')
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(hive, ["decode", str(path)])
    assert result.exit_code == 1
    out = [json.loads(x) for x in result.stdout.splitlines()]
    assert len(out) == len(lines) - 1
    err = json.loads(result.stderr.strip())
    assert err["line"] == 3 and err["error"] == "DecodeError" and "JSON" in err["cause"]
    by_type = {o["event_type"]: o for o in out}
    ct = by_type["CREATE_TABLE"]
    assert (ct["db"], ct["table"]) == ("tmp_db", "notification_test")
    assert ct["table_snapshot"]["columns"][0] == {"name": "db", "type": "string", "comment": "hive db name"}
    assert ct["table_snapshot"]["partition_keys"] == [{"name": "day", "type": "string"}]
    assert ct["table_snapshot"]["serde"] == "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
    assert by_type["ALTER_TABLE"]["table_snapshot_before"]["columns"][-1]["name"] == "c_time"
    add = by_type["ADD_PARTITION"]
    assert add["partitions"][0]["values"] == ["2021-03-18"] and len(add["files"]) == 5
    assert add["files"][0]["partition"] == "day=2021-03-18" and add["files"][0]["checksum"] is None
    assert by_type["DROP_PARTITION"]["partitions"] == [{"values": ["2021-03-17"]}]
    assert by_type["INSERT"]["replace"] is True and by_type["INSERT"]["files"][0]["checksum"] == "abc123"
    assert by_type["CREATE_FUNCTION"]["function"]["class_name"] == "com.x.F"
    assert by_type["ALLOC_WRITE_ID_EVENT"]["write_ids"] == [1, 2]
    assert by_type["ABORT_TXN"]["txn_id"] == 12787


def test_decode_from_stdin() -> None:
    result = CliRunner().invoke(hive, ["decode"], input=_line(fixture_row("drop_table_1")) + "\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["table_snapshot"]["location"].endswith("/notification_test")
