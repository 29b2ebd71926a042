"""Sets of event ids as sorted, disjoint, inclusive intervals: the "which source events could this be"
answers the checker intersects. Tables change rarely relative to the log, so a state's compatible
event ids are a few long runs, far cheaper than sets of ids.
"""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[int, int]  # inclusive bounds, lo <= hi
IdSet = tuple[Interval, ...]


def normalize(intervals: Iterable[Interval]) -> IdSet:
    """Sort, drop empty intervals, and merge overlapping or adjacent ones."""
    out: list[Interval] = []
    for lo, hi in sorted(i for i in intervals if i[0] <= i[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def intersect(a: IdSet, b: IdSet) -> IdSet:
    """Both inputs normalised; linear merge."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def contains(ids: IdSet, value: int) -> bool:
    return any(lo <= value <= hi for lo, hi in ids)


def first_at_or_after(ids: IdSet, value: int) -> int | None:
    """The smallest member >= ``value``, or None."""
    for lo, hi in ids:
        if hi >= value:
            return max(lo, value)
    return None


def last_at_or_before(ids: IdSet, value: int) -> int | None:
    """The largest id in ``ids`` that is <= ``value``."""
    best: int | None = None
    for lo, hi in ids:
        if lo > value:
            break
        best = min(hi, value)
    return best


def render(ids: IdSet, limit: int = 4) -> str:
    """``{3..7, 12}`` for messages; long sets are cut."""
    if not ids:
        return "{}"
    parts = [f"{lo}" if lo == hi else f"{lo}..{hi}" for lo, hi in ids[:limit]]
    more = f", ... ({len(ids) - limit} more)" if len(ids) > limit else ""
    return "{" + ", ".join(parts) + more + "}"
