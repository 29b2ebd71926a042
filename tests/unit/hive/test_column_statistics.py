"""Column statistics through both wire forms of the field table (``streamer.hive.fields``).

TJSON text (Hive's messages, ``streamer.hive.objects``) and Hive 2.3's Thrift objects, encoded to
bytes and decoded again as the metastore would (``streamer.metastore.thrift.convert``), must carry
every statistic back unchanged; where the two forms differ (a decimal's scale, timestamps), the
table says so and these tests pin it.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as tt
from hypothesis import given
from hypothesis import strategies as st
from thrift.protocol.TBinaryProtocol import TBinaryProtocolFactory
from thrift.TSerialization import deserialize, serialize

from streamer.events.model import ColumnStatistic
from streamer.hive import fields, objects
from streamer.hive.tjson import TJSONError
from streamer.metastore.thrift import convert

longs = st.integers(-(2**63), 2**63 - 1)
counts = st.integers(0, 2**62)
names = st.text(max_size=6)


def _decimal_text(unscaled: int, scale: int) -> str:
    return str(Decimal(unscaled).scaleb(-scale))  # the form a bound reads back as


def _bounds(kind: str, scales: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    return {
        "LONG": longs.map(str),
        "DOUBLE": st.floats(allow_nan=False).map(repr),
        "DECIMAL": st.builds(_decimal_text, st.integers(-(10**20), 10**20), scales),
        "DATE": st.integers(-(10**6), 10**6).map(str),
        "TIMESTAMP": longs.map(str),
    }[kind]


# kind -> the ColumnStatistic attributes its struct carries (besides the bounds)
OWN = {
    "BOOLEAN": ("num_trues", "num_falses", "num_nulls"),
    "LONG": ("num_nulls", "num_distinct"),
    "DOUBLE": ("num_nulls", "num_distinct"),
    "STRING": ("max_length", "avg_length", "num_nulls", "num_distinct"),
    "BINARY": ("max_length", "avg_length", "num_nulls"),
    "DECIMAL": ("num_nulls", "num_distinct"),
    "DATE": ("num_nulls", "num_distinct"),
    "TIMESTAMP": ("num_nulls", "num_distinct"),
}
HIVE_2_3_KINDS = [k for k in OWN if k != "TIMESTAMP"]


@st.composite
def statistics(
    draw: st.DrawFn, kinds: list[str], scales: st.SearchStrategy[int], bits: bool
) -> ColumnStatistic:
    """A statistic of one of ``kinds`` with only its own struct's fields, bounds as they read back."""
    kind = draw(st.sampled_from(kinds))
    values: dict[str, Any] = {}
    for attr in OWN[kind]:
        values[attr] = draw(st.floats(0, 1e6) if attr == "avg_length" else counts)
    if kind in ("LONG", "DOUBLE", "DECIMAL", "DATE", "TIMESTAMP"):
        values["low_value"] = draw(st.none() | _bounds(kind, scales))
        values["high_value"] = draw(st.none() | _bounds(kind, scales))
    if bits:
        values["bit_vectors"] = draw(st.none() | st.binary(max_size=8))
    return ColumnStatistic(column=draw(names), type=draw(names), kind=kind, **values)


descs = st.fixed_dictionaries({}, optional={  # Hive 2.3 writes no catName, Hive 3 on does
    "isTblLevel": st.booleans(), "dbName": names, "tableName": names, "partName": names,
    "lastAnalyzed": longs, "catName": st.just("hive"),
})


@given(descs, st.lists(statistics(list(OWN), st.integers(-5, 30), bits=True), max_size=4))
def test_statistics_round_trip_through_tjson(desc: dict[str, Any], stats: list[ColumnStatistic]) -> None:
    assert objects.column_stats_from_tjson(objects.column_stats_to_tjson(desc, stats)) == (desc, stats)


def _through_the_wire(obj: tt.ColumnStatistics) -> tt.ColumnStatistics:
    factory = TBinaryProtocolFactory()
    back: tt.ColumnStatistics = deserialize(tt.ColumnStatistics(), serialize(obj, factory), factory)
    return back


# Hive 2.3's bitVectors is a Thrift string (Hive 3 made it binary), so bit vectors stay out here.
@given(names, names, st.none() | names, st.lists(statistics(HIVE_2_3_KINDS, st.integers(0, 30), bits=False),
                                                 max_size=4))
def test_statistics_round_trip_through_hive_2_3_thrift(
    db: str, table: str, part: str | None, stats: list[ColumnStatistic]
) -> None:
    back = _through_the_wire(convert.to_column_statistics(db, table, part, stats))
    desc = back.statsDesc
    assert (desc.isTblLevel, desc.dbName, desc.tableName, desc.partName) == (part is None, db, table, part)
    assert [convert.from_stats_obj(o) for o in back.statsObj] == stats


def test_missing_counters_are_sent_as_zero_to_hive_2_3() -> None:
    stat = ColumnStatistic("s", "string", "STRING", avg_length=-0.0)
    (obj,) = _through_the_wire(convert.to_column_statistics("d", "t", None, [stat])).statsObj
    assert convert.from_stats_obj(obj) == dataclasses.replace(
        stat, num_nulls=0, num_distinct=0, max_length=0, avg_length=0.0
    )


def test_a_positive_exponent_is_a_negative_scale_in_tjson_and_digits_in_hive_2_3() -> None:
    stat = ColumnStatistic("m", "decimal(10,0)", "DECIMAL", 0, 1, "1E+2", "-2.5E+2")
    text = objects.column_stats_to_tjson({}, [stat])
    assert '"3":{"i16":-2}' in text
    assert objects.column_stats_from_tjson(text)[1] == [stat]
    (obj,) = convert.to_column_statistics("d", "t", None, [stat]).statsObj
    assert obj.statsData.decimalStats.lowValue == tt.Decimal(unscaled=b"\x64", scale=0)
    assert convert.from_stats_obj(obj) == dataclasses.replace(stat, low_value="100", high_value="-250")


def test_dates_are_days_and_iso_dates_are_accepted_in_both_forms() -> None:
    stat = ColumnStatistic("t", "date", "DATE", 0, 2, "1970-01-11", "19000")
    expected = dataclasses.replace(stat, low_value="10")
    assert objects.column_stats_from_tjson(objects.column_stats_to_tjson({}, [stat]))[1] == [expected]
    assert convert.from_stats_obj(convert.to_stats_obj(stat)) == expected


def test_timestamps_are_tjson_only() -> None:
    stat = ColumnStatistic("ts", "timestamp", "TIMESTAMP", 0, 1, "0", "1700000000")
    assert objects.column_stats_from_tjson(objects.column_stats_to_tjson({}, [stat]))[1] == [stat]
    with pytest.raises(convert.UnsupportedStatisticError, match=r"Hive 2\.3"):
        convert.to_column_statistics("d", "t", None, [stat])


def test_unknown_kinds_and_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        objects.column_stats_to_tjson({}, [ColumnStatistic("x", "int", "INTERVAL")])
    with pytest.raises(ValueError, match="invalid decimal"):
        convert.to_stats_obj(ColumnStatistic("m", "decimal", "DECIMAL", low_value="ten"))
    with pytest.raises(ValueError, match="not finite"):
        objects.column_stats_to_tjson({}, [ColumnStatistic("m", "decimal", "DECIMAL", low_value="NaN")])
    with pytest.raises(convert.UnsupportedStatisticError, match="unknown kind"):
        convert.from_stats_obj(tt.ColumnStatisticsObj("c", "int", tt.ColumnStatisticsData()))


def test_a_union_in_tjson_needs_exactly_one_member() -> None:
    two = '{"2":{"lst":["rec",1,{"1":{"str":"c"},"3":{"rec":{"1":{"rec":{}},"2":{"rec":{}}}}}]}}'
    with pytest.raises(TJSONError, match="exactly one"):
        objects.column_stats_from_tjson(two)


def _structs(obj: fields.HiveObject[Any]) -> list[fields.HiveObject[Any]]:
    return [obj, *(s for f in obj.fields if f.of is not None for s in _structs(f.of))]


HIVE_3_ONLY = {("ColumnStatistics", "engine"), ("ColumnStatisticsDesc", "catName"),
               ("ColumnStatisticsData", "timestampStats")}


def test_the_table_agrees_with_hive_2_3_generated_classes() -> None:
    """Same field ids and names; what 2.3 lacks is only what Hive 3 added."""
    for obj in _structs(fields.COLUMN_STATISTICS):
        cls = getattr(tt, obj.name, None)
        if cls is None:
            assert obj.name in ("TimestampColumnStatsData", "Timestamp")
            continue
        theirs = {spec[0]: spec[2] for spec in cls.thrift_spec if spec}
        ours = {f.fid: f.theirs for f in obj.fields}
        assert {fid: name for fid, name in ours.items() if (obj.name, name) not in HIVE_3_ONLY} == theirs
