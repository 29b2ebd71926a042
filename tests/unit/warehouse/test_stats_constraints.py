"""Constraints, column statistics, basic statistics and event-less external files of the warehouse."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import (
    AddConstraintsPayload,
    AlterPartitionPayload,
    AlterTablePayload,
    Column,
    DeleteColumnStatsPayload,
    DropConstraintPayload,
    Event,
    UpdateColumnStatsPayload,
)
from streamer.hive.decode import decode_row
from streamer.warehouse import AlreadyExistsError, NoSuchObjectError, Warehouse, WarehouseError
from streamer.warehouse import statistics as st_mod

COLS = [Column("id", "bigint"), Column("name", "string"), Column("amount", "double"), Column("ok", "boolean")]
DT = [Column("dt", "string")]
ROWS = [
    {"id": 1, "name": "ab", "amount": 1.5, "ok": True},
    {"id": 3, "name": "abcd", "amount": None, "ok": False},
    {"id": 3, "name": None, "amount": -2.25, "ok": None},
]


def events_after(wh: Warehouse, after: int) -> list[Event]:
    return [decode_row(r) for r in wh.notifications(after)]


@pytest.fixture
def wh(warehouse: Warehouse) -> Warehouse:
    warehouse.create_database("s")
    warehouse.create_table("s", "orders", COLS, DT)
    warehouse.create_table("s", "customers", COLS)
    return warehouse


# --- pure statistics --------------------------------------------------------------------------


def test_column_statistics_are_exact_and_only_of_the_columns_kind() -> None:
    stats = {s.column: s for s in st_mod.table_statistics(COLS, ROWS)}
    assert (stats["id"].kind, stats["id"].num_nulls, stats["id"].num_distinct) == ("LONG", 0, 2)
    assert (stats["id"].low_value, stats["id"].high_value, stats["id"].max_length) == ("1", "3", None)
    assert (stats["name"].avg_length, stats["name"].max_length, stats["name"].num_nulls) == (3.0, 4, 1)
    assert stats["name"].low_value is None
    assert (stats["amount"].low_value, stats["amount"].high_value) == ("-2.25", "1.5")
    assert (stats["ok"].num_trues, stats["ok"].num_falses, stats["ok"].num_nulls) == (1, 1, 1)
    assert stats["ok"].num_distinct is None


@given(st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=30))
def test_long_statistics_property(values: list[int | None]) -> None:
    s = st_mod.column_statistics(Column("x", "bigint"), values)
    present = [v for v in values if v is not None]
    assert s.num_nulls == len(values) - len(present)
    assert s.num_distinct == len(set(present))
    assert s.low_value == (str(min(present)) if present else None)
    assert s.high_value == (str(max(present)) if present else None)


@given(st.lists(st.one_of(st.none(), st.text(max_size=8)), max_size=30))
def test_string_statistics_property(values: list[str | None]) -> None:
    s = st_mod.column_statistics(Column("x", "string"), values)
    lengths = [len(v.encode()) for v in values if v is not None]
    assert s.max_length == max(lengths, default=0)
    assert s.avg_length == pytest.approx(sum(lengths) / len(lengths) if lengths else 0.0)


def test_accurate_flags_columns_and_basic_stats() -> None:
    text = st_mod.accurate({}, basic=True, columns=["b", "a"])
    assert json.loads(text) == {"BASIC_STATS": "true", "COLUMN_STATS": {"a": "true", "b": "true"}}
    assert json.loads(st_mod.accurate({st_mod.ACCURATE: text}, drop_columns=["a", "b"])) == {
        "BASIC_STATS": "true"
    }


# --- constraints ------------------------------------------------------------------------------


def test_primary_and_foreign_keys_write_hive_events(wh: Warehouse) -> None:
    start = wh.current_event_id()
    pk = wh.add_primary_key("s", "customers", "pk_cust", ["id"], rely=True)
    fk = wh.add_foreign_key("s", "orders", "fk_cust", ["id"], "customers")
    events = events_after(wh, start)
    assert [str(e.event_type) for e in events] == ["ADD_PRIMARYKEY", "ADD_FOREIGNKEY"]
    assert events[0].payload == AddConstraintsPayload(pk) and (events[0].db, events[0].table) == (
        "s",
        "customers",
    )
    # Hive keys a foreign key's event by the referenced (primary key) table
    assert events[1].payload == AddConstraintsPayload(fk) and events[1].table == "customers"
    assert fk[0].ref_name == "pk_cust" and fk[0].ref_column == "id" and pk[0].rely
    assert wh.constraints("s", "orders") == fk
    with pytest.raises(WarehouseError, match="reference it"):
        wh.drop_constraint("s", "customers", "pk_cust")
    event_id = wh.drop_constraint("s", "orders", "fk_cust")
    assert events_after(wh, event_id - 1)[0].payload == DropConstraintPayload("s", "orders", "fk_cust")
    assert wh.constraints("s", "orders") == []


def test_other_constraint_kinds_and_refusals(wh: Warehouse) -> None:
    start = wh.current_event_id()
    wh.add_unique("s", "customers", "uk_name", ["name", "id"])
    wh.add_not_null("s", "customers", "nn_name", "name")
    wh.add_default("s", "customers", "df_ok", "ok", "TRUE")
    wh.add_check("s", "customers", "ck_amount", "amount", "amount >= 0")
    kinds = [str(e.event_type) for e in events_after(wh, start)]
    assert kinds == [
        "ADD_UNIQUECONSTRAINT",
        "ADD_NOTNULLCONSTRAINT",
        "ADD_DEFAULTCONSTRAINT",
        "ADD_CHECKCONSTRAINT",
    ]
    check = [c for c in wh.constraints("s", "customers") if c.kind == "CHECK"]
    assert check[0].value == "amount >= 0"
    before = wh.current_event_id()
    with pytest.raises(AlreadyExistsError):
        wh.add_not_null("s", "orders", "nn_name", "id")  # names are unique across the metastore
    with pytest.raises(WarehouseError, match="unknown"):
        wh.add_unique("s", "orders", "uk_x", ["nope"])
    with pytest.raises(WarehouseError, match="no primary key"):
        wh.add_foreign_key("s", "orders", "fk_x", ["id"], "customers")
    with pytest.raises(NoSuchObjectError):
        wh.drop_constraint("s", "orders", "missing")
    assert wh.current_event_id() == before  # refusals write nothing


def test_constraints_follow_renames_and_go_with_drops(wh: Warehouse) -> None:
    wh.add_primary_key("s", "customers", "pk_c", ["id"])
    wh.add_foreign_key("s", "orders", "fk_c", ["id"], "customers")
    wh.rename_table("s", "customers", "clients")
    assert [c.table for c in wh.constraints("s", "clients")] == ["clients"]
    assert wh.constraints("s", "orders")[0].ref_table == "clients"
    wh.drop_table("s", "orders")
    wh.create_table("s", "orders", COLS, DT)
    assert wh.constraints("s", "orders") == []


# --- column statistics ------------------------------------------------------------------------


def test_table_column_statistics_event_carries_stats_and_params(wh: Warehouse) -> None:
    wh.insert("s", "customers", ROWS)
    event_id = wh.update_column_statistics("s", "customers")
    (event,) = events_after(wh, event_id - 1)
    assert isinstance(event.payload, UpdateColumnStatsPayload)
    assert event.payload.statistics == st_mod.table_statistics(COLS, ROWS)
    assert event.payload.is_table_level and event.payload.partition_values == []
    flags = json.loads(wh.table("s", "customers").parameters[st_mod.ACCURATE])
    assert flags["COLUMN_STATS"] == {"amount": "true", "id": "true", "name": "true", "ok": "true"}
    assert event.payload.parameters[st_mod.ACCURATE] == wh.table("s", "customers").parameters[st_mod.ACCURATE]
    assert [s.column for s in wh.column_statistics("s", "customers")] == ["amount", "id", "name", "ok"]


def test_partition_column_statistics_and_deletes(wh: Warehouse) -> None:
    wh.insert("s", "orders", ROWS, {"dt": "d1"})
    wh.insert("s", "orders", ROWS[:1], {"dt": "d2"})
    event_id = wh.update_column_statistics("s", "orders", {"dt": "d1"}, columns=["id", "name"])
    (event,) = events_after(wh, event_id - 1)
    assert str(event.event_type) == "UPDATE_PART_COL_STAT_EVENT"
    assert isinstance(event.payload, UpdateColumnStatsPayload)
    assert event.payload.partition_values == ["d1"] and not event.payload.is_table_level
    assert [s.num_distinct for s in event.payload.statistics] == [2, 2]
    with pytest.raises(WarehouseError, match="need a partition"):
        wh.update_column_statistics("s", "orders")
    ids = wh.delete_column_statistics("s", "orders", {"dt": "d1"})
    payloads = [e.payload for e in events_after(wh, ids[0] - 1)]
    assert payloads == [
        DeleteColumnStatsPayload("s", "orders", col, "dt=d1", ["d1"]) for col in ("id", "name")
    ]
    assert wh.column_statistics("s", "orders", {"dt": "d1"}) == []
    with pytest.raises(NoSuchObjectError):
        wh.delete_column_statistics("s", "orders", {"dt": "d1"}, "id")


def test_dropped_partition_forgets_its_statistics(wh: Warehouse) -> None:
    wh.insert("s", "orders", ROWS, {"dt": "d1"})
    wh.update_column_statistics("s", "orders", {"dt": "d1"})
    wh.drop_partitions("s", "orders", [{"dt": "d1"}])
    wh.insert("s", "orders", ROWS, {"dt": "d1"})
    assert wh.column_statistics("s", "orders", {"dt": "d1"}) == []


# --- basic statistics (hive.stats.autogather) -------------------------------------------------


def test_autogather_keeps_basic_statistics_current(wh: Warehouse) -> None:
    wh.stats_autogather = True
    start = wh.current_event_id()
    ids = wh.insert("s", "customers", ROWS, n_files=2)
    assert len(ids) == 2
    kinds = [str(e.event_type) for e in events_after(wh, start)]
    assert kinds == ["INSERT", "ALTER_TABLE"]
    params = wh.table("s", "customers").parameters
    sizes = sum(f.size or 0 for f in wh.files("s", "customers"))
    assert (params["numFiles"], params["numRows"], params["totalSize"]) == ("2", "3", str(sizes))
    alter = events_after(wh, start)[1].payload
    assert isinstance(alter, AlterTablePayload) and alter.after.parameters["numRows"] == "3"
    wh.insert("s", "orders", ROWS, {"dt": "d1"})  # a new partition carries its stats from the start
    (part,) = wh.partition_snapshots("s", "orders")
    assert part.parameters["numRows"] == "3"
    mark = wh.current_event_id()
    wh.insert("s", "orders", ROWS[:1], {"dt": "d1"})
    alter_part = events_after(wh, mark)[-1].payload
    assert isinstance(alter_part, AlterPartitionPayload) and alter_part.after.parameters["numRows"] == "4"
    wh.truncate("s", "customers")
    assert wh.table("s", "customers").parameters["numRows"] == "0"


def test_without_autogather_inserts_write_one_event(wh: Warehouse) -> None:
    start = wh.current_event_id()
    wh.insert("s", "customers", ROWS)
    assert [str(e.event_type) for e in events_after(wh, start)] == ["INSERT"]
    assert "numRows" not in wh.table("s", "customers").parameters


# --- external files ---------------------------------------------------------------------------


def test_external_files_change_without_events(wh: Warehouse) -> None:
    wh.create_table("s", "ext", COLS, DT, external=True, location=wh.root / "ext" / "e1")
    wh.add_partitions("s", "ext", [{"dt": "d1"}])
    start = wh.current_event_id()
    path = wh.write_external_file("s", "ext", ROWS, {"dt": "d1"}, name="a.parquet")
    wh.write_external_file("s", "ext", ROWS[:1], {"dt": "d1"}, name="a.parquet")  # replaced in place
    assert len(wh.rows("s", "ext")) == 1 and path.parent == wh.external_dir("s", "ext", {"dt": "d1"})
    wh.delete_external_file("s", "ext", "a.parquet", {"dt": "d1"})
    assert wh.rows("s", "ext") == [] and wh.current_event_id() == start
    assert not [p for p in path.parent.iterdir()]  # no staging left behind
    with pytest.raises(WarehouseError, match="not an external table"):
        wh.write_external_file("s", "customers", ROWS)
    wh.update_basic_statistics("s", "ext", {"dt": "d1"})
    assert wh.partition_snapshots("s", "ext")[0].parameters["numFiles"] == "0"


# --- workload knobs ---------------------------------------------------------------------------


def test_workload_knobs_produce_statistics_constraints_and_external_changes(
    sqlite_warehouse: Warehouse,
) -> None:
    from streamer.warehouse.workload import Workload

    wh = sqlite_warehouse
    wh.create_database("w")
    wh.create_table("w", "ext", COLS, external=True, location=wh.root / "extdata")
    stats = Workload(wh, seed=3, stats_share=0.2, constraint_share=0.2, external_file_share=0.2).run(300)
    done = stats.operations
    assert done.get("analyze", 0) > 0 and done.get("add_constraint", 0) > 0, done
    assert done.get("change_external_files", 0) > 0, done
    kinds = {e.event_type for e in events_after(wh, 0)}
    assert {"UPDATE_TBL_COL_STAT_EVENT", "ADD_PRIMARYKEY"} <= {str(k) for k in kinds}
