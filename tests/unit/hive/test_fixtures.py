"""Every real Hive message in tests/fixtures/hive-messages decodes, with the values a target relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.events.model import (
    AbortTxnPayload,
    AddPartitionPayload,
    AlterPartitionPayload,
    AlterTablePayload,
    CreateTablePayload,
    DatabasePayload,
    DropPartitionPayload,
    DropTablePayload,
    Event,
)
from streamer.hive.decode import decode_row
from streamer.hive.notification import NotificationRow

FIXTURES = Path(__file__).parents[2] / "fixtures" / "hive-messages"  # README.md there: their provenance
TYPES = {
    "abort_txn_1": "ABORT_TXN",
    "add_partition_1": "ADD_PARTITION",
    "alter_partition_1": "ALTER_PARTITION",
    "alter_partition_2": "ALTER_PARTITION",
    "alter_table_1": "ALTER_TABLE",
    "create_database_1": "CREATE_DATABASE",
    "create_table_1": "CREATE_TABLE",
    "drop_partition_1": "DROP_PARTITION",
    "drop_table_1": "DROP_TABLE",
}
TABLE_DIR = "hdfs://hdcluster/warehouse/tablespace/managed/hive/tmp_db.db/notification_test"


def fixture_row(name: str, event_id: int = 7) -> NotificationRow:
    gz = FIXTURES / f"{name}.gzip_b64.txt"
    path, fmt = (gz, "gzip(json-2.0)") if gz.exists() else (FIXTURES / f"{name}.json", "json-0.2")
    return NotificationRow(event_id, 1616068620, TYPES[name], path.read_text(encoding="utf-8").strip(), fmt)


def decode(name: str) -> Event:
    return decode_row(fixture_row(name), source_id="src")


def test_every_fixture_file_is_covered() -> None:
    names = {p.name.split(".")[0] for p in FIXTURES.iterdir() if p.suffix in (".json", ".txt")}
    assert names == set(TYPES)


def test_gzip_and_plain_bodies_decode_to_the_same_payload() -> None:
    for name in ("alter_partition_2", "create_database_1"):
        plain = NotificationRow(1, 1, TYPES[name], (FIXTURES / f"{name}.json").read_text(), "json-0.2")
        assert decode_row(plain).payload == decode(name).payload


def test_create_table() -> None:
    e = decode("create_table_1")
    assert isinstance(e.payload, CreateTablePayload)
    t = e.payload.table
    assert (e.db, e.table, e.source.source_id, e.source.event_id) == ("tmp_db", "notification_test", "src", 7)
    assert (t.db, t.name, t.table_type, t.owner, t.create_time) == (
        "tmp_db",
        "notification_test",
        "MANAGED_TABLE",
        "hive",
        1616068620,
    )
    assert [(c.name, c.type, c.comment) for c in t.sd.columns] == [
        ("db", "string", "hive db name"),
        ("tbl", "string", "hive table name"),
        ("first_partition", "string", "name of the first partition"),
        ("c_time", "string", "created time"),
    ]
    assert [(k.name, k.type) for k in t.partition_keys] == [("day", "string")]
    assert t.sd.location == TABLE_DIR
    assert t.sd.serde.serialization_lib == "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
    assert t.sd.serde.parameters == {"serialization.format": "1"}
    assert t.sd.input_format == "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
    assert t.parameters == {"transient_lastDdlTime": "1616068620", "bucketing_version": "2"}
    assert (t.sd.num_buckets, t.sd.compressed, t.catalog, t.owner_type) == (-1, False, "hive", 1)
    assert e.payload.files == []


def test_add_partition_lists_partitions_and_files() -> None:
    e = decode("add_partition_1")
    p = e.payload
    assert isinstance(p, AddPartitionPayload)
    assert [q.values for q in p.partitions] == [["2021-03-18"]]
    assert p.partitions[0].sd.location == f"{TABLE_DIR}/day=2021-03-18"
    assert p.partitions[0].parameters["numFiles"] == "5"
    assert p.table is not None and p.table.write_id == 0
    assert [f.uri.rsplit("/", 1)[1] for f in p.files] == [f"00000{i}_0" for i in range(5)]
    assert {(f.checksum, f.cm_uri, f.subdir, f.partition) for f in p.files} == {
        (None, None, None, "day=2021-03-18")
    }
    assert all(f.checksum_algorithm is None and f.size is None for f in p.files)


def test_alter_table_adds_a_column() -> None:
    p = decode("alter_table_1").payload
    assert isinstance(p, AlterTablePayload)
    assert [c.name for c in p.after.sd.columns][-1] == "u_time"
    assert len(p.before.sd.columns) == 4 and p.after.sd.columns[-1].comment is None
    assert (p.is_truncate, p.write_id, p.is_rename) == (False, 0, False)


def test_drop_partition_has_values_only() -> None:
    p = decode("drop_partition_1").payload
    assert isinstance(p, DropPartitionPayload)
    assert p.partition_values == [["2021-03-17"]]


def test_alter_partition_hdp() -> None:
    p = decode("alter_partition_1").payload
    assert isinstance(p, AlterPartitionPayload)
    assert p.before.values == p.after.values == ["2021-03-18"]
    assert [c.name for c in p.after.sd.columns][-1] == "new_timestamp"
    assert p.after.parameters["transient_lastDdlTime"] == "1616071558"
    assert (p.after.write_id, p.write_id, p.is_truncate) == (0, 0, False)


def test_alter_partition_gzip_utf8() -> None:
    e = decode("alter_partition_2")
    p = e.payload
    assert isinstance(p, AlterPartitionPayload) and p.table is not None
    assert e.source.message_format == "gzip(json-2.0)"
    assert (e.db, e.table) == ("fin_ads_online", "ads_p_u_behavior_record_ice_statistics_pdi")
    assert p.table.parameters["comment"] == "智信用户行为统计天表"
    assert p.table.sd.columns[0].comment == "生成记录时间"
    assert p.after.values == ["20230131"]
    assert p.after.sd.location.endswith("/pday=20230131")  # type: ignore[union-attr]


def test_create_database_hive4() -> None:
    p = decode("create_database_1").payload
    assert isinstance(p, DatabasePayload) and p.database is not None
    db = p.database
    assert (db.name, db.location, db.owner_name, db.owner_type, db.catalog, db.create_time) == (
        "flight_db",
        "file:/user/hive/warehouse/flight_db.db",
        "trino",
        1,
        "hive",
        1754315969,
    )
    assert db.parameters == {"trino_query_id": "20250804_135929_00000_ug6h6"}


def test_drop_table() -> None:
    p = decode("drop_table_1").payload
    assert isinstance(p, DropTablePayload) and p.table is not None
    assert p.table.qualified_name == "tmp_db.notification_test"


def test_abort_txn() -> None:
    e = decode("abort_txn_1")
    assert e.payload == AbortTxnPayload(12787, [])
    assert (e.db, e.table) == (None, None)


@pytest.mark.parametrize("db,table", [("null", " "), (None, None), ("", "")])
def test_hive31_placeholder_names_are_absent(db: str | None, table: str | None) -> None:
    row = fixture_row("abort_txn_1")
    e = decode_row(NotificationRow(1, 1, "ABORT_TXN", row.message, None, db, table))
    assert (e.db, e.table) == (None, None)
