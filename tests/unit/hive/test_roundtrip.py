"""encode_event -> decode_row gives back the event (modulo what Hive's messages cannot carry)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.events import model as ev
from streamer.events.model import Event, EventType
from streamer.hive.decode import decode_row, decode_txn_writes
from streamer.hive.encode import encode_event, encode_txn_write, hive_normal_form

SD = ev.StorageDescriptor(
    location="hdfs://nn/wh/db1.db/t1",
    columns=[ev.Column("id", "bigint", "key"), ev.Column("name", "string")],
    input_format="org.apache.hadoop.mapred.TextInputFormat",
    output_format="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    serde=ev.SerDe(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {"field.delim": ","}),
    bucket_columns=["id"],
    num_buckets=4,
    sort_columns=[ev.SortColumn("id", 1)],
)
TABLE = ev.TableSnapshot(
    "t1",
    "db1",
    sd=SD,
    partition_keys=[ev.Column("ds", "string")],
    parameters={"transactional": "true"},
    owner="alice",
    owner_type=1,
    create_time=1700000000,
    catalog="hive",
    write_id=3,
)
PART = ev.PartitionSnapshot(["2024-01-01"], "db1", "t1", sd=SD, parameters={"numFiles": "1"}, create_time=5)
DB = ev.DatabaseSnapshot(
    "db1", "desc", "hdfs://nn/wh/db1.db", "hdfs://nn/managed/db1.db", {"k": "v"}, "bob", 1, "hive", 1700000000
)
CM = "hdfs://nn/cmroot"
FILE = ev.FileRef(
    "hdfs://nn/wh/db1.db/t1/ds=2024-01-01/000000_0",
    "abc123",
    None,
    f"{CM}/000000_0_abc123",
    None,
    None,
    "ds=2024-01-01",
)
ACID_FILE = ev.FileRef(
    "hdfs://nn/wh/db1.db/t1/delta_0000003_0000003_0000/bucket_00000",
    "ff",
    "md5",
    f"{CM}/bucket_00000_ff",
    "delta_0000003_0000003_0000",
    10,
    None,
)
WRITE = ev.AcidWrite("db1", "t1", 3, [ACID_FILE], None, TABLE, None)
STATS = [
    ev.ColumnStatistic("id", "bigint", "LONG", 0, 10, "-5", "99"),
    ev.ColumnStatistic("x", "double", "DOUBLE", 1, 2, "0.5", "1e+300"),
    ev.ColumnStatistic("d", "decimal(10,2)", "DECIMAL", 0, 3, "-12.50", "1000.00"),
    ev.ColumnStatistic("s", "string", "STRING", 0, 3, avg_length=2.5, max_length=7, bit_vectors=b"\x00HLL"),
    ev.ColumnStatistic("b", "boolean", "BOOLEAN", 0, num_trues=3, num_falses=4),
    ev.ColumnStatistic("bin", "binary", "BINARY", 0, avg_length=1.0, max_length=2),
    ev.ColumnStatistic("dt", "date", "DATE", 0, 2, "18000", "19000"),
    ev.ColumnStatistic("ts", "timestamp", "TIMESTAMP", 0, 2, "0", "1700000000"),
]


def C(kind: str, **kw: object) -> ev.Constraint:
    return ev.Constraint(kind=kind, name=f"{kind.lower()}_1", db="db1", table="t1", column="id", **kw)  # type: ignore[arg-type]


T = EventType
CASES: list[tuple[EventType, ev.Payload, str | None, str | None]] = [
    (T.CREATE_DATABASE, ev.DatabasePayload(DB), "db1", None),
    (T.ALTER_DATABASE, ev.AlterDatabasePayload(DB, ev.DatabaseSnapshot("db1", location="s3://b/db1")),
     "db1", None),
    (T.DROP_DATABASE, ev.DatabasePayload(DB), "db1", None),
    (T.DROP_DATABASE, ev.DatabasePayload(None), "db1", None),
    (T.CREATE_TABLE, ev.CreateTablePayload(TABLE, [FILE]), "db1", "t1"),
    (T.ALTER_TABLE, ev.AlterTablePayload(TABLE, ev.TableSnapshot("t2", "db2", sd=SD), True, 7), "db2", "t2"),
    (T.DROP_TABLE, ev.DropTablePayload(TABLE), "db1", "t1"),
    (T.ADD_PARTITION, ev.AddPartitionPayload(TABLE, [PART], [FILE]), "db1", "t1"),
    (T.ALTER_PARTITION, ev.AlterPartitionPayload(TABLE, PART, PART, False, 4), "db1", "t1"),
    (T.ALTER_PARTITIONS, ev.AlterPartitionsPayload(TABLE, [PART, PART], True, 2), "db1", "t1"),
    (T.DROP_PARTITION, ev.DropPartitionPayload(TABLE, [["2024-01-01"], ["2024-01-02"]]), "db1", "t1"),
    (T.INSERT, ev.InsertPayload(TABLE, PART, ["2024-01-01"], True, [FILE]), "db1", "t1"),
    (T.INSERT, ev.InsertPayload(ev.TableSnapshot("u", "db1"), None, [], False, []), "db1", "u"),
    (
        T.CREATE_FUNCTION,
        ev.CreateFunctionPayload(
            ev.FunctionSnapshot(
                "f",
                "db1",
                "com.x.F",
                "bob",
                1,
                5,
                1,
                [ev.ResourceUri("JAR", "hdfs://nn/f.jar"), ev.ResourceUri("FILE", "x")],
                "hive",
            )
        ),
        "db1",
        None,
    ),
    (T.DROP_FUNCTION, ev.DropFunctionPayload("f"), "db1", None),
    (T.ADD_PRIMARYKEY, ev.AddConstraintsPayload([C("PRIMARY_KEY", position=2, rely=True)]), "db1", "t1"),
    (
        T.ADD_FOREIGNKEY,
        ev.AddConstraintsPayload(
            [
                C("FOREIGN_KEY", ref_db="db0", ref_table="p", ref_column="pid", ref_name="pk", update_rule=1,
                  delete_rule=2)
            ]
        ),
        "db0",
        "p",
    ),
    (T.ADD_UNIQUECONSTRAINT, ev.AddConstraintsPayload([C("UNIQUE", validated=True)]), "db1", "t1"),
    (T.ADD_NOTNULLCONSTRAINT, ev.AddConstraintsPayload([C("NOT_NULL", enabled=False)]), "db1", "t1"),
    (T.ADD_DEFAULTCONSTRAINT, ev.AddConstraintsPayload([C("DEFAULT", value="0")]), "db1", "t1"),
    (T.ADD_CHECKCONSTRAINT, ev.AddConstraintsPayload([C("CHECK", value="id > 0", catalog="hive")]),
     "db1", "t1"),
    (T.DROP_CONSTRAINT, ev.DropConstraintPayload("db1", "t1", "pk1"), "db1", "t1"),
    (T.OPEN_TXN, ev.OpenTxnPayload([5, 6, 7]), None, None),
    (T.OPEN_TXN, ev.OpenTxnPayload([5, 9]), None, None),
    (T.ALLOC_WRITE_ID, ev.AllocWriteIdPayload("db1", "t1", [ev.TxnWriteId(5, 1), ev.TxnWriteId(6, 2)]),
     "db1", "t1"),
    (T.ACID_WRITE, ev.AcidWritePayload(5, WRITE), "db1", "t1"),
    (T.COMMIT_TXN, ev.CommitTxnPayload(5, [WRITE]), None, None),
    (T.ABORT_TXN, ev.AbortTxnPayload(6, ["db1"]), None, None),
    (
        T.UPDATE_TABLE_COLUMN_STAT,
        ev.UpdateColumnStatsPayload("db1", "t1", STATS, [], {"a": "b"}, 3, True),
        "db1",
        "t1",
    ),
    (
        T.UPDATE_PARTITION_COLUMN_STAT,
        ev.UpdateColumnStatsPayload("db1", "t1", STATS[:1], ["2024-01-01"], {}, 3, False),
        "db1",
        "t1",
    ),
    (T.DELETE_TABLE_COLUMN_STAT, ev.DeleteColumnStatsPayload("db1", "t1", "id"), "db1", "t1"),
    (T.DELETE_PARTITION_COLUMN_STAT, ev.DeleteColumnStatsPayload("db1", "t1", "id", "ds=x", ["x"]),
     "db1", "t1"),
    (T.COMMIT_COMPACTION, ev.CommitCompactionPayload(9, 2, "MAJOR", "ds=x"), "db1", "t1"),
    (T.RELOAD, ev.ReloadPayload(TABLE, [PART], True), "db1", "t1"),
]


def event(etype: EventType, payload: ev.Payload, db: str | None, table: str | None, eid: int = 42) -> Event:
    return Event(ev.Source("src", eid, 1700000001, "json-0.2", "hive"), etype, payload, db, table, ts_ms=99)


@pytest.mark.parametrize("fmt", ["json-0.2", "gzip(json-2.0)"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c[0].value))
def test_every_event_type_round_trips(
    case: tuple[EventType, ev.Payload, str | None, str | None], fmt: str
) -> None:
    e = event(*case)
    row = encode_event(e, fmt)
    assert (row.event_type, row.message_format, row.event_id) == (case[0].value, fmt, 42)
    assert decode_row(row, "src") == hive_normal_form(e, fmt)


def test_every_event_type_is_covered() -> None:
    hive_types = {t for t in EventType if not t.value.startswith("STREAMER_")}  # streamer's own records
    assert {c[0] for c in CASES} == hive_types


def test_messages_look_like_hive4() -> None:
    row = encode_event(event(*CASES[7]))  # ADD_PARTITION
    body = json.loads(row.message)
    assert list(body)[:6] == ["server", "servicePrincipal", "db", "table", "tableType", "tableObjJson"]
    assert body["partitionFiles"][0]["files"] == [f"{FILE.uri}#abc123#{CM}#"]
    assert json.loads(body["partitionListJson"][0])["1"] == {"lst": ["str", 1, "2024-01-01"]}
    alter = json.loads(encode_event(event(*CASES[5])).message)
    assert (alter["isTruncateOp"], alter["db"], alter["table"]) == ("true", "db1", "t1")  # old names
    insert = json.loads(encode_event(event(*CASES[12])).message)
    assert (insert["replace"], insert["ptnObjJson"]) == ("false", None)
    commit = json.loads(encode_event(event(*CASES[26])).message)
    assert commit["txnid"] == 5 and commit["writeIds"] is None and commit["files"] is None
    opened = json.loads(encode_event(event(*CASES[22])).message)
    assert (opened["txnIds"], opened["fromTxnId"], opened["toTxnId"]) == (None, 5, 7)


def test_rename_envelope_is_new_names_snapshots_carry_both() -> None:
    decoded = decode_row(encode_event(event(*CASES[5])))
    assert (decoded.db, decoded.table) == ("db2", "t2")
    assert isinstance(decoded.payload, ev.AlterTablePayload) and decoded.payload.is_rename
    assert decoded.payload.before.qualified_name == "db1.t1"


def test_txn_write_rows_round_trip() -> None:
    row = encode_txn_write(5, WRITE, 1700000001)
    assert row.files == f"{ACID_FILE.uri}#ff#{CM}#delta_0000003_0000003_0000" and row.partition == ""
    [back] = decode_txn_writes([row])
    assert back.files[0].subdir == "delta_0000003_0000003_0000"
    assert back.files[0].cm_uri == ACID_FILE.cm_uri
    assert back == ev.AcidWrite(
        "db1",
        "t1",
        3,
        [ev.FileRef(ACID_FILE.uri, "ff", None, ACID_FILE.cm_uri, ACID_FILE.subdir)],
        None,
        TABLE,
        None,
    )


# --- property: generated snapshots --------------------------------------------------------------

names = st.text("abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=8)
texts = st.text(max_size=12)
opt_texts = st.none() | texts
i32 = st.integers(-(2**31), 2**31 - 1)
str_maps = st.dictionaries(texts, texts, max_size=3)
columns = st.builds(ev.Column, names, names, opt_texts)
sds = st.builds(
    ev.StorageDescriptor,
    opt_texts,
    st.lists(columns, max_size=3),
    opt_texts,
    opt_texts,
    st.booleans(),
    i32,
    st.builds(ev.SerDe, opt_texts, opt_texts, str_maps),
    st.lists(texts, max_size=2),
    st.lists(st.builds(ev.SortColumn, texts, st.integers(0, 1)), max_size=2),
    str_maps,
    st.booleans(),
)
tables = st.builds(
    ev.TableSnapshot,
    names,
    names,
    st.sampled_from(["MANAGED_TABLE", "EXTERNAL_TABLE", "VIRTUAL_VIEW"]),
    sds,
    st.lists(columns, max_size=2),
    str_maps,
    opt_texts,
    st.none() | i32,
    st.none() | i32,
    st.none() | i32,
    st.none() | i32,
    opt_texts,
    opt_texts,
    st.booleans(),
    st.booleans(),
    opt_texts,
    st.none() | st.integers(0, 2**63 - 1),
)
partitions = st.builds(
    ev.PartitionSnapshot,
    st.lists(texts, min_size=1, max_size=2),
    st.none() | names,
    st.none() | names,
    sds,
    str_maps,
    st.none() | i32,
    st.none() | i32,
    opt_texts,
)
files = st.builds(
    ev.FileRef,
    st.text("abc/:._-", min_size=1, max_size=20).map(lambda s: "hdfs://nn/" + s),
    st.none() | st.text("0123456789abcdef", min_size=1, max_size=8),
    st.none(),
    st.none() | st.just("hdfs://nn/cm/x_1"),
    st.none() | names,
    st.none(),
    st.none() | st.just("k=v"),
)


@settings(max_examples=25, deadline=None)
@given(
    tables,
    tables,
    st.lists(files, max_size=3),
    st.booleans(),
    st.sampled_from(["json-0.2", "gzip(json-2.0)"]),
)
def test_generated_tables_round_trip(
    before: ev.TableSnapshot, after: ev.TableSnapshot, refs: list[ev.FileRef], truncate: bool, fmt: str
) -> None:
    for e in (
        event(T.CREATE_TABLE, ev.CreateTablePayload(before, refs), before.db, before.name),
        event(T.ALTER_TABLE, ev.AlterTablePayload(before, after, truncate, None), after.db, after.name),
    ):
        assert decode_row(encode_event(e, fmt), "src") == hive_normal_form(e, fmt)


@settings(max_examples=25, deadline=None)
@given(tables, st.lists(partitions, min_size=1, max_size=3), st.booleans())
def test_generated_partitions_round_trip(
    table: ev.TableSnapshot, parts: list[ev.PartitionSnapshot], truncate: bool
) -> None:
    for e in (
        event(T.ALTER_PARTITIONS, ev.AlterPartitionsPayload(table, parts, truncate, 1), table.db, table.name),
        event(T.ALTER_PARTITION, ev.AlterPartitionPayload(None, parts[0], parts[-1]), table.db, table.name),
        event(T.RELOAD, ev.ReloadPayload(table, parts, truncate), table.db, table.name),
    ):
        assert decode_row(encode_event(e), "src") == hive_normal_form(e)
