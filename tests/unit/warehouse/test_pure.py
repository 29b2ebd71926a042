"""Pure parts of the warehouse: snapshot persistence, Hive object builders, file locations."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import Column, PartitionSnapshot, ResourceUri, TableSnapshot
from streamer.warehouse import objects
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.files import path_of, uri_of
from streamer.warehouse.snapshots import from_json, to_json

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
columns = st.lists(
    st.builds(Column, names, st.sampled_from(objects.SUPPORTED_TYPES), st.none() | names), max_size=4
)
params = st.dictionaries(names, names, max_size=3)


@given(
    db=names,
    name=names,
    cols=columns,
    keys=columns,
    p=params,
    now=st.integers(0, 2**31 - 1),
    ext=st.booleans(),
)
def test_table_snapshot_round_trips_through_json(
    db: str, name: str, cols: list[Column], keys: list[Column], p: dict[str, str], now: int, ext: bool
) -> None:
    tbl = objects.table(db, name, f"file:/w/{name}", cols, keys, now, external=ext, params=p)
    assert from_json(TableSnapshot, to_json(tbl)) == tbl


@given(values=st.lists(names, min_size=1, max_size=3), now=st.integers(0, 2**31 - 1))
def test_partition_snapshot_round_trips_through_json(values: list[str], now: int) -> None:
    keys = [Column(f"k{i}", "string") for i in range(len(values))]
    tbl = objects.table("db", "t", "file:/w/t", [Column("a", "int")], keys, now)
    part = objects.partition(tbl, values, "file:/w/t/x", now)
    assert from_json(PartitionSnapshot, to_json(part)) == part


def test_function_snapshot_keeps_resources() -> None:
    fn = objects.function("db", "f", "com.x.F", [ResourceUri("JAR", "file:/lib/a.jar")], 5)
    assert from_json(type(fn), to_json(fn)).resource_uris == [ResourceUri("JAR", "file:/lib/a.jar")]


def test_parquet_table_has_hive_storage_descriptor() -> None:
    tbl = objects.table("db", "t", "file:/w/t", [Column("a", "int")], [], 7, external=True)
    assert tbl.sd.input_format == "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
    assert tbl.sd.serde.serialization_lib == "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
    assert tbl.parameters["EXTERNAL"] == "TRUE"
    assert tbl.table_type == "EXTERNAL_TABLE"


def test_partition_names_are_escaped_as_hive_does() -> None:
    keys = [Column("dt", "string"), Column("Region", "string")]
    assert objects.partition_name(keys, ["2024-01-01", "a/b=c"]) == "dt=2024-01-01/region=a%2Fb%3Dc"


def test_partition_spec_must_match_keys() -> None:
    keys = [Column("dt", "string")]
    assert objects.partition_values(keys, {"dt": 5}) == ["5"]
    with pytest.raises(WarehouseError, match="missing"):
        objects.partition_values(keys, {"day": "x"})


@pytest.mark.parametrize(
    ("cols", "keys", "match"),
    [
        ([], [], "at least one"),
        ([Column("a", "int")], [Column("A", "string")], "duplicate"),
        ([Column("a", "map<string,int>")], [], "not supported"),
    ],
)
def test_bad_columns_are_refused(cols: list[Column], keys: list[Column], match: str) -> None:
    with pytest.raises(WarehouseError, match=match):
        objects.check_columns(cols, keys)


def test_locations_are_hadoop_style_and_literal() -> None:
    assert uri_of(Path("/w/t/dt=a%3Ab")) == "file:/w/t/dt=a%3Ab"
    assert path_of("file:/w/t/dt=a%3Ab") == Path("/w/t/dt=a%3Ab")
    assert path_of("file:///w/t") == Path("/w/t")
    with pytest.raises(WarehouseError, match="host"):
        path_of("file://other/w")
    with pytest.raises(WarehouseError):
        path_of("hdfs://nn/w")
