"""Location-bearing parameters follow the object to the target (a Spark datasource table's ``path``):
no value naming the source survives."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import PathEscapeError
from streamer.events.model import PartitionSnapshot, SerDe, StorageDescriptor, TableSnapshot
from streamer.target.apply.locations import (
    is_source_uri,
    moved_parameters,
    partition_locations,
    rewrite_parameters,
    table_locations,
)
from streamer.target.apply.paths import TargetPaths

PATHS = TargetPaths("hdfs://dr-nn/wh", "hdfs://dr-nn/ext")
SOURCE = "hdfs://src-nn:8020/warehouse/sales.db/orders"
TARGET = "hdfs://dr-nn/wh/sales.db/orders"

segments = st.text(alphabet="abcz09_-=", min_size=1, max_size=8)
below = st.lists(segments, max_size=3).map(lambda s: "".join("/" + x for x in s))
source_uris = st.one_of(
    below.map(lambda rel: SOURCE + rel),  # the object's own location and below it
    below.map(lambda rel: SOURCE.replace("hdfs://src-nn:8020", "hdfs://SRC-NN:8020") + rel),
    st.tuples(st.sampled_from(["hdfs://src-nn:8020", "s3a://src-bucket"]), segments, below).map(
        lambda t: f"{t[0]}/{t[1]}{t[2]}"  # elsewhere on a source filesystem
    ),
)
text = st.text(alphabet="abc ,;|=_-0123456789", max_size=12)  # delimiters, formats, comments
params = st.dictionaries(segments, st.one_of(source_uris, text), max_size=8)


@given(params)
def test_no_parameter_names_the_source_after_the_rewrite(values: dict[str, str]) -> None:
    out = rewrite_parameters(PATHS, values, [(SOURCE, TARGET)], "sales.orders")
    assert out.keys() == values.keys()
    for key, value in out.items():  # (the external layout names a source host as a directory: fine)
        assert urlsplit(value).netloc.lower() not in ("src-nn:8020", "src-bucket"), (key, value)
        if is_source_uri(values[key]):
            assert value.startswith(("hdfs://dr-nn/wh/sales.db/orders", "hdfs://dr-nn/ext/")), value
        else:
            assert value == values[key]  # what is not a location stays as it was


@given(below)
def test_a_value_below_the_object_keeps_its_place_below_the_target(rel: str) -> None:
    out = rewrite_parameters(PATHS, {"path": SOURCE + rel + "/"}, [(SOURCE, TARGET)], "t")
    assert out == {"path": TARGET + rel}


def test_a_datasource_tables_path_points_at_its_target_directory() -> None:
    serde = SerDe(serialization_lib="ParquetHiveSerDe", parameters={"path": "file:/src/wh/d.db/t",
                                                                      "serialization.format": "1"})
    table = TableSnapshot("t", "d", sd=StorageDescriptor(location="/wh/d.db/t", serde=serde),
                          parameters={"spark.sql.sources.provider": "parquet"})
    out = table_locations(TargetPaths("/wh"), table, "file:/src/wh/d.db/t")
    assert out.sd.serde.parameters == {"path": "/wh/d.db/t", "serialization.format": "1"}
    assert out.parameters == table.parameters
    # Spark gives a datasource table's partitions the table's ``path``
    part = PartitionSnapshot(["1"], sd=StorageDescriptor(location="/wh/d.db/t/dt=1", serde=SerDe(
        parameters={"path": "file:///src/wh/d.db/t", "own": "file:///src/wh/d.db/t/dt=1/x"})))
    moved = partition_locations(TargetPaths("/wh"), part, "file:/src/wh/d.db/t/dt=1", "d.t/dt=1",
                                ("file:/src/wh/d.db/t", "/wh/d.db/t"))
    assert moved.sd.serde.parameters == {"path": "/wh/d.db/t", "own": "/wh/d.db/t/dt=1/x"}


def test_a_source_location_with_no_place_on_the_target_is_refused_by_name() -> None:
    with pytest.raises(PathEscapeError, match=r"avro\.schema\.url") as raised:
        rewrite_parameters(TargetPaths("/wh"), {"avro.schema.url": "hdfs://nn/schemas/x.avsc"},
                           [("hdfs://nn/wh/d.db/t", "/wh/d.db/t")], "d.t")
    assert raised.value.obj == "d.t avro.schema.url"


@pytest.mark.parametrize("value", ["1", ",", "/", "a/b", "http://example.com/x", "hive", ""])
def test_values_that_are_not_source_locations_stay(value: str) -> None:
    assert rewrite_parameters(PATHS, {"k": value}, [(SOURCE, TARGET)], "t") == {"k": value}


def test_a_rename_moves_partition_parameters_along() -> None:
    mark = "streamer.source.location"
    params = {"path": "/wh/d.db/old/dt=1", "x": "/wh/d.db/older", mark: "file:/s/old/dt=1"}
    out = moved_parameters(params, "/wh/d.db/old", "/wh/d.db/new")
    out = moved_parameters(out, "file:/s/old", "file:/s/new")
    assert out == {"path": "/wh/d.db/new/dt=1", "x": "/wh/d.db/older", mark: "file:/s/new/dt=1"}
