"""Hive's ACID directory names and the visibility rule readers apply (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.warehouse import acid
from streamer.warehouse.errors import WarehouseError

write_ids = st.integers(1, 10**7 - 1)


@given(w=write_ids, stmt=st.integers(0, 9999))
def test_delta_and_base_names_round_trip(w: int, stmt: int) -> None:
    assert acid.parse_dir(acid.delta_dir(w, stmt)) == acid.AcidDir("delta", w, w, stmt)
    assert acid.parse_dir(acid.base_dir(w)) == acid.AcidDir("base", 0, w)


def test_names_are_hives() -> None:
    assert acid.delta_dir(5, 0) == "delta_0000005_0000005_0000"
    assert acid.base_dir(12) == "base_0000012"
    assert acid.bucket_file(1) == "bucket_00001"
    assert acid.parse_dir("delta_0000001_0000003") == acid.AcidDir("delta", 1, 3, None)
    assert acid.parse_dir("base_0000007_v0000042") == acid.AcidDir("base", 0, 7)
    for other in ("dt=1", "delta_3_1", "_tmp.delta_0000001_0000001_0000", "base_x", "000000_0"):
        assert acid.parse_dir(other) is None


@given(
    deltas=st.dictionaries(st.integers(1, 40), st.integers(0, 2), max_size=15),
    committed=st.sets(st.integers(1, 40)),
)
def test_without_a_base_exactly_the_committed_deltas_are_read(
    deltas: dict[int, int], committed: set[int]
) -> None:
    names = [acid.delta_dir(w, s) for w, s in deltas.items()] + ["dt=x", "junk"]
    expected = [acid.delta_dir(w, deltas[w]) for w in sorted(deltas) if w in committed]
    assert acid.visible_dirs(names, committed) == expected


@given(
    deltas=st.sets(st.integers(1, 40), max_size=15),
    bases=st.sets(st.integers(1, 40), max_size=3),
    committed=st.sets(st.integers(1, 40)),
)
def test_the_newest_committed_base_hides_everything_below_it(
    deltas: set[int], bases: set[int], committed: set[int]
) -> None:
    names = [acid.delta_dir(w, 0) for w in deltas] + [acid.base_dir(b) for b in bases]
    visible = acid.visible_dirs(names, committed)
    good_bases = sorted(b for b in bases if b in committed)
    floor = good_bases[-1] if good_bases else 0
    expected = ([acid.base_dir(floor)] if good_bases else []) + [
        acid.delta_dir(w, 0) for w in sorted(deltas) if w > floor and w in committed
    ]
    assert visible == expected


def test_kinds_and_table_properties() -> None:
    assert acid.kind_of(False) is None and acid.kind_of(True) == acid.FULL
    assert acid.kind_of("insert_only") == acid.INSERT_ONLY
    with pytest.raises(WarehouseError):
        acid.kind_of("yes")
    assert acid.params_kind(acid.table_params(acid.FULL)) == acid.FULL
    assert acid.params_kind(acid.table_params(acid.INSERT_ONLY)) == acid.INSERT_ONLY
    assert acid.params_kind({"TRANSACTIONAL": "TRUE"}) == acid.FULL
    assert acid.params_kind({"transactional": "false"}) is None
    with pytest.raises(WarehouseError, match="delete deltas"):
        acid.visible_dirs(["delete_delta_0000002_0000002_0000"], {2})
