"""Target paths: derived from names, never escaping the roots (DESIGN invariant 7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import PathEscapeError
from streamer.events.model import Column, PartitionSnapshot, StorageDescriptor, TableSnapshot
from streamer.hive.files import escape_path_name
from streamer.target.apply.paths import Root, TargetPaths, partition_name

PATHS = TargetPaths("/wh", "/ext")


def test_managed_layout_follows_hive_defaults() -> None:
    assert PATHS.database_location("Sales") == "/wh/sales.db"
    assert PATHS.table_location("sales", "Orders") == "/wh/sales.db/orders"
    assert PATHS.partition_location("s", "t", ["dt", "Region"], ["2024-01-01", "a/b"]) == (
        "/wh/s.db/t/dt=2024-01-01/region=a%2Fb"
    )


def test_managed_table_ignores_the_source_location() -> None:
    table = TableSnapshot(name="t", db="d", sd=StorageDescriptor(location="hdfs://nn/../../etc"))
    assert PATHS.table_target(table) == "/wh/d.db/t"


def test_external_table_keeps_its_source_path_under_the_base_dir() -> None:
    table = TableSnapshot(
        name="t", db="d", table_type="EXTERNAL_TABLE", sd=StorageDescriptor(location="hdfs://nn:8020/data/x")
    )
    assert PATHS.table_target(table) == "/ext/hdfs/nn+8020/data/x"  # <base>/<scheme>/<authority>/<path>
    part = PartitionSnapshot(values=["1"], sd=StorageDescriptor(location="s3a://bucket/else/where"))
    with_keys = TableSnapshot(**{**table.__dict__, "partition_keys": [Column("p", "int")]})
    assert PATHS.partition_target(with_keys, part) == "/ext/s3/bucket/else/where"  # s3a and s3: one store
    legacy = TargetPaths("/wh", "/ext", external_layout="path")  # replicas made before the namespacing
    assert legacy.table_target(table) == "/ext/data/x"
    assert legacy.partition_target(with_keys, part) == "/ext/else/where"


@pytest.mark.parametrize(
    ("location", "namespace"),
    [
        ("file:/data/x", "file/_"),
        ("file:///data/x", "file/_"),
        ("file://localhost/data/x", "file/_"),
        ("/data/x", "file/_"),
        ("hdfs:///data/x", "hdfs/_"),
        ("hdfs://NN.example:8020/data/x", "hdfs/nn.example+8020"),
        ("s3a://user:secret@bucket/data/x", "s3/bucket"),  # never a user or secret in a path
        ("hdfs://[fe80::1]:8020/data/x", "hdfs/[fe80++1]+8020"),
    ],
)
def test_external_locations_are_namespaced_by_their_filesystem(location: str, namespace: str) -> None:
    mapped = PATHS.external_location(location)
    assert mapped == f"/ext/{namespace}/data/x"
    assert PATHS.external_location(PATHS.external_source(mapped)) == mapped  # the external sync's inverse


@pytest.mark.parametrize("location", ["/", "file:///", "hdfs://nn/", "s3a://bucket/", "hdfs://nn//"])
@pytest.mark.parametrize("layout", ["authority", "path"])
def test_a_filesystem_root_is_no_external_location(location: str, layout: str) -> None:
    with pytest.raises(PathEscapeError):
        TargetPaths("/wh", "/ext", external_layout=layout).external_location(location, obj="d.t")


def test_an_authority_that_is_no_path_segment_is_refused() -> None:
    for location in ("hdfs://a%2F..%2Fb/x", "hdfs://..:1/x".replace(":1", ""), "hdfs://a\\b/x"):
        with pytest.raises(PathEscapeError):
            PATHS.external_location(location)


def test_view_has_no_location() -> None:
    assert PATHS.table_target(TableSnapshot(name="v", db="d", table_type="VIRTUAL_VIEW")) is None


def test_urls_keep_scheme_and_authority() -> None:
    paths = TargetPaths("hdfs://nn:8020/warehouse/", "file:///ext")
    assert paths.table_location("d", "t") == "hdfs://nn:8020/warehouse/d.db/t"
    assert paths.external_location("hdfs://other/x/y") == "file:///ext/hdfs/other/x/y"


@pytest.mark.parametrize(
    "location",
    [
        "hdfs://nn/data/../../etc",
        "/data/%2e%2e/secret",
        "/data/%2E%2e/secret",
        "/data/%252e%252e/secret",
        "/data/./x",
        "/data//x",
        "/data/x\x00y",
        "/data/x%00y",
        "relative/path",
        "/data\\..\\x",
    ],
)
def test_escaping_external_locations_are_rejected(location: str) -> None:
    with pytest.raises(PathEscapeError):
        PATHS.external_location(location, obj="d.t")


def test_external_without_a_base_dir_is_refused() -> None:
    with pytest.raises(PathEscapeError, match="external-base-dir"):
        TargetPaths("/wh").external_location("/data/x")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", "a%2e", "a\x00"])
def test_bad_object_names_are_rejected(name: str) -> None:
    with pytest.raises(PathEscapeError):
        PATHS.table_location("d", name)
    with pytest.raises(PathEscapeError):
        PATHS.database_location(name)


@pytest.mark.parametrize(
    "url",
    ["/elsewhere/x", "/whx/y", "file://host/wh/x", "hdfs://nn/wh/x", "/wh/../etc", "/wh/%2e%2e/etc", "/wh?x"],
)
def test_ensure_inside_rejects_other_roots_schemes_and_authorities(url: str) -> None:
    with pytest.raises(PathEscapeError):
        PATHS.ensure_inside(url)


def test_ensure_inside_accepts_children() -> None:
    assert PATHS.ensure_inside("/wh/a.db/t/f") == "/wh/a.db/t/f"
    assert Root.parse("hdfs://nn/wh").contains("hdfs://nn/wh/x")
    assert not Root.parse("hdfs://nn/wh").contains("hdfs://other/wh/x")


def test_hive_escaping() -> None:
    assert escape_path_name("") == "__HIVE_DEFAULT_PARTITION__"
    assert escape_path_name("a=b:c/d%") == "a%3Db%3Ac%2Fd%25"
    assert partition_name(["a", "b"], ["1", "x y"]) == "a=1/b=x y"


segment_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


@given(st.lists(segment_text, min_size=1, max_size=4))
def test_partition_locations_stay_under_their_table(values: list[str]) -> None:
    keys = [f"k{i}" for i in range(len(values))]
    location = PATHS.partition_location("d", "t", keys, values)
    assert location.startswith("/wh/d.db/t/")
    assert location.count("/") == 4 + len(values) - 1
    PATHS.ensure_inside(location)


@given(st.lists(st.sampled_from(["a", "..", ".", "%2e%2E", "%2e", "b", "", "x%00", "c.d"]), max_size=6))
def test_external_mapping_never_escapes(segments: list[str]) -> None:
    source = "hdfs://nn/" + "/".join(segments)
    try:
        mapped = PATHS.external_location(source)
    except PathEscapeError:
        return
    assert mapped == "/ext" or mapped.startswith("/ext/")
    assert ".." not in mapped.split("/")
    PATHS.ensure_inside(mapped)


@given(st.text(max_size=30))
def test_arbitrary_text_either_maps_inside_or_is_rejected(text: str) -> None:
    try:
        mapped = PATHS.external_location("/" + text)
    except PathEscapeError:
        return
    assert PATHS.ensure_inside(mapped) == mapped


def test_local_location_spellings_are_one_filesystem() -> None:
    # a metastore returns file:/x for a location created as file:///x (or a plain path root)
    for root in ("/data/wh", "file:///data/wh", "file:/data/wh"):
        r = Root.parse(root)
        assert r.contains("file:/data/wh/db.db/t")
        assert r.contains("file:///data/wh/db.db/t")
        assert r.contains("/data/wh/db.db/t")
        assert not r.contains("hdfs://nn/data/wh/db.db/t")
        assert not r.contains("file://otherhost/data/wh/db.db/t")
        assert not r.contains("file:/data/whx/t")


S3_ROOTS = TargetPaths("s3a://replica/warehouse", "s3a://replica/external")


def test_s3a_roots_derive_s3a_locations() -> None:
    assert S3_ROOTS.table_location("Sales", "Orders") == "s3a://replica/warehouse/sales.db/orders"
    assert (S3_ROOTS.external_location("s3a://source-bucket/data/x", "a.t")
            == "s3a://replica/external/s3/source-bucket/data/x")  # namespaced by the source's bucket


@pytest.mark.parametrize("url", [
    "s3a://replica/warehouse/a.db/t",
    "s3://replica/warehouse/a.db/t",  # s3 and s3a name one store
    "S3A://replica/external/x",
])
def test_s3_spellings_of_the_same_bucket_are_inside(url: str) -> None:
    assert S3_ROOTS.ensure_inside(url) == url


@pytest.mark.parametrize("url", [
    "s3a://other/warehouse/a.db/t",  # another bucket
    "s3a://replica.other/warehouse/a.db/t",
    "s3a://replica/warehouse-other/t",  # a sibling prefix of the root
    "s3a://replica/warehouse/../outside",
    "s3a://replica/warehouse/%2e%2e/outside",
    "gs://replica/warehouse/a.db",
    "hdfs://replica/warehouse/a.db",
    "file:///replica/warehouse/a.db",
    "s3a://replica/warehouse/a.db?versionId=1",
])
def test_s3_escapes_are_refused(url: str) -> None:
    with pytest.raises(PathEscapeError, match="outside the target roots"):
        S3_ROOTS.ensure_inside(url, "a.t")
