"""The pure ACID visibility model, its file, and the reader's directory rules."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.target.state.visibility import (
    ACID_PARAM,
    ACID_PROPERTIES_PARAM,
    LEGACY_VISIBILITY_PATH,
    MAX_FINISHED_TXNS,
    MAX_OPEN_TXNS,
    VISIBILITY_DIR,
    AcidStateError,
    TxnState,
    Visibility,
    VisibilitySnapshot,
    VisibilityStore,
    from_ranges,
    load_visibility,
    source_file_name,
    source_parameters,
    target_parameters,
    to_ranges,
    visible_write_ids,
)
from streamer.target.table_reader import ReadError, committed_layout, committed_write_ids, visible_dirs

ids = st.frozensets(st.integers(min_value=1, max_value=300), max_size=60)


@given(ids)
def test_ranges_round_trip(write_ids: frozenset[int]) -> None:
    ranges = to_ranges(write_ids)
    assert from_ranges(ranges) == write_ids
    assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(ranges))  # maximal runs


@given(st.lists(st.integers(1, 50), max_size=10), st.lists(st.integers(1, 50), max_size=10))
def test_opening_twice_maps_once(first: list[int], second: list[int]) -> None:
    once = Visibility().opened("s", first).opened("s", second)
    assert once.opened("s", first).opened("s", second) == once
    targets = [t.target_id for t in once.txns.get("s", {}).values()]
    assert sorted(targets) == list(range(1, len(set(first) | set(second)) + 1))
    assert once.next_txn == len(targets) + 1


@given(st.dictionaries(st.sampled_from(["a.t", "b.u", "c.v"]), ids, max_size=3), st.integers(1, 9))
def test_commit_is_idempotent_set_union(writes: dict[str, frozenset[int]], txn: int) -> None:
    before = Visibility(tables={"a.t": frozenset({1})}).opened("s", [txn])
    once = before.committed("s", txn, writes)
    assert once.committed("s", txn, writes) == once
    for key, w in writes.items():
        assert set(once.write_ids(key)) == set(w) | set(before.write_ids(key))
    assert once.txn("s", txn) is not None and once.txn("s", txn).state is TxnState.COMMITTED  # type: ignore[union-attr]
    assert once.open_count() == 0


def test_abort_of_unknown_or_finished_txn_changes_nothing() -> None:
    state = Visibility().opened("s", [1]).committed("s", 1, {"a.t": [1]})
    assert state.aborted("s", 1) == state
    assert state.aborted("s", 2) == state
    assert state.aborted("other", 1) == state


def test_sources_have_separate_txn_maps_on_one_sequence() -> None:
    state = Visibility().opened("s1", [7]).opened("s2", [7])
    assert state.txn("s1", 7) != state.txn("s2", 7)
    assert {state.txn("s1", 7).target_id, state.txn("s2", 7).target_id} == {1, 2}  # type: ignore[union-attr]


def test_finished_txns_are_pruned_but_open_ones_kept() -> None:
    state = Visibility().opened("s", [0])
    for txn in range(1, MAX_FINISHED_TXNS + 11):
        state = state.opened("s", [txn]).committed("s", txn, {"a.t": [txn]})
    assert len(state.txns["s"]) == MAX_FINISHED_TXNS + 1
    assert state.txn("s", 0) is not None and state.txn("s", 1) is None
    assert state.write_ids("a.t") == list(range(1, MAX_FINISHED_TXNS + 11))


def test_open_txns_are_bounded_per_source_and_a_forgotten_one_still_commits() -> None:
    """Issue 38 item 7: OPEN_TXNs that never finish no longer grow the file without end; the oldest
    are forgotten, and a forgotten transaction's COMMIT still makes its writes visible."""
    state = Visibility().opened("other", [1, 2])
    for first in range(0, MAX_OPEN_TXNS + 2_000, 1_000):
        state = state.opened("s", range(first, first + 1_000))
    assert state.open_count() == MAX_OPEN_TXNS + 2  # this source's bound, the other's two kept
    assert state.txn("s", 0) is None and state.txn("s", MAX_OPEN_TXNS + 1_999) is not None
    assert state.txn("other", 1) is not None
    state = state.committed("s", 0, {"a.t": [7]}).aborted("s", 1)
    assert state.write_ids("a.t") == [7]
    assert len(json.dumps(state.to_json())) < 2_000_000


def test_table_rename_and_reset() -> None:
    state = Visibility(tables={"a.t": frozenset({1, 2}), "a.u": frozenset({9})})
    moved = state.copy_table("a.t", "a.u").reset_table("a.t")
    assert moved.write_ids("a.u") == [1, 2] and moved.write_ids("a.t") == []
    assert state.copy_table("a.none", "a.u") == state


def test_parameters_move_to_streamer_keys_and_back() -> None:
    src = {"transactional": "true", "transactional_properties": "insert_only", "x": "1"}
    tgt = target_parameters(src)
    assert tgt == {ACID_PARAM: "true", ACID_PROPERTIES_PARAM: "insert_only", "x": "1"}
    assert source_parameters(tgt) == src
    assert target_parameters({"TRANSACTIONAL": "true"}) == {ACID_PARAM: "true"}


def test_store_round_trips_and_replaces_atomically(tmp_path: Path) -> None:
    root = str(tmp_path / "wh")
    store = VisibilityStore(root, "s")
    assert store.current() == Visibility()
    state = store.update(lambda v: v.opened("s", [3]).committed("s", 3, {"a.t": [1, 2, 5]}))
    assert load_visibility(root, "s") == state
    assert visible_write_ids(root, "A", "T", {REPL_SOURCE_PARAM: "s"}) == [1, 2, 5]
    name = source_file_name("s")
    raw = json.loads((tmp_path / "wh" / VISIBILITY_DIR / name).read_text())
    assert raw["tables"] == {"a.t": [[1, 2], [5, 5]]}
    assert [p.name for p in (tmp_path / "wh" / VISIBILITY_DIR).iterdir()] == [name]  # no temp left
    assert VisibilityStore(root, "s").current() == state  # a new process sees the same
    assert load_visibility(root, "other") == Visibility()  # another source's file: none yet


def test_a_store_writes_its_own_source_only(tmp_path: Path) -> None:
    store = VisibilityStore(str(tmp_path), "s")
    with pytest.raises(AcidStateError, match="transactions of \\['other'\\]"):
        store.update(lambda v: v.opened("other", [1]))
    assert not (tmp_path / VISIBILITY_DIR).exists()


def test_source_file_names_are_distinct_and_plain() -> None:
    ids = ["src", "SRC", "a/b", "a_b", "a b", "..", ".", "", "x" * 300, "x" * 301, "é", "e"]
    names = [source_file_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert len({n.lower() for n in names}) == len(ids)  # case-insensitive filesystems too
    assert all(re.fullmatch(r"[A-Za-z0-9._-]{0,64}-[0-9a-f]{16}\.json", n) for n in names), names
    assert source_file_name("src-a").startswith("src-a-")  # an operator finds a source's file by its id


def test_readers_find_a_table_by_its_source(tmp_path: Path) -> None:
    root = str(tmp_path)
    VisibilityStore(root, "s1").update(lambda v: v.committed("s1", 1, {"a.t": [1]}))
    VisibilityStore(root, "s2").update(lambda v: v.committed("s2", 1, {"b.u": [7]}))
    assert visible_write_ids(root, "a", "t", {REPL_SOURCE_PARAM: "s1"}) == [1]
    assert visible_write_ids(root, "b", "u", {REPL_SOURCE_PARAM: "s2"}) == [7]
    assert visible_write_ids(root, "a", "t", {REPL_SOURCE_PARAM: "s2"}) == []
    with pytest.raises(AcidStateError, match=f"a.t has no {REPL_SOURCE_PARAM}"):
        visible_write_ids(root, "a", "t", {ACID_PARAM: "true"})

    snapshot = VisibilitySnapshot(root)
    assert snapshot.write_ids("a", "t", {REPL_SOURCE_PARAM: "s1"}) == [1]
    VisibilityStore(root, "s1").update(lambda v: v.committed("s1", 2, {"a.t": [2], "a.v": [2]}))
    # one instant of each source: a table read later sees what its source's first table saw
    assert snapshot.write_ids("a", "v", {REPL_SOURCE_PARAM: "s1"}) == []
    assert snapshot.write_ids("b", "u", {REPL_SOURCE_PARAM: "s2"}) == [7]
    assert VisibilitySnapshot(root).write_ids("a", "v", {REPL_SOURCE_PARAM: "s1"}) == [2]


def test_a_source_without_a_file_reads_its_part_of_the_single_file(tmp_path: Path) -> None:
    single = (Visibility().opened("s1", [1, 2]).committed("s1", 1, {"a.t": [1]})
              .opened("s2", [1]).committed("s2", 1, {"b.u": [4]}))
    legacy = tmp_path / LEGACY_VISIBILITY_PATH
    legacy.parent.mkdir(parents=True)
    legacy.write_text(json.dumps(single.to_json()))
    mine = load_visibility(str(tmp_path), "s1")
    assert mine == single.for_source("s1")
    assert set(mine.txns) == {"s1"} and mine.next_txn == single.next_txn and mine.open_count() == 1
    assert mine.write_ids("a.t") == [1] and mine.write_ids("b.u") == [4]  # tables: all of them
    assert load_visibility(str(tmp_path), "s3") == Visibility(tables=single.tables, next_txn=single.next_txn)

    after = VisibilityStore(str(tmp_path), "s1").update(lambda v: v.committed("s1", 2, {"a.t": [2]}))
    assert load_visibility(str(tmp_path), "s1") == after and after.write_ids("a.t") == [1, 2]
    assert json.loads(legacy.read_text()) == single.to_json()  # never written
    assert load_visibility(str(tmp_path), "s2") == single.for_source("s2")


def test_malformed_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / VISIBILITY_DIR / source_file_name("s")
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "tables": {"a.t": [[5, 1]]}, "next_txn": 1}')
    with pytest.raises(AcidStateError, match=f"{source_file_name('s')} is malformed"):
        load_visibility(str(tmp_path), "s")
    legacy = tmp_path / LEGACY_VISIBILITY_PATH
    legacy.write_text("{")
    with pytest.raises(AcidStateError, match=r"cannot read ACID visibility file .*visible\.json"):
        load_visibility(str(tmp_path), "other")


# --- reader's directory rules ---


def test_visible_dirs_skip_aborted_and_open_writes() -> None:
    names = ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000", "delta_0000003_0000003_0001",
             "delta_0000003_0000003_0000", "delta_0000001_0000003", "junk", "base_x"]
    assert visible_dirs(names, {1, 3}) == [
        "delta_0000001_0000001_0000", "delta_0000003_0000003_0000", "delta_0000003_0000003_0001"
    ]
    assert visible_dirs([*names, "base_0000002"], {1, 2, 3}) == ["base_0000002", "delta_0000001_0000003"]
    assert visible_dirs(names, {1, 2, 3}) == ["delta_0000001_0000003"]
    assert visible_dirs(["base_0000004", "delta_0000001_0000001_0000"], {1}) == ["delta_0000001_0000001_0000"]
    with pytest.raises(ReadError, match="delete deltas"):
        visible_dirs(["delete_delta_0000001_0000001_0000"], {1})
    assert visible_dirs(["delete_delta_0000001_0000001_0000"], set()) == []


def test_committed_layout_per_partition(tmp_path: Path) -> None:
    table = tmp_path / "a.db" / "t"
    for rel in ["p=1/q=x/delta_0000001_0000001_0000", "p=1/q=x/delta_0000002_0000002_0000",
                "p=2/q=y/delta_0000002_0000002_0000", "p=3/q=z", "p=1/q=x/.hidden", "_tmp/q=1"]:
        (table / rel).mkdir(parents=True)
    layout = committed_layout(str(table), {1}, 2)
    assert layout == {"p=1/q=x": ["delta_0000001_0000001_0000"], "p=2/q=y": [], "p=3/q=z": []}
    assert committed_write_ids(layout) == {"p=1/q=x": [1], "p=2/q=y": [], "p=3/q=z": []}
    assert committed_layout(str(tmp_path / "missing"), {1}, 0) == {}
