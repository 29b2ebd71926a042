"""Which base/delta directories a dump of a Hive 2.x transactional table copies (``acid_dirs.choose``).

The property tests generate a table's history as Hive makes it (transactions that commit, abort or
stay open, each writing ``delta_T_T[_S]``; minor compactions into ``delta_A_B``, major ones into
``base_B``, both below the oldest open transaction; a cleaner removing what they replaced) and
check the choice against a simple model: every committed transaction with data is read exactly once
and nothing of an open or aborted one is."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.metastore.thrift import TxnSnapshot
from streamer.source.acid_dirs import choose, range_validity
from streamer.target.table_reader import visible_dirs
from streamer.warehouse.acid import parse_dir


def snap(hwm: int, open_: set[int] | None = None, aborted: set[int] | None = None) -> TxnSnapshot:
    return TxnSnapshot(hwm, frozenset(open_ or ()), frozenset(aborted or ()))


def test_committed_deltas_above_the_newest_valid_base_in_order() -> None:
    names = ["base_0000005", "base_0000002", "delta_0000001_0000005", "delta_0000006_0000006_0000",
             "delta_0000007_0000007_0000", "delta_0000008_0000008_0000", "_tmp", "junk"]
    got = choose(names, snap(9, open_={8}, aborted={7}))
    assert got.chosen == ["base_0000005", "delta_0000006_0000006_0000"]
    assert got.write_ids == {5, 6}
    assert "open" in got.left_out["delta_0000008_0000008_0000"] or "no committed" in \
        got.left_out["delta_0000008_0000008_0000"]
    assert "obsolete" in got.left_out["base_0000002"]
    assert "obsolete" in got.left_out["delta_0000001_0000005"]


def test_a_base_at_or_above_an_open_transaction_is_not_read_yet() -> None:
    names = ["base_0000004", "base_0000009", "delta_0000005_0000005", "delta_0000006_0000006"]
    got = choose(names, snap(9, open_={7}))
    assert got.chosen == ["base_0000004", "delta_0000005_0000005", "delta_0000006_0000006"]


def test_statements_of_one_transaction_are_all_read() -> None:
    names = ["delta_0000003_0000003_0001", "delta_0000003_0000003_0000", "delta_0000004_0000004_0000"]
    got = choose(names, snap(4))
    assert got.chosen == ["delta_0000003_0000003_0000", "delta_0000003_0000003_0001",
                          "delta_0000004_0000004_0000"]
    assert got.write_ids == {3, 4}


def test_an_aborted_delta_hive_would_read_for_its_row_filter_is_left_out() -> None:
    # Hive reads delta_7_7 here (txn 6, committed elsewhere, makes range 6..7 "some"): its reader
    # then drops txn 7's rows one by one. A whole-directory reader must not read it at all.
    got = choose(["delta_0000005_0000005", "delta_0000007_0000007"], snap(7, aborted={7}))
    assert got.chosen == ["delta_0000005_0000005"]
    assert range_validity(snap(7, aborted={7}), 6, 7) == "some"


def test_a_delta_spanning_an_open_transaction_is_left_out_with_a_warning() -> None:
    got = choose(["delta_0000010_0000020"], snap(20, open_={15}))
    assert got.chosen == []
    assert any("open transactions [15]" in w for w in got.warnings)


def test_a_compacted_delta_spanning_an_aborted_transaction_is_read_whole() -> None:
    got = choose(["delta_0000001_0000004", "delta_0000002_0000002"], snap(4, aborted={2}))
    assert got.chosen == ["delta_0000001_0000004"]
    assert got.write_ids == {1, 2, 3, 4}  # the target reads a delta only when its whole range is known


# --- property: a table's history as Hive writes it -----------------------------------------------


@dataclass
class History:
    dirs: set[str]
    states: dict[int, str]  # txn -> committed / aborted / open
    data: set[int]  # transactions that wrote to this table
    hwm: int


@st.composite
def histories(draw: st.DrawFn) -> History:
    n = draw(st.integers(0, 14))
    kinds = st.sampled_from(["committed", "committed", "aborted", "open"])
    states = {t: draw(kinds) for t in range(1, n + 1)}
    data = {t for t in states if draw(st.booleans())}
    dirs: set[str] = set()
    for t in sorted(data):
        for s in range(draw(st.integers(1, 2))):
            plain = not s and draw(st.booleans())
            dirs.add(f"delta_{t:07d}_{t:07d}" if plain else f"delta_{t:07d}_{t:07d}_{s:04d}")
    low_open = min((t for t, s in states.items() if s == "open"), default=n + 1)
    for _ in range(draw(st.integers(0, 3))):  # compactions, below the oldest open transaction
        if low_open <= 1:
            break
        a = draw(st.integers(1, low_open - 1))
        b = draw(st.integers(a, low_open - 1))
        if draw(st.booleans()):
            if any((p := parse_dir(d)) and p.kind != "base" and p.min_write_id <= b < p.max_write_id
                   for d in dirs):
                continue  # a major compaction reads whole deltas
            new = f"base_{b:07d}"
            dirs.add(new)
            covered = {d for d in dirs if (p := parse_dir(d)) and p.max_write_id <= b and d != new}
        else:
            inside = [d for d in dirs if (p := parse_dir(d)) and p.kind == "delta" and a <= p.min_write_id
                      and p.max_write_id <= b]
            if any((p := parse_dir(d)) and p.kind == "base" and p.max_write_id >= a for d in dirs):
                continue  # Hive compacts deltas above the newest base only
            if any((p := parse_dir(d)) and p.kind == "delta"
                   and (p.min_write_id < a <= p.max_write_id or p.min_write_id <= b < p.max_write_id)
                   for d in dirs):
                continue  # ranges nest or are disjoint, never overlap
            dirs.add(f"delta_{a:07d}_{b:07d}")
            covered = set(inside) - {f"delta_{a:07d}_{b:07d}"}
        if draw(st.booleans()):
            dirs -= covered  # the cleaner ran
    return History(dirs, states, data, n)


def _snapshot(h: History) -> TxnSnapshot:
    return snap(h.hwm, {t for t, s in h.states.items() if s == "open"},
                {t for t, s in h.states.items() if s == "aborted"})


@settings(max_examples=400, deadline=None)
@given(histories())
def test_never_an_open_or_aborted_transactions_directory(h: History) -> None:
    got = choose(sorted(h.dirs), _snapshot(h))
    for name in got.chosen:
        d = parse_dir(name)
        assert d is not None
        ids = range(max(1, d.min_write_id), d.max_write_id + 1)
        assert not any(h.states[t] == "open" for t in ids), name
        if d.kind != "base":
            assert any(h.states[t] == "committed" for t in ids), name


@settings(max_examples=400, deadline=None)
@given(histories())
def test_every_committed_write_is_read_exactly_once(h: History) -> None:
    """The model: a committed transaction's data is in exactly one chosen range (its statements'
    deltas all read); a base stands for everything at or below it."""
    got = choose(sorted(h.dirs), _snapshot(h))
    parsed = [d for n in got.chosen if (d := parse_dir(n)) is not None]
    base = max((d.max_write_id for d in parsed if d.kind == "base"), default=0)
    ranges = {(d.min_write_id, d.max_write_id) for d in parsed if d.kind != "base"}
    for t in sorted(h.data):
        if h.states[t] != "committed" or t <= base:
            continue
        holders = [r for r in ranges if r[0] <= t <= r[1]]
        assert len(holders) == 1, (t, sorted(h.dirs), got.chosen)
    for lo, hi in ranges:
        assert lo > base, (lo, hi, base)
    assert got.write_ids == ({base} if base else set()) | {t for lo, hi in ranges for t in range(lo, hi + 1)}


@settings(max_examples=300, deadline=None)
@given(histories())
def test_a_target_reads_exactly_the_dumped_directories(h: History) -> None:
    """What the target's reader makes of the dump (only the chosen directories copied, the record's
    write ids committed) is the dump: nothing dropped, nothing else."""
    got = choose(sorted(h.dirs), _snapshot(h))
    assert sorted(visible_dirs(got.chosen, got.write_ids)) == sorted(got.chosen)
