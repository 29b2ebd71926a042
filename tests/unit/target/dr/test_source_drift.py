"""The pure side of ``streamer verify --against-source``: what the source moved since the replica's
position, and each difference of a replica from the live source with its cause."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import Event
from streamer.hive.decode import decode_row
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
    Coverage,
    CoverageBook,
    Creation,
    TablePair,
    changed_since,
    checked_units,
    compare_tables,
    counts,
    is_creation,
    is_removal,
    missing_on_replica,
    still_safe,
    unit,
    units,
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


# --- partition granularity, repairs judged again, coverage (issue 39 item 4) ----------------------

FIXTURES = Path(__file__).parents[3] / "fixtures" / "hive-messages"  # real messages, README there


def real_row(event_id: int, name: str, kind: str) -> NotificationRow:
    """A row holding a real Hive message (HDP 3.1 / Doris fixtures), with its own db and table."""
    message = (FIXTURES / name).read_text()
    body = json.loads(message)
    return NotificationRow(event_id, 0, kind, message, db_name=body["db"], table_name=body["table"],
                           message_format="json-0.2")


def test_partition_events_of_real_hive_messages_move_only_their_partitions() -> None:
    rows = [real_row(11, "add_partition_1.json", "ADD_PARTITION"),
            real_row(12, "drop_partition_1.json", "DROP_PARTITION"),
            real_row(13, "alter_partition_2.json", "ALTER_PARTITION")]
    moved = changed_since(rows, {"tmp_db": 10, "fin_ads_online": 12}, lambda r: decode_row(r, "s"))
    assert moved == {
        "tmp_db": frozenset({"notification_test/day=2021-03-18", "notification_test/day=2021-03-17"}),
        "fin_ads_online": frozenset({"ads_p_u_behavior_record_ice_statistics_pdi/pday=20230131"}),
    }
    # without a decoder (or with one that fails) the whole table moves, as before
    assert changed_since(rows[:1], {"tmp_db": 10}) == {"tmp_db": frozenset({"notification_test"})}

    def broken(_: NotificationRow) -> Event:
        raise ValueError("undecodable")

    assert changed_since(rows[:1], {"tmp_db": 10}, broken) == {"tmp_db": frozenset({"notification_test"})}


def test_a_table_event_moves_the_whole_table_even_with_a_decoder() -> None:
    rows = [real_row(11, "alter_table_1.json", "ALTER_TABLE")]
    assert changed_since(rows, {"tmp_db": 10}, lambda r: decode_row(r, "s")) == {
        "tmp_db": frozenset({"notification_test", WHOLE_DATABASE})}


@given(tables, tables, st.sets(st.sampled_from(["dt=1", "dt=2", "dt=3"])))
def test_a_busy_tables_quiet_partitions_are_still_judged(
    source: dict[str, dict[str, int]], replica: dict[str, dict[str, int]], busy: set[str]
) -> None:
    pair = TablePair("t", table(source, "src"), table(replica, "rep"))
    moved = frozenset(unit("t", p) for p in busy)
    everything = compare_tables("a", [pair], frozenset())
    judged = compare_tables("a", [pair], moved)
    # exactly the drifts of the quiet partitions: none of a busy one, none lost of a quiet one
    assert judged == [d for d in everything if d.unit.partition("/")[2] not in busy]
    assert all(d.unit in {unit("t", p) for p in set(source) | set(replica)} for d in everything)
    checked = checked_units([pair], moved)
    # a table with no partition is one unit (its schema is judged)
    assert checked == ({unit("t", p) for p in set(source) - busy} if source else {"t"})
    assert units([pair]) == ({unit("t", p) for p in source} if source else {"t"})
    assert counts([pair], moved).partitions == len(set(source) - busy)
    plan, _ = missing_on_replica([pair], moved)
    assert {p for c in plan for p in c.partitions} == set(source) - set(replica) - busy


@given(tables, tables, st.sets(st.sampled_from(["t", "t/dt=1", "t/dt=2", "t/dt=3", "gone", WHOLE_DATABASE])))
def test_a_repair_keeps_only_what_no_later_event_named(
    source: dict[str, dict[str, int]], replica: dict[str, dict[str, int]], later: set[str]
) -> None:
    pairs = [TablePair("t", table(source, "src"), table(replica, "rep")),
             TablePair("gone", table({}, "x"), None)]
    drifts = compare_tables("a", pairs, frozenset())
    plan, _ = missing_on_replica(pairs, frozenset())
    moved = frozenset(later)
    kept, creations = still_safe(drifts, plan, moved)
    # the same as judging afresh with the later events known: nothing named since is touched
    assert kept == compare_tables("a", pairs, moved)
    assert creations == missing_on_replica(pairs, moved)[0]


def test_coverage_counts_partitions_and_the_time_every_one_was_last_judged() -> None:
    book = CoverageBook()
    first = book.record("a", {"t/dt=1", "t/dt=2", "u"}, {"t/dt=1", "u"}, now=100.0)
    assert (first.checked, first.total, first.full_pass) == (2, 3, 100.0)  # dt=2 busy, seen at 100
    assert round(first.ratio, 3) == 0.667
    second = book.record("a", {"t/dt=1", "t/dt=2", "u", "t/dt=3"}, {"t/dt=1", "u", "t/dt=3"}, now=200.0)
    assert (second.checked, second.full_pass) == (3, 100.0)  # dt=2, busy since 100, holds it back
    third = book.record("a", {"t/dt=2", "t/dt=3", "u"}, {"t/dt=2", "t/dt=9"}, now=300.0)  # dt=1 dropped
    assert (third.checked, third.total, third.full_pass) == (1, 3, 200.0)  # dt=9 is not present
    assert book.record("b", set(), set(), now=400.0) == Coverage(0, 0, 400.0)
    assert Coverage(0, 0, 1.0).ratio == 1.0
