"""The warehouse's operations: events written, ids dense, atomicity, data, cmroot; sqlite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import streamer.warehouse.change as warehouse_module
from streamer.events.model import Column, Event, FileRef, InsertPayload, ResourceUri
from streamer.hive.decode import decode_row
from streamer.hive.encode import encode_event
from streamer.hive.notification import NotificationRow
from streamer.warehouse import AlreadyExistsError, NoSuchObjectError, Warehouse, WarehouseError
from streamer.warehouse.check import check_log
from streamer.warehouse.files import checksum, path_of

COLS = [Column("id", "bigint"), Column("name", "string")]
DT = [Column("dt", "string")]


def types_after(wh: Warehouse, after: int) -> list[str]:
    return [r.event_type for r in wh.notifications(after)]


def in_cmroot(wh: Warehouse) -> set[str]:
    return {p.name for p in wh.cm.root.iterdir() if not p.name.startswith(".")}


@pytest.fixture
def sales(warehouse: Warehouse) -> Warehouse:
    warehouse.create_database("sales")
    warehouse.create_table("sales", "orders", COLS, DT)
    warehouse.create_table("sales", "customers", COLS)
    return warehouse


def test_ddl_writes_one_event_each_with_dense_ids(warehouse: Warehouse) -> None:
    wh = warehouse
    wh.create_database("Sales", {"team": "fin"})
    wh.alter_database("sales", {"reviewed": "yes"})
    wh.create_table("sales", "orders", COLS, DT)
    wh.create_view("sales", "v", COLS, "SELECT * FROM sales.orders")
    wh.alter_table_properties("sales", "orders", {"comment": "x"})
    wh.add_partitions("sales", "orders", [{"dt": "a"}, {"dt": "b"}])
    wh.drop_partitions("sales", "orders", [{"dt": "a"}])
    wh.create_function("sales", "up", "com.x.Up", [ResourceUri("JAR", "file:/lib/u.jar")])
    wh.drop_function("sales", "up")
    wh.rename_table("sales", "v", "v2")
    wh.drop_table("sales", "v2")
    assert types_after(wh, 0) == [
        "CREATE_DATABASE", "ALTER_DATABASE", "CREATE_TABLE", "CREATE_TABLE", "ALTER_TABLE", "ADD_PARTITION",
        "DROP_PARTITION", "CREATE_FUNCTION", "DROP_FUNCTION", "ALTER_TABLE", "DROP_TABLE",
    ]  # fmt: skip
    report = check_log(wh.notifications())
    assert report.ok, report.problems
    assert wh.current_event_id() == 11
    assert wh.database("sales").parameters == {"team": "fin", "reviewed": "yes"}
    assert wh.partitions("sales", "orders") == [{"dt": "b"}]


def test_insert_into_new_partition_is_add_partition_listing_files(sales: Warehouse) -> None:
    start = sales.current_event_id()
    sales.insert("sales", "orders", [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}], {"dt": "d1"}, n_files=2)
    sales.insert("sales", "orders", [{"id": 3, "name": "c"}], {"dt": "d1"})
    assert types_after(sales, start) == ["ADD_PARTITION", "INSERT"]
    add, ins = (decode_row(r) for r in sales.notifications(start))
    assert [f.uri.rsplit("/", 1)[1] for f in add.payload.files] == ["000000_0", "000001_0"]  # type: ignore[union-attr]
    assert isinstance(ins.payload, InsertPayload)
    (ref,) = ins.payload.files
    local = path_of(ref.uri)
    assert ref.checksum == checksum(local)
    assert ref.cm_uri == f"file:{sales.cm.root}/{local.name}_{ref.checksum}"
    assert ins.payload.partition_values == ["d1"] and ins.payload.replace is False
    assert sorted(r["id"] for r in sales.rows("sales", "orders")) == [1, 2, 3]  # type: ignore[type-var]
    assert {r["dt"] for r in sales.rows("sales", "orders")} == {"d1"}


def test_dynamic_partition_insert_groups_rows_by_partition(sales: Warehouse) -> None:
    start = sales.current_event_id()
    rows = [{"id": i, "name": "n", "dt": f"d{i % 2}"} for i in range(4)]
    ids = sales.insert("sales", "orders", rows)
    assert ids == [start + 1, start + 2]
    assert sales.partitions("sales", "orders") == [{"dt": "d0"}, {"dt": "d1"}]
    assert len(sales.rows("sales", "orders")) == 4


def test_overwrite_replaces_data_and_retains_old_files_in_cmroot(sales: Warehouse) -> None:
    sales.insert("sales", "customers", [{"id": 1, "name": "a"}])
    (old,) = sales.files("sales", "customers")
    start = sales.current_event_id()
    sales.insert("sales", "customers", [{"id": 2, "name": "b"}], overwrite=True)
    assert sales.rows("sales", "customers") == [{"id": 2, "name": "b"}]
    (event,) = [decode_row(r) for r in sales.notifications(start)]
    assert isinstance(event.payload, InsertPayload) and event.payload.replace is True
    assert event.payload.files[0].uri != old.uri or event.payload.files[0].checksum != old.checksum
    assert f"000000_0_{old.checksum}" in in_cmroot(sales)


def test_truncate_writes_truncate_events_and_moves_files(sales: Warehouse) -> None:
    sales.insert("sales", "customers", [{"id": 1, "name": "a"}])
    sales.insert("sales", "orders", [{"id": 1, "name": "a", "dt": "x"}, {"id": 2, "name": "b", "dt": "y"}])
    kept = {
        f"{Path(f.uri).name}_{f.checksum}" for t in ("customers", "orders") for f in sales.files("sales", t)
    }
    start = sales.current_event_id()
    sales.truncate("sales", "customers")
    sales.truncate("sales", "orders")
    events = [decode_row(r) for r in sales.notifications(start)]
    assert [e.event_type.value for e in events] == ["ALTER_TABLE", "ALTER_PARTITION", "ALTER_PARTITION"]
    assert all(e.payload.is_truncate for e in events)  # type: ignore[union-attr]
    assert sales.rows("sales", "customers") == [] and sales.rows("sales", "orders") == []
    assert kept <= in_cmroot(sales)


def test_rename_moves_managed_directory_and_partitions(sales: Warehouse) -> None:
    sales.insert("sales", "orders", [{"id": 1, "name": "a"}], {"dt": "x"})
    old_dir = path_of(sales.table("sales", "orders").sd.location or "")
    start = sales.current_event_id()
    after = sales.rename_table("sales", "orders", "orders_v2")
    assert not old_dir.exists()
    assert path_of(after.sd.location or "") == old_dir.parent / "orders_v2"
    (row,) = sales.notifications(start)
    assert (row.db_name, row.table_name) == ("sales", "orders_v2")
    event = decode_row(row)
    assert event.payload.is_rename  # type: ignore[union-attr]
    assert sales.tables("sales") == ["customers", "orders_v2"]
    assert sales.rows("sales", "orders_v2") == [{"id": 1, "name": "a", "dt": "x"}]


def test_external_table_keeps_data_on_drop(warehouse: Warehouse, tmp_path: Path) -> None:
    warehouse.create_database("ext")
    location = tmp_path / "landing"
    warehouse.create_table("ext", "clicks", COLS, external=True, location=location)
    warehouse.insert("ext", "clicks", [{"id": 1, "name": "a"}])
    warehouse.drop_table("ext", "clicks")
    assert len(list(location.iterdir())) == 1
    assert in_cmroot(warehouse) == set()
    # recreating it over existing data announces the files, as Hive's CREATE_TABLE does
    start = warehouse.current_event_id()
    warehouse.create_table("ext", "clicks", COLS, external=True, location=location)
    (event,) = [decode_row(r) for r in warehouse.notifications(start)]
    assert len(event.payload.files) == 1  # type: ignore[union-attr]


def test_external_partition_added_again_announces_the_files_it_kept(
    warehouse: Warehouse, tmp_path: Path
) -> None:
    """Dropping an external partition keeps its files; an INSERT that adds the partition again lists
    them with the new ones (readers see them all), so the log's state is the filesystem's."""
    from streamer.testing.history import History

    warehouse.create_database("ext")
    warehouse.create_table("ext", "logs", COLS, DT, external=True, location=tmp_path / "logs")
    warehouse.insert("ext", "logs", [{"id": 1, "name": "a"}], {"dt": "x"})
    warehouse.drop_partitions("ext", "logs", [{"dt": "x"}])
    start = warehouse.current_event_id()
    warehouse.insert("ext", "logs", [{"id": 2, "name": "b"}], {"dt": "x"})
    (event,) = [decode_row(r) for r in warehouse.notifications(start)]
    on_disk = sorted(p.name for p in (tmp_path / "logs" / "dt=x").iterdir())
    assert len(on_disk) == 2
    assert sorted(f.uri.rsplit("/", 1)[-1] for f in event.payload.files) == on_disk  # type: ignore[union-attr]
    state = History.from_rows(warehouse.notifications(), "s").state_at("ext.logs", event.event_id)
    assert state is not None and sorted(f for f, _ in dict(state.partitions)["dt=x"]) == on_disk


def test_drop_database_cascade_drops_contents_and_retains_files(sales: Warehouse) -> None:
    sales.insert("sales", "orders", [{"id": 1, "name": "a"}], {"dt": "x"})
    sales.create_function("sales", "f", "com.x.F")
    files = sales.files("sales", "orders")
    with pytest.raises(WarehouseError, match="not empty"):
        sales.drop_database("sales")
    start = sales.current_event_id()
    sales.drop_database("sales", cascade=True)
    assert types_after(sales, start) == ["DROP_FUNCTION", "DROP_TABLE", "DROP_TABLE", "DROP_DATABASE"]
    assert sales.databases() == []
    assert not path_of(sales.root.as_posix() + "/sales.db").exists()
    assert {f"000000_0_{f.checksum}" for f in files} <= in_cmroot(sales)


def test_refused_changes_write_no_event(sales: Warehouse) -> None:
    start = sales.current_event_id()
    with pytest.raises(AlreadyExistsError):
        sales.create_table("sales", "orders", COLS)
    with pytest.raises(NoSuchObjectError):
        sales.insert("sales", "nope", [{"id": 1}])
    with pytest.raises(NoSuchObjectError):
        sales.drop_partitions("sales", "orders", [{"dt": "never"}])
    with pytest.raises(WarehouseError):
        sales.insert("sales", "customers", [{"id": "x"}])
    assert sales.current_event_id() == start and sales.notifications(start) == []


def test_a_change_failing_after_its_writes_leaves_no_trace(sales: Warehouse, monkeypatch: Any) -> None:
    """The metadata, the files and the log row commit together or not at all."""
    start = sales.current_event_id()
    table_dir = path_of(sales.table("sales", "orders").sd.location or "")

    def failing(event: Event, message_format: str) -> NotificationRow:
        raise RuntimeError("listener failed")

    monkeypatch.setattr(warehouse_module, "encode_event", failing)
    with pytest.raises(RuntimeError):
        sales.insert("sales", "orders", [{"id": 1, "name": "a"}], {"dt": "new"})
    with pytest.raises(RuntimeError):
        sales.rename_table("sales", "orders", "renamed")
    monkeypatch.undo()
    assert sales.partitions("sales", "orders") == []
    assert list(table_dir.iterdir()) == []
    assert sales.tables("sales") == ["customers", "orders"]
    assert sales.current_event_id() == start and sales.notifications(start) == []
    sales.insert("sales", "orders", [{"id": 1, "name": "a"}], {"dt": "new"})
    assert [r.event_id for r in sales.notifications(start)] == [start + 1]


def _comparable(value: Any) -> Any:
    """Fields the Hive encoding does not carry (the decoder leaves them unset) are blanked."""
    if isinstance(value, FileRef):
        return dataclasses.replace(value, checksum_algorithm=None, size=None)
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(
            value,
            **{f.name: _comparable(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init},
        )
    return value


@pytest.mark.parametrize("message_format", ["json-0.2", "gzip(json-2.0)"])
def test_log_round_trips_through_the_decoder(
    tmp_path: Path, sqlite_warehouse_url: str, message_format: str, monkeypatch: Any
) -> None:
    written: list[Event] = []

    def recording(event: Event, fmt: str) -> NotificationRow:
        written.append(event)
        return encode_event(event, fmt)

    monkeypatch.setattr(warehouse_module, "encode_event", recording)
    from streamer.warehouse.workload import scripted_scenario

    with Warehouse.open(sqlite_warehouse_url, tmp_path / "w", tmp_path / "cm", message_format) as wh:
        scripted_scenario(wh)
        rows = wh.notifications()
    assert {r.message_format for r in rows} == {message_format}
    assert len(rows) == len(written)
    for row, event in zip(rows, written, strict=True):
        decoded = decode_row(row, source_id=event.source.source_id)
        assert decoded.source == event.source
        assert (decoded.event_type, decoded.db, decoded.table) == (event.event_type, event.db, event.table)
        assert decoded.payload == _comparable(event.payload), event.event_type


def test_concurrent_writers_get_dense_ids(warehouse: Warehouse) -> None:
    """Separate connections serialize on the NOTIFICATION_SEQUENCE row: no gap, no duplicate."""
    import threading

    errors: list[BaseException] = []

    def work(prefix: str) -> None:
        try:
            with Warehouse.open(warehouse.store.url) as wh:
                for i in range(8):
                    wh.create_database(f"{prefix}{i}")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"p{n}_",)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert [r.event_id for r in warehouse.notifications()] == list(range(1, 17))
    assert len(warehouse.databases()) == 16
