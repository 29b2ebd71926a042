"""Snapshot <-> Thrift conversion: pure round trips (no server) for every field Hive 2.3 carries."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import (
    Column,
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FunctionSnapshot,
    PartitionSnapshot,
    ResourceUri,
    SerDe,
    SortColumn,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.hive import fields
from streamer.hive.files import DEFAULT_PARTITION_NAME, partition_name
from streamer.metastore.thrift import convert

pytestmark = pytest.mark.integration

text = st.text(min_size=1, max_size=12)
params = st.dictionaries(text, st.text(max_size=12), max_size=3)
columns = st.lists(
    st.builds(Column, name=text, type=st.sampled_from(["int", "string"]), comment=st.none() | text)
)
sds = st.builds(
    StorageDescriptor,
    location=st.none() | text,
    columns=columns,
    input_format=st.none() | text,
    output_format=st.none() | text,
    compressed=st.booleans(),
    num_buckets=st.integers(-1, 64),
    serde=st.builds(SerDe, name=st.none() | text, serialization_lib=st.none() | text, parameters=params),
    bucket_columns=st.lists(text, max_size=2),
    sort_columns=st.lists(st.builds(SortColumn, column=text, order=st.sampled_from([0, 1])), max_size=2),
    parameters=params,
    stored_as_subdirectories=st.booleans(),
)
ints = st.integers(0, 2**31 - 1)
tables = st.builds(
    TableSnapshot,
    name=text,
    db=text,
    table_type=st.sampled_from(["MANAGED_TABLE", "EXTERNAL_TABLE", "VIRTUAL_VIEW"]),
    sd=sds,
    partition_keys=columns,
    parameters=params,
    owner=st.none() | text,
    create_time=ints,
    last_access_time=ints,
    retention=ints,
    view_original_text=st.none() | text,
    view_expanded_text=st.none() | text,
    temporary=st.booleans(),
    rewrite_enabled=st.booleans(),
)


@given(tables)
def test_table_round_trip(table: TableSnapshot) -> None:
    assert convert.from_thrift(fields.TABLE, convert.to_thrift(fields.TABLE, table)) == table


@given(
    st.builds(
        PartitionSnapshot,
        values=st.lists(text, max_size=3),
        db=text,
        table=text,
        sd=sds,
        parameters=params,
        create_time=ints,
        last_access_time=ints,
    )
)
def test_partition_round_trip(p: PartitionSnapshot) -> None:
    assert p.db is not None and p.table is not None
    assert convert.from_thrift(fields.PARTITION, convert.to_partition(p, p.db, p.table)) == p


@given(
    st.builds(
        DatabaseSnapshot,
        name=text,
        description=st.none() | text,
        location=st.none() | text,
        parameters=params,
        owner_name=st.none() | text,
        owner_type=st.none() | st.sampled_from([1, 2, 3]),
    )
)
def test_database_round_trip(db: DatabaseSnapshot) -> None:
    assert convert.from_thrift(fields.DATABASE, convert.to_thrift(fields.DATABASE, db)) == db


@given(
    st.builds(
        FunctionSnapshot,
        name=text,
        db=text,
        class_name=text,
        owner_name=st.none() | text,
        owner_type=st.sampled_from([1, 2, 3]),
        create_time=ints,
        resource_uris=st.lists(
            st.builds(ResourceUri, resource_type=st.sampled_from(["JAR", "FILE", "ARCHIVE"]), uri=text),
            max_size=2,
        ),
    )
)
def test_function_round_trip(f: FunctionSnapshot) -> None:
    assert convert.from_thrift(fields.FUNCTION, convert.to_thrift(fields.FUNCTION, f)) == f


def test_function_with_unknown_resource_type_is_refused() -> None:
    f = FunctionSnapshot("f", "d", "C", resource_uris=[ResourceUri("WHEEL", "x")])
    with pytest.raises(ValueError, match="WHEEL"):
        convert.to_thrift(fields.FUNCTION, f)


def test_constraint_round_trips() -> None:
    pk = Constraint(
        "PRIMARY_KEY", "pk1", "d", "t", "id", position=2, enabled=True, validated=False, rely=True
    )
    fk = Constraint(
        "FOREIGN_KEY",
        "fk1",
        "d",
        "c",
        "pid",
        ref_db="d",
        ref_table="t",
        ref_column="id",
        ref_name="pk1",
        update_rule=1,
        delete_rule=2,
        rely=False,
    )
    assert convert.from_thrift(fields.SQL_PRIMARY_KEY, convert.to_thrift(fields.SQL_PRIMARY_KEY, pk)) == pk
    assert convert.from_thrift(fields.SQL_FOREIGN_KEY, convert.to_foreign_key(fk)) == fk


@given(st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-(10**12), max_value=10**12))
def test_decimal_bound_round_trip(value: object) -> None:
    text_value = str(value)
    back = convert.from_thrift_decimal(convert.to_thrift_decimal(text_value))
    assert back is not None
    from decimal import Decimal

    assert Decimal(back) == Decimal(text_value)


def test_date_bounds_are_days_since_epoch() -> None:
    assert convert.from_thrift_date(convert.to_thrift_date("19000")) == "19000"
    assert convert.from_thrift_date(convert.to_thrift_date("1970-01-11")) == "10"


@pytest.mark.parametrize(
    "stat",
    [
        ColumnStatistic("b", "boolean", "BOOLEAN", num_nulls=1, num_trues=3, num_falses=4),
        ColumnStatistic("l", "bigint", "LONG", num_nulls=0, num_distinct=9, low_value="-5", high_value="70"),
        ColumnStatistic(
            "d", "double", "DOUBLE", num_nulls=2, num_distinct=3, low_value="0.5", high_value="1e+20"
        ),
        ColumnStatistic("s", "string", "STRING", num_nulls=1, num_distinct=4, avg_length=3.5, max_length=9),
        ColumnStatistic(
            "y", "binary", "BINARY", num_nulls=1, avg_length=3.5, max_length=9, bit_vectors=b"\x01"
        ),
        ColumnStatistic(
            "m",
            "decimal(10,2)",
            "DECIMAL",
            num_nulls=0,
            num_distinct=1,
            low_value="-1.25",
            high_value="12345.67",
        ),
        ColumnStatistic("t", "date", "DATE", num_nulls=0, num_distinct=2, low_value="1", high_value="20000"),
    ],
)
def test_statistic_round_trip(stat: ColumnStatistic) -> None:
    assert convert.from_stats_obj(convert.to_stats_obj(stat)) == stat


def test_timestamp_statistics_are_unsupported_in_hive_2_3() -> None:
    with pytest.raises(convert.UnsupportedStatisticError, match=r"Hive 2\.3"):
        convert.to_stats_obj(ColumnStatistic("ts", "timestamp", "TIMESTAMP", low_value="1"))


def test_partition_names_escape_like_hive() -> None:
    assert partition_name(["Dt", "k"], ["2024-01-01", "a/b:c"]) == "dt=2024-01-01/k=a%2Fb%3Ac"
    assert partition_name(["k"], [""]) == f"k={DEFAULT_PARTITION_NAME}"
    with pytest.raises(ValueError, match="keys"):
        partition_name(["a", "b"], ["1"])


def test_fields_hive_2_3_lacks_read_back_as_none() -> None:
    t = TableSnapshot("t", "d", catalog="hive", write_id=7, owner_type=1)
    back = convert.from_thrift(fields.TABLE, convert.to_thrift(fields.TABLE, t))
    assert back == dataclasses.replace(
        t, catalog=None, write_id=None, owner_type=None, create_time=0, last_access_time=0, retention=0
    )
