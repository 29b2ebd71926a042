"""The reader API's pure parts: the retry decision over watermark marks and two resolutions, and
the resolution of a table's exact files (an in-memory catalog over real files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import (
    Column,
    DatabaseSnapshot,
    PartitionSnapshot,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.read import (
    DbMark,
    Marks,
    MarksFormatError,
    PinnedTable,
    Snapshot,
    SnapshotError,
    TableNotFound,
    Verdict,
    decide,
    decide_marks,
    marks_from,
    parse_properties,
    read_marks,
    resolve,
    still_there,
)
from streamer.target.job.watermark import Watermark, from_parameters, to_parameters


def _marks(wm: Watermark | None, **dbs: int | None) -> Marks:
    return Marks(wm, {db: DbMark(i is not None, i, None if i is None else "src") for db, i in dbs.items()})


WM = Watermark(50, {"sales": 50, "hr": 50}, source_id="src")


def test_databases_at_or_below_their_watermark_read_at_the_common_watermark() -> None:
    decision = decide_marks(_marks(WM, sales=12, hr=50), ["hr", "sales"])
    assert (decision.verdict, decision.event_id) == (Verdict.READ, 50)


def test_a_read_in_the_middle_of_a_batch_shows_at_least_the_newest_repl_last_id() -> None:
    decision = decide_marks(_marks(WM, sales=61, hr=50), ["hr", "sales"])
    assert (decision.verdict, decision.event_id) == (Verdict.READ, 61)


def test_database_lanes_read_several_databases_only_at_a_batch_end() -> None:
    """With --consistency database a lane may be ahead of another inside one batch: a read of
    several databases waits for the batch's end instead of claiming the newest repl.last.id."""
    lanes = Watermark(50, {"sales": 50, "hr": 50}, source_id="src", consistency="database")
    mid_batch = decide_marks(_marks(lanes, sales=61, hr=50), ["hr", "sales"])
    assert mid_batch.verdict is Verdict.RETRY and "sales" in mid_batch.reason
    at_end = decide_marks(_marks(lanes, sales=12, hr=50), ["hr", "sales"])
    assert (at_end.verdict, at_end.event_id) == (Verdict.READ, 50)
    alone = decide_marks(_marks(lanes, sales=61), ["sales"])  # one database is one lane: in order
    assert (alone.verdict, alone.event_id) == (Verdict.READ, 61)
    assert from_parameters(to_parameters(lanes)) == lanes


def test_a_database_created_after_the_watermark_reads_at_its_own_id() -> None:
    decision = decide_marks(_marks(WM, ops=73), ["ops"])
    assert (decision.verdict, decision.event_id) == (Verdict.READ, 73)


def test_no_watermark_waits_and_says_why() -> None:
    assert decide_marks(_marks(None, sales=1), ["sales"]).verdict is Verdict.WAIT
    # a database not there yet is waited for only when the reader asked for a later event
    later = decide_marks(_marks(None, sales=None), ["sales"], min_event_id=7)
    assert later.verdict is Verdict.WAIT and "none of the databases ['sales'] exists" in later.reason


def test_an_unknown_database_is_missing_at_once_not_waited_for() -> None:
    missing = decide_marks(_marks(None, sales=None), ["sales"])
    assert missing.verdict is Verdict.MISSING and "none of the databases ['sales'] exists" in missing.reason


def test_an_absent_database_does_not_block_the_read() -> None:
    decision = decide_marks(_marks(WM, sales=40, gone=None), ["gone", "sales"])
    assert (decision.verdict, decision.event_id) == (Verdict.READ, 50)


def test_min_event_id_waits_and_names_the_databases_and_ids() -> None:
    decision = decide_marks(_marks(WM, sales=40), ["sales"], min_event_id=55)
    assert decision.verdict is Verdict.WAIT
    assert "waiting for event 55" in decision.reason
    assert "sales repl.last.id 40 watermark 50" in decision.reason
    assert decide_marks(_marks(WM, sales=40), ["sales"], min_event_id=50).verdict is Verdict.READ


def test_a_halted_database_below_min_event_id_fails_at_once() -> None:
    halted = Watermark(30, {"sales": 30, "hr": 50}, frozenset({"sales"}), "src")
    decision = decide_marks(_marks(halted, sales=30), ["sales"], min_event_id=40)
    assert decision.verdict is Verdict.FAIL
    assert "sales" in decision.reason and "30" in decision.reason and "40" in decision.reason
    assert decide_marks(_marks(halted, sales=30), ["sales"]).event_id == 30  # read on its own: fine


def test_a_halted_database_is_read_on_its_own_only() -> None:
    halted = Watermark(30, {"sales": 30, "hr": 50}, frozenset({"sales"}), "src")
    decision = decide_marks(_marks(halted, sales=30, hr=50), ["hr", "sales"])
    assert decision.verdict is Verdict.FAIL
    assert "sales is halted at event 30 while hr went on" in decision.reason
    assert decide_marks(_marks(halted, hr=50), ["hr"]).event_id == 50


def test_a_halted_database_being_re_applied_is_retried() -> None:
    halted = Watermark(30, {"sales": 30}, frozenset({"sales"}), "src")
    assert decide_marks(_marks(halted, sales=33), ["sales"]).verdict is Verdict.RETRY


def test_a_database_applied_out_of_order_is_read_again() -> None:
    """The fence: a batch applies the database grouped per table, so no repl.last.id says what its
    tables show, even alone and at or below the watermark."""
    fenced = Marks(WM, {"sales": DbMark(True, 40, "src", "41"), "hr": DbMark(True, 50, "src")})
    decision = decide_marks(fenced, ["hr", "sales"])
    assert decision.verdict is Verdict.RETRY
    assert decision.reason == "database sales is being applied out of order (batch from event 41): read again"
    assert decide_marks(fenced, ["sales"]).verdict is Verdict.RETRY
    assert decide_marks(fenced, ["hr"]).verdict is Verdict.READ  # only the fenced database waits
    unfenced = Marks(WM, {"sales": DbMark(True, 40, "src")})
    assert decide(unfenced, fenced, [], [], ["sales"]).verdict is Verdict.RETRY  # set during the read


def test_a_halted_database_left_fenced_fails_until_it_is_retried() -> None:
    halted = Watermark(30, {"sales": 30, "hr": 50}, frozenset({"sales"}), "src")
    fenced = Marks(halted, {"sales": DbMark(True, 30, "src", "31"), "hr": DbMark(True, 50, "src")})
    for dbs in (["sales"], ["hr", "sales"]):
        decision = decide_marks(fenced, dbs)
        assert decision.verdict is Verdict.FAIL
        assert "sales halted while being applied out of order (batch from event 31" in decision.reason
        assert "retry the halted database" in decision.reason


def test_a_foreign_database_is_refused() -> None:
    marks = Marks(WM, {"sales": DbMark(True, None, None)})
    assert decide_marks(marks, ["sales"]).verdict is Verdict.FAIL
    marks = Marks(WM, {"sales": DbMark(True, 3, "other")})
    assert decide_marks(marks, ["sales"]).verdict is Verdict.FAIL


def test_an_attempt_is_retried_when_marks_or_tables_moved() -> None:
    table_a, table_b = PinnedTable("sales.a", None), PinnedTable("sales.a", None, locations={"": "x"})
    before = _marks(WM, sales=40)
    moved = _marks(WM, sales=41)
    assert decide(before, moved, [table_a], [table_a], ["sales"]).verdict is Verdict.RETRY
    changed = decide(before, before, [table_a], [table_b], ["sales"])
    assert changed.verdict is Verdict.RETRY and "sales.a" in changed.reason
    assert decide(before, before, [table_a], [table_a], ["sales"]).verdict is Verdict.READ


# --- resolving over real files -----------------------------------------------------------------


def _catalog(tmp_path: Path) -> tuple[MemoryCatalog, Path]:
    catalog = MemoryCatalog()
    params = {LAST_ID_PARAM: "40", REPL_SOURCE_PARAM: "src"}
    catalog.create_database(DatabaseSnapshot("sales", parameters=params))
    catalog.create_database(DatabaseSnapshot("streamer_watermark_src", parameters=to_parameters(WM)))
    location = tmp_path / "sales.db" / "orders"
    cols = [Column("id", "int")]
    sd = StorageDescriptor(f"file://{location}", cols)
    catalog.create_table(TableSnapshot("orders", "sales", sd=sd, partition_keys=[Column("dt", "string")]))
    part = location / "dt=2024-01-01"
    part.mkdir(parents=True)
    (part / "000000_0").write_bytes(b"one")
    (part / ".hidden").write_bytes(b"x")
    (part / "_SUCCESS").write_bytes(b"")
    catalog.add_partitions("sales", "orders", [PartitionSnapshot(
        ["2024-01-01"], "sales", "orders", StorageDescriptor(f"file://{part}", cols),
    )])
    return catalog, part


def test_resolve_pins_the_visible_files_of_each_partition(tmp_path: Path) -> None:
    catalog, _ = _catalog(tmp_path)
    pinned = resolve(catalog, "sales.orders")
    assert list(pinned.partitions) == ["dt=2024-01-01"]
    assert [f.relative for f in pinned.files()] == ["000000_0"]
    assert resolve(catalog, "sales.orders") == pinned  # a second resolution of an unchanged table
    assert resolve(catalog, "sales.missing") == PinnedTable("sales.missing", None)
    assert read_marks(catalog, ["sales"]) == _marks(WM, sales=40)


def test_a_file_replaced_under_the_same_name_is_not_the_pinned_one(tmp_path: Path) -> None:
    catalog, part = _catalog(tmp_path)
    pinned = resolve(catalog, "sales.orders")
    assert still_there(pinned.files())
    replacement = part / ".staged"
    replacement.write_bytes(b"two")
    os.replace(replacement, part / "000000_0")  # how the target publishes: rename into place
    assert not still_there(pinned.files())
    assert resolve(catalog, "sales.orders") != pinned
    (part / "000000_0").unlink()
    assert not still_there(pinned.files())


def test_a_view_is_refused(tmp_path: Path) -> None:
    catalog, _ = _catalog(tmp_path)
    view = TableSnapshot("v", "sales", table_type="VIRTUAL_VIEW", view_original_text="select 1")
    catalog.create_table(view)
    with pytest.raises(Exception, match="view"):
        resolve(catalog, "sales.v")


@given(
    st.dictionaries(st.sampled_from("abcd"), st.integers(0, 100), min_size=1),
    st.dictionaries(st.sampled_from("abcd"), st.integers(0, 100)),
    st.sets(st.sampled_from("abcd")),
    st.integers(0, 100),
)
def test_a_read_is_accepted_only_at_an_id_every_mark_has_reached(
    ids: dict[str, int], through: dict[str, int], halted: set[str], global_id: int
) -> None:
    mark = Watermark(global_id, through, frozenset(halted), "src")
    decision = decide_marks(_marks(mark, **ids), sorted(ids))
    if decision.verdict is Verdict.READ:
        assert decision.event_id is not None
        read_halted = [db for db in ids if db in halted]
        if read_halted:  # a halted database is read alone, at its own watermark
            assert len(ids) == 1 and ids[read_halted[0]] <= decision.event_id
        else:
            assert decision.event_id >= max([global_id, *ids.values()])
    else:
        assert decision.verdict in (Verdict.FAIL, Verdict.RETRY)
        halted_read = set(ids) & halted
        assert (len(ids) > 1 and halted_read) or any(ids[d] > through.get(d, ids[d]) for d in halted_read)


# --- the marks as text, a snapshot's keys ------------------------------------------------------

_KEYS = st.from_regex(r"[a-z][a-z0-9_.]{0,20}", fullmatch=True)
_VALUES = st.from_regex(r"[a-zA-Z0-9_:/.,-]{0,20}", fullmatch=True)


@given(st.dictionaries(_KEYS, _VALUES, max_size=6))
def test_describe_database_properties_parse_back_in_sparks_and_hives_format(params: dict[str, str]) -> None:
    """What DESCRIBE DATABASE EXTENDED prints: Spark ((k,v), (k,v)), Hive {k=v, k=v}; values with
    commas included (streamer.watermark.halted=a,b)."""
    spark = "(" + ", ".join(f"({k},{v})" for k, v in sorted(params.items())) + ")"
    hive = "{" + ", ".join(f"{k}={v}" for k, v in sorted(params.items())) + "}"
    assert parse_properties(spark) == params
    assert parse_properties(hive) == params


def test_the_watermark_record_read_from_its_text_is_the_published_one() -> None:
    halted = Watermark(30, {"sales": 30, "hr": 50}, frozenset({"sales", "hr"}), "src")
    text = "(" + ", ".join(f"({k},{v})" for k, v in sorted(to_parameters(halted).items())) + ")"
    sales = f"((repl.last.id,30), ({REPL_SOURCE_PARAM},src))"
    databases = {"streamer_watermark_src": text, "sales": sales}
    marks = marks_from(lambda db: parse_properties(databases[db]) if db in databases else None, ["sales"])
    assert marks.watermark == halted
    assert marks.databases["sales"] == DbMark(True, 30, "src")
    databases["sales"] = f"{{repl.last.id=30, {REPL_SOURCE_PARAM}=src, {FENCE_PARAM}=31}}"  # Hive's text
    assert marks_from(lambda db: parse_properties(databases[db]), ["sales"]).databases["sales"] == DbMark(
        True, 30, "src", "31"
    )
    with pytest.raises(MarksFormatError, match="neither Spark's"):
        parse_properties("repl.last.id=3")


def test_a_snapshot_names_what_it_holds_when_asked_for_another_table() -> None:
    frames = {"sales.orders": object()}
    snap = Snapshot(50, frames, {"sales.orders": PinnedTable("sales.orders", None)}, {"sales": 50}, 1)  # type: ignore[arg-type]
    assert snap["Sales.Orders"] is frames["sales.orders"]
    with pytest.raises(TableNotFound, match=r"sales.missing is not in this snapshot .*\['sales.orders'\]"):
        snap["sales.missing"]
    with pytest.raises(KeyError):  # a missing key, as a mapping's
        snap["sales.missing"]
    with pytest.raises(SnapshotError, match=r"must be 'db\.table'"):
        snap["orders"]
    assert repr(snap) == "Snapshot(event_id=50, tables=['sales.orders'], attempts=1)"
