"""encode_event -> decode_row gives back the event (modulo what Hive's messages cannot carry)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.events.model import (
    AbortTxnPayload,
    AcidWrite,
    AcidWritePayload,
    AddConstraintsPayload,
    AddPartitionPayload,
    AllocWriteIdPayload,
    AlterDatabasePayload,
    AlterPartitionPayload,
    AlterPartitionsPayload,
    AlterTablePayload,
    Column,
    ColumnStatistic,
    CommitCompactionPayload,
    CommitTxnPayload,
    Constraint,
    CreateFunctionPayload,
    CreateTablePayload,
    DatabasePayload,
    DatabaseSnapshot,
    DeleteColumnStatsPayload,
    DropConstraintPayload,
    DropFunctionPayload,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    InsertPayload,
    OpenTxnPayload,
    PartitionSnapshot,
    Payload,
    ReloadPayload,
    ResourceUri,
    SerDe,
    SortColumn,
    Source,
    StorageDescriptor,
    TableSnapshot,
    TxnWriteId,
    UpdateColumnStatsPayload,
)
from streamer.hive.decode import decode_row, decode_txn_writes
from streamer.hive.encode import encode_event, encode_txn_write, hive_normal_form

SD = StorageDescriptor(
    location="hdfs://nn/wh/db1.db/t1",
    columns=[Column("id", "bigint", "key"), Column("name", "string")],
    input_format="org.apache.hadoop.mapred.TextInputFormat",
    output_format="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    serde=SerDe(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {"field.delim": ","}),
    bucket_columns=["id"],
    num_buckets=4,
    sort_columns=[SortColumn("id", 1)],
)
TABLE = TableSnapshot(
    "t1",
    "db1",
    sd=SD,
    partition_keys=[Column("ds", "string")],
    parameters={"transactional": "true"},
    owner="alice",
    owner_type=1,
    create_time=1700000000,
    catalog="hive",
    write_id=3,
)
PART = PartitionSnapshot(["2024-01-01"], "db1", "t1", sd=SD, parameters={"numFiles": "1"}, create_time=5)
DB = DatabaseSnapshot(
    "db1", "desc", "hdfs://nn/wh/db1.db", "hdfs://nn/managed/db1.db", {"k": "v"}, "bob", 1, "hive", 1700000000
)
CM = "hdfs://nn/cmroot"
FILE = FileRef(
    "hdfs://nn/wh/db1.db/t1/ds=2024-01-01/000000_0",
    "abc123",
    None,
    f"{CM}/000000_0_abc123",
    None,
    None,
    "ds=2024-01-01",
)
ACID_FILE = FileRef(
    "hdfs://nn/wh/db1.db/t1/delta_0000003_0000003_0000/bucket_00000",
    "ff",
    "md5",
    f"{CM}/bucket_00000_ff",
    "delta_0000003_0000003_0000",
    10,
    None,
)
WRITE = AcidWrite("db1", "t1", 3, [ACID_FILE], None, TABLE, None)
STATS = [
    ColumnStatistic("id", "bigint", "LONG", 0, 10, "-5", "99"),
    ColumnStatistic("x", "double", "DOUBLE", 1, 2, "0.5", "1e+300"),
    ColumnStatistic("d", "decimal(10,2)", "DECIMAL", 0, 3, "-12.50", "1000.00"),
    ColumnStatistic("s", "string", "STRING", 0, 3, avg_length=2.5, max_length=7, bit_vectors=b"\x00HLL"),
    ColumnStatistic("b", "boolean", "BOOLEAN", 0, num_trues=3, num_falses=4),
    ColumnStatistic("bin", "binary", "BINARY", 0, avg_length=1.0, max_length=2),
    ColumnStatistic("dt", "date", "DATE", 0, 2, "18000", "19000"),
    ColumnStatistic("ts", "timestamp", "TIMESTAMP", 0, 2, "0", "1700000000"),
]


def C(kind: str, **kw: object) -> Constraint:
    return Constraint(kind=kind, name=f"{kind.lower()}_1", db="db1", table="t1", column="id", **kw)  # type: ignore[arg-type]


T = EventType
CASES: list[tuple[EventType, Payload, str | None, str | None]] = [
    (T.CREATE_DATABASE, DatabasePayload(DB), "db1", None),
    (T.ALTER_DATABASE, AlterDatabasePayload(DB, DatabaseSnapshot("db1", location="s3://b/db1")), "db1", None),
    (T.DROP_DATABASE, DatabasePayload(DB), "db1", None),
    (T.DROP_DATABASE, DatabasePayload(None), "db1", None),
    (T.CREATE_TABLE, CreateTablePayload(TABLE, [FILE]), "db1", "t1"),
    (T.ALTER_TABLE, AlterTablePayload(TABLE, TableSnapshot("t2", "db2", sd=SD), True, 7), "db2", "t2"),
    (T.DROP_TABLE, DropTablePayload(TABLE), "db1", "t1"),
    (T.ADD_PARTITION, AddPartitionPayload(TABLE, [PART], [FILE]), "db1", "t1"),
    (T.ALTER_PARTITION, AlterPartitionPayload(TABLE, PART, PART, False, 4), "db1", "t1"),
    (T.ALTER_PARTITIONS, AlterPartitionsPayload(TABLE, [PART, PART], True, 2), "db1", "t1"),
    (T.DROP_PARTITION, DropPartitionPayload(TABLE, [["2024-01-01"], ["2024-01-02"]]), "db1", "t1"),
    (T.INSERT, InsertPayload(TABLE, PART, ["2024-01-01"], True, [FILE]), "db1", "t1"),
    (T.INSERT, InsertPayload(TableSnapshot("u", "db1"), None, [], False, []), "db1", "u"),
    (
        T.CREATE_FUNCTION,
        CreateFunctionPayload(
            FunctionSnapshot(
                "f",
                "db1",
                "com.x.F",
                "bob",
                1,
                5,
                1,
                [ResourceUri("JAR", "hdfs://nn/f.jar"), ResourceUri("FILE", "x")],
                "hive",
            )
        ),
        "db1",
        None,
    ),
    (T.DROP_FUNCTION, DropFunctionPayload("f"), "db1", None),
    (T.ADD_PRIMARYKEY, AddConstraintsPayload([C("PRIMARY_KEY", position=2, rely=True)]), "db1", "t1"),
    (
        T.ADD_FOREIGNKEY,
        AddConstraintsPayload(
            [
                C(
                    "FOREIGN_KEY",
                    ref_db="db0",
                    ref_table="p",
                    ref_column="pid",
                    ref_name="pk",
                    update_rule=1,
                    delete_rule=2,
                )
            ]
        ),
        "db0",
        "p",
    ),
    (T.ADD_UNIQUECONSTRAINT, AddConstraintsPayload([C("UNIQUE", validated=True)]), "db1", "t1"),
    (T.ADD_NOTNULLCONSTRAINT, AddConstraintsPayload([C("NOT_NULL", enabled=False)]), "db1", "t1"),
    (T.ADD_DEFAULTCONSTRAINT, AddConstraintsPayload([C("DEFAULT", value="0")]), "db1", "t1"),
    (T.ADD_CHECKCONSTRAINT, AddConstraintsPayload([C("CHECK", value="id > 0", catalog="hive")]), "db1", "t1"),
    (T.DROP_CONSTRAINT, DropConstraintPayload("db1", "t1", "pk1"), "db1", "t1"),
    (T.OPEN_TXN, OpenTxnPayload([5, 6, 7]), None, None),
    (T.OPEN_TXN, OpenTxnPayload([5, 9]), None, None),
    (T.ALLOC_WRITE_ID, AllocWriteIdPayload("db1", "t1", [TxnWriteId(5, 1), TxnWriteId(6, 2)]), "db1", "t1"),
    (T.ACID_WRITE, AcidWritePayload(5, WRITE), "db1", "t1"),
    (T.COMMIT_TXN, CommitTxnPayload(5, [WRITE]), None, None),
    (T.ABORT_TXN, AbortTxnPayload(6, ["db1"]), None, None),
    (
        T.UPDATE_TABLE_COLUMN_STAT,
        UpdateColumnStatsPayload("db1", "t1", STATS, [], {"a": "b"}, 3, True),
        "db1",
        "t1",
    ),
    (
        T.UPDATE_PARTITION_COLUMN_STAT,
        UpdateColumnStatsPayload("db1", "t1", STATS[:1], ["2024-01-01"], {}, 3, False),
        "db1",
        "t1",
    ),
    (T.DELETE_TABLE_COLUMN_STAT, DeleteColumnStatsPayload("db1", "t1", "id"), "db1", "t1"),
    (T.DELETE_PARTITION_COLUMN_STAT, DeleteColumnStatsPayload("db1", "t1", "id", "ds=x", ["x"]), "db1", "t1"),
    (T.COMMIT_COMPACTION, CommitCompactionPayload(9, 2, "MAJOR", "ds=x"), "db1", "t1"),
    (T.RELOAD, ReloadPayload(TABLE, [PART], True), "db1", "t1"),
]


def event(etype: EventType, payload: Payload, db: str | None, table: str | None, eid: int = 42) -> Event:
    return Event(Source("src", eid, 1700000001, "json-0.2", "hive"), etype, payload, db, table, ts_ms=99)


@pytest.mark.parametrize("fmt", ["json-0.2", "gzip(json-2.0)"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c[0].value))
def test_every_event_type_round_trips(
    case: tuple[EventType, Payload, str | None, str | None], fmt: str
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
    assert isinstance(decoded.payload, AlterTablePayload) and decoded.payload.is_rename
    assert decoded.payload.before.qualified_name == "db1.t1"


def test_txn_write_rows_round_trip() -> None:
    row = encode_txn_write(5, WRITE, 1700000001)
    assert row.files == f"{ACID_FILE.uri}#ff#{CM}#delta_0000003_0000003_0000" and row.partition == ""
    [back] = decode_txn_writes([row])
    assert back.files[0].subdir == "delta_0000003_0000003_0000"
    assert back.files[0].cm_uri == ACID_FILE.cm_uri
    assert back == AcidWrite(
        "db1",
        "t1",
        3,
        [FileRef(ACID_FILE.uri, "ff", None, ACID_FILE.cm_uri, ACID_FILE.subdir)],
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
columns = st.builds(Column, names, names, opt_texts)
sds = st.builds(
    StorageDescriptor,
    opt_texts,
    st.lists(columns, max_size=3),
    opt_texts,
    opt_texts,
    st.booleans(),
    i32,
    st.builds(SerDe, opt_texts, opt_texts, str_maps),
    st.lists(texts, max_size=2),
    st.lists(st.builds(SortColumn, texts, st.integers(0, 1)), max_size=2),
    str_maps,
    st.booleans(),
)
tables = st.builds(
    TableSnapshot,
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
    PartitionSnapshot,
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
    FileRef,
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
    before: TableSnapshot, after: TableSnapshot, refs: list[FileRef], truncate: bool, fmt: str
) -> None:
    for e in (
        event(T.CREATE_TABLE, CreateTablePayload(before, refs), before.db, before.name),
        event(T.ALTER_TABLE, AlterTablePayload(before, after, truncate, None), after.db, after.name),
    ):
        assert decode_row(encode_event(e, fmt), "src") == hive_normal_form(e, fmt)


@settings(max_examples=25, deadline=None)
@given(tables, st.lists(partitions, min_size=1, max_size=3), st.booleans())
def test_generated_partitions_round_trip(
    table: TableSnapshot, parts: list[PartitionSnapshot], truncate: bool
) -> None:
    for e in (
        event(T.ALTER_PARTITIONS, AlterPartitionsPayload(table, parts, truncate, 1), table.db, table.name),
        event(T.ALTER_PARTITION, AlterPartitionPayload(None, parts[0], parts[-1]), table.db, table.name),
        event(T.RELOAD, ReloadPayload(table, parts, truncate), table.db, table.name),
    ):
        assert decode_row(encode_event(e), "src") == hive_normal_form(e)
