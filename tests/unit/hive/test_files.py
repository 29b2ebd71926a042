"""File references (``uri#checksum#cmroot#subdir``) and Hive partition names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import FileRef
from streamer.hive.files import format_file_uri, parse_file_uri, parse_partition_name, partition_name


def test_hive3_full_reference() -> None:
    ref = parse_file_uri("hdfs://nn/t/delta_5_5_0000/bucket_0#c0ffee#hdfs://nn/cm#delta_5_5_0000", "p=1")
    assert ref == FileRef(
        "hdfs://nn/t/delta_5_5_0000/bucket_0",
        "c0ffee",
        None,
        "hdfs://nn/cm/bucket_0_c0ffee",
        "delta_5_5_0000",
        None,
        "p=1",
    )


@pytest.mark.parametrize("text", ["hdfs://nn/t/f###", "hdfs://nn/t/f"])
def test_no_checksum(text: str) -> None:
    assert parse_file_uri(text) == FileRef("hdfs://nn/t/f")


def test_hive23_checksum_only_has_no_cm_uri() -> None:
    assert parse_file_uri("hdfs://nn/t/f#abc") == FileRef("hdfs://nn/t/f", "abc")


@pytest.mark.parametrize("bad", ["", "#abc", "a#b#c#d#e"])
def test_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_file_uri(bad)


def test_format_takes_cmroot_argument() -> None:
    assert (
        format_file_uri(FileRef("s3://b/f", "x", subdir="base_1"), "s3://b/cm")
        == "s3://b/f#x#s3://b/cm#base_1"
    )
    assert format_file_uri(FileRef("s3://b/f"), None) == "s3://b/f###"


def test_partition_names_escape_like_hive() -> None:
    assert partition_name(["DS", "hr"], ["2024-01-01", "a/b=c"]) == "ds=2024-01-01/hr=a%2Fb%3Dc"
    assert partition_name(["k"], [""]) == "k=__HIVE_DEFAULT_PARTITION__"
    assert partition_name(["k"], ["x:y#%"]) == "k=x%3Ay%23%25"
    assert parse_partition_name("ds=2024-01-01/hr=a%2Fb%3Dc") == {"ds": "2024-01-01", "hr": "a/b=c"}
    with pytest.raises(ValueError):
        parse_partition_name("novalue")


@given(
    st.lists(
        st.tuples(st.text(min_size=1).map(str.lower), st.text(min_size=1)),
        min_size=1,
        max_size=3,
        unique_by=lambda kv: kv[0],
    )
)
def test_partition_name_round_trips(kvs: list[tuple[str, str]]) -> None:
    keys, values = [k for k, _ in kvs], [v for _, v in kvs]
    assert parse_partition_name(partition_name(keys, values)) == dict(zip(keys, values, strict=True))


@given(
    st.text(st.characters(blacklist_characters="#"), min_size=1),
    st.none() | st.text("0123456789abcdef", min_size=1),
    st.none() | st.text(st.characters(blacklist_characters="#"), min_size=1),
)
def test_file_reference_round_trips(uri: str, checksum: str | None, subdir: str | None) -> None:
    ref = parse_file_uri(format_file_uri(FileRef(uri, checksum, subdir=subdir), "hdfs://nn/cm"))
    assert (ref.uri, ref.checksum, ref.subdir) == (uri, checksum, subdir)
