"""Interval sets behave as the sets of ids they stand for."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from streamer.testing import intervals
from streamer.testing.intervals import IdSet

spans = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=6)


def members(ids: IdSet) -> set[int]:
    return {i for lo, hi in ids for i in range(lo, hi + 1)}


def raw(pairs: list[tuple[int, int]]) -> set[int]:
    return {i for lo, hi in pairs for i in range(lo, hi + 1)}


@given(spans, spans, st.integers(-2, 62))
def test_operations_agree_with_sets(a: list[tuple[int, int]], b: list[tuple[int, int]], probe: int) -> None:
    na, nb = intervals.normalize(a), intervals.normalize(b)
    assert members(na) == raw(a)
    assert all(hi + 1 < lo2 for (_, hi), (lo2, _) in itertools.pairwise(na))  # disjoint, not adjacent
    assert members(intervals.intersect(na, nb)) == raw(a) & raw(b)
    assert intervals.contains(na, probe) == (probe in raw(a))
    above = [i for i in raw(a) if i >= probe]
    assert intervals.first_at_or_after(na, probe) == (min(above) if above else None)
    below = [i for i in raw(a) if i <= probe]
    assert intervals.last_at_or_before(na, probe) == (max(below) if below else None)


def test_render() -> None:
    assert intervals.render(()) == "{}"
    assert intervals.render(((1, 1), (3, 7))) == "{1, 3..7}"
    assert intervals.render(tuple((i, i) for i in range(0, 20, 2)), limit=2) == "{0, 2, ... (8 more)}"
