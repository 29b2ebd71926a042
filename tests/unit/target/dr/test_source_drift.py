"""The pure side of ``streamer verify --against-source``: what the source moved since the replica's
position, and each difference of a replica from the live source with its cause."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from streamer.hive.notification import NotificationRow
from streamer.replay.state import UNPARTITIONED, TableMeta
from streamer.target.dr.drift import (
    CHECKSUM,
    FILE,
    PARTITION,
    SCHEMA,
    SIZE,
    TABLE,
    ObservedFile,
    ObservedTable,
)
from streamer.target.dr.source_drift import (
    WHOLE_DATABASE,
    Creation,
    TablePair,
    changed_since,
    compare_tables,
    counts,
    is_creation,
    is_removal,
    missing_on_replica,
)

META = TableMeta(table_type="MANAGED_TABLE", columns=(("id", "int"),), partition_keys=(("dt", "string"),),
                 parameters=())


def row(event_id: int, db: str, table: str | None, kind: str = "INSERT") -> NotificationRow:
    return NotificationRow(event_id, 0, kind, "{}", db_name=db, table_name=table)


def at(where: str, part: str) -> str:
    return f"file:///{where}/{part}" if part != UNPARTITIONED else f"file:///{where}"


def table(
    files: dict[str, dict[str, int]], where: str, digests: dict[str, str] | None = None
) -> ObservedTable:
    parts = {
        part: {p: ObservedFile(f"{at(where, part)}/{p}", size,
                               (digests or {}).get(p), "sha256" if digests and p in digests else None)
               for p, size in names.items()}
        for part, names in files.items()
    }
    return ObservedTable(META, parts, {part: at(where, part) for part in files})


def test_changed_since_names_tables_of_later_events_only_and_whole_database_for_untabled_ones() -> None:
    rows = [row(5, "a", "t1"), row(6, "A", "T2"), row(7, "a", None, "ALTER_DATABASE"), row(8, "b", "t3"),
            row(3, "b", "old"), row(9, "c", "x")]
    assert changed_since(rows, {"a": 5, "b": 4}) == {
        "a": frozenset({"t2", WHOLE_DATABASE}), "b": frozenset({"t3"}),
    }
    renamed = changed_since([row(10, "a", "t", "ALTER_TABLE")], {"a": 1})
    assert renamed == {"a": frozenset({"t", WHOLE_DATABASE})}


names = st.dictionaries(st.sampled_from(["part-0", "part-1", "sub/part-2", "part-3"]),
                        st.integers(0, 50), max_size=4)
tables = st.dictionaries(st.sampled_from(["dt=1", "dt=2", "dt=3"]), names, max_size=3)


@given(tables)
def test_a_replica_equal_to_its_source_has_no_drift(files: dict[str, dict[str, int]]) -> None:
    digests = {p: f"h{p}" for names in files.values() for p in names}
    pair = TablePair("t", table(files, "src", digests), table(files, "rep", digests))
    assert compare_tables("a", [pair], frozenset()) == []
    seen = counts([pair], frozenset())
    assert (seen.tables, seen.files) == (1, sum(len(n) for n in files.values()))
    assert seen.bytes == sum(sum(n.values()) for n in files.values())


@given(tables, tables)
def test_every_file_and_partition_difference_is_reported_unless_the_table_moved(
    source: dict[str, dict[str, int]], replica: dict[str, dict[str, int]]
) -> None:
    pair = TablePair("t", table(source, "src"), table(replica, "rep"))
    drifts = compare_tables("a", [pair], frozenset())
    by = {(d.kind, d.obj) for d in drifts}
    want = {(PARTITION, f"a.t/{p}") for p in set(source) ^ set(replica)}
    for part in set(source) & set(replica):
        s, r = source[part], replica[part]
        want |= {(FILE, f"a.t/{part}/{p}") for p in set(s) ^ set(r)}
        want |= {(SIZE, f"a.t/{part}/{p}") for p in set(s) & set(r) if s[p] != r[p]}
    assert by == want
    assert all(d.repair is not None for d in drifts if d.kind in (FILE, SIZE))
    assert compare_tables("a", [pair], frozenset({"t"})) == []


def test_causes_name_the_file_and_repairs_copy_into_the_replica_directory() -> None:
    source = table({UNPARTITIONED: {"part-0001": 10, "part-0002": 5, "part-0003": 7}}, "src",
                   {"part-0002": "aa", "part-0003": "bb"})
    replica = table({UNPARTITIONED: {"part-0002": 5, "part-0003": 7, "stray": 1}}, "rep",
                    {"part-0002": "aa", "part-0003": "cc"})
    drifts = {d.obj: d for d in compare_tables("a", [TablePair("t", source, replica)], frozenset())}
    missing, stray, changed = drifts["a.t/part-0001"], drifts["a.t/stray"], drifts["a.t/part-0003"]
    assert missing.detail == "file part-0001 missing on the replica" and not is_removal(missing)
    assert missing.repair is not None and missing.repair.directory == "file:///rep"
    assert missing.repair.ref.uri == "file:///src/part-0001"
    assert stray.detail == "file stray on the replica, not on the source" and is_removal(stray)
    assert changed.kind == CHECKSUM and "content differs" in changed.detail
    assert changed.repair is not None and changed.repair.ref.checksum == "bb"
    assert set(drifts) == {"a.t/part-0001", "a.t/stray", "a.t/part-0003"}


def test_tables_missing_on_either_side_and_schema_differences() -> None:
    t = table({}, "x")
    other = dataclasses.replace(t, meta=dataclasses.replace(META, columns=(("id", "bigint"),)))
    pairs = [TablePair("gone", t, None), TablePair("new", None, t), TablePair("s", t, other)]
    drifts = {(d.kind, d.obj, d.detail) for d in compare_tables("a", pairs, frozenset())}
    assert (TABLE, "a.gone", "table missing on the replica") in drifts
    assert (TABLE, "a.new", "table missing on the source") in drifts
    assert any(k == SCHEMA and o == "a.s" and "columns differ" in d for k, o, d in drifts)
    # a database-level event after the position: its table set is not judged
    assert {d.kind for d in compare_tables("a", pairs, frozenset({WHOLE_DATABASE}))} == {SCHEMA}


@given(tables, tables, st.booleans())
def test_repair_creates_exactly_the_partitions_and_tables_the_replica_lacks(
    source: dict[str, dict[str, int]], replica: dict[str, dict[str, int]], whole_moved: bool
) -> None:
    pairs = [TablePair("t", table(source, "src"), table(replica, "rep")),
             TablePair("gone", table(source, "x"), None), TablePair("stray", None, table(replica, "rep"))]
    moved = frozenset({WHOLE_DATABASE}) if whole_moved else frozenset()
    plan, skipped = missing_on_replica(pairs, moved)
    want = [] if whole_moved else [Creation("gone")]
    if set(source) - set(replica):
        want.append(Creation("t", tuple(sorted(set(source) - set(replica)))))
    assert sorted(plan, key=lambda c: c.table) == sorted(want, key=lambda c: c.table) and skipped == []
    # every creation answers a drift the check reports, and only those ("on the replica, not on the
    # source" objects are reported, never created nor removed)
    created = {f"a.{c.table}" for c in plan if not c.partitions} | {
        f"a.{c.table}/{p}" for c in plan for p in c.partitions}
    assert {d.obj for d in compare_tables("a", pairs, moved) if is_creation(d)} == created
    assert missing_on_replica(pairs, moved | {"t", "gone"})[0] == []


def test_transactional_tables_and_moved_partition_keys_are_not_created() -> None:
    acid_meta = dataclasses.replace(META, parameters=(("transactional", "true"),))
    acid = dataclasses.replace(table({"dt=1": {"f": 1}}, "src"), meta=acid_meta)
    other_keys = dataclasses.replace(table({}, "rep"), meta=dataclasses.replace(META, partition_keys=()))
    rekeyed = TablePair("rekeyed", table({"dt=1": {"f": 1}}, "src"), other_keys)
    pairs = [TablePair("acid", acid, None), rekeyed]
    plan, skipped = missing_on_replica(pairs, frozenset())
    assert plan == [] and len(skipped) == 1 and skipped[0].startswith("acid: transactional")


def test_a_partition_only_the_source_has_stays_missing_after_hashing() -> None:
    from streamer.target.dr.source_check import _hashed

    source = table({"dt=1": {"f": 1}, "dt=2": {"g": 2}}, "src")
    pair = TablePair("t", source, table({"dt=2": {"g": 3}}, "rep"))
    hashed = _hashed(pair, 1 << 20)  # sizes differ: nothing is read
    assert hashed.replica is not None and set(hashed.replica.partitions) == {"dt=2"}
    assert [(d.kind, d.obj) for d in compare_tables("a", [hashed], frozenset())] == [
        (PARTITION, "a.t/dt=1"), (SIZE, "a.t/dt=2/g")]
