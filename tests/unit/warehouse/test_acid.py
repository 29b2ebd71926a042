"""ACID transactions on the bundled warehouse: events, TXN_WRITE_NOTIFICATION_LOG rows, write ids,
Hive's delta layout and committed-rows semantics; sqlite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import streamer.warehouse.change as warehouse_module
from streamer.events.model import (
    AbortTxnPayload,
    AcidWrite,
    AddPartitionPayload,
    AllocWriteIdPayload,
    Column,
    CommitTxnPayload,
    OpenTxnPayload,
    TxnWriteId,
)
from streamer.hive.decode import decode_row, decode_txn_writes
from streamer.hive.notification import TxnWriteNotificationRow
from streamer.source.reader import SqlNotificationReader
from streamer.warehouse import Warehouse, WarehouseError
from streamer.warehouse.check import check_log
from streamer.warehouse.errors import OpenWritesError, TxnStateError
from streamer.warehouse.files import checksum, path_of

COLS = [Column("id", "bigint"), Column("name", "string")]
DT = [Column("dt", "string")]


def types_after(wh: Warehouse, after: int) -> list[str]:
    return [r.event_type for r in wh.notifications(after)]


def table_dir(wh: Warehouse, db: str, table: str) -> Path:
    return path_of(wh.table(db, table).sd.location or "")


def rows(n: int, start: int = 0) -> list[dict[str, object]]:
    return [{"id": i, "name": f"n{i}"} for i in range(start, start + n)]


def ids(wh: Warehouse, db: str, table: str) -> list[Any]:
    return sorted(r["id"] for r in wh.rows(db, table))  # type: ignore[type-var]


@pytest.fixture
def acid_wh(warehouse: Warehouse) -> Warehouse:
    """sales.orders: full ACID, partitioned; ops.audit: insert-only, unpartitioned."""
    warehouse.create_database("sales")
    warehouse.create_database("ops")
    warehouse.create_table("sales", "orders", COLS, DT, transactional=True)
    warehouse.create_table("ops", "audit", COLS, transactional="insert_only")
    return warehouse


def test_transactional_tables_carry_hives_properties(acid_wh: Warehouse) -> None:
    full, mm = acid_wh.table("sales", "orders"), acid_wh.table("ops", "audit")
    assert full.parameters["transactional"] == "true"
    assert full.parameters["transactional_properties"] == "default"
    assert mm.parameters["transactional_properties"] == "insert_only"
    assert full.table_type == mm.table_type == "MANAGED_TABLE"
    with pytest.raises(WarehouseError, match="external"):
        acid_wh.create_table("ops", "x", COLS, external=True, location=Path("/tmp/x"), transactional=True)
    with pytest.raises(WarehouseError, match="transactional="):
        acid_wh.create_table("ops", "y", COLS, transactional="bogus")


def test_a_txn_across_two_databases_writes_hives_events_and_write_log(acid_wh: Warehouse) -> None:
    wh = acid_wh
    start = wh.current_event_id()
    txn = wh.open_txn()
    assert wh.acid_insert(txn, "sales", "orders", rows(2), {"dt": "d1"}, n_files=2) == [start + 2, start + 3]
    assert wh.acid_insert(txn, "sales", "orders", rows(1, 10), {"dt": "d1"}) == []  # same write id
    wh.acid_insert(txn, "ops", "audit", rows(1))
    assert ids(wh, "sales", "orders") == [] and wh.txn_state(txn) == "open"
    commit_id = wh.commit_txn(txn)
    assert types_after(wh, start) == [
        "OPEN_TXN", "ALLOC_WRITE_ID_EVENT", "ADD_PARTITION", "ALLOC_WRITE_ID_EVENT", "COMMIT_TXN",
    ]  # fmt: skip
    assert commit_id == wh.current_event_id() == start + 5
    log = wh.notifications(start)
    assert all(r.db_name is None for r in (log[0], log[4]))
    assert (log[1].db_name, log[1].table_name) == ("sales", "orders")
    opened, alloc = json.loads(log[0].message), json.loads(log[1].message)
    assert (opened["fromTxnId"], opened["toTxnId"], opened["txnIds"]) == (txn, txn, None)
    assert (alloc["txnIdList"], alloc["writeIdList"]) == ([txn], [1])
    committed = json.loads(log[4].message)
    assert committed["txnid"] == txn and committed["writeIds"] is None and committed["files"] is None
    add = decode_row(log[2])
    assert isinstance(add.payload, AddPartitionPayload) and add.payload.files == []
    assert check_log(wh.notifications()).ok

    write_rows = wh.txn_write_rows(txn)
    assert [(r.db, r.table, r.partition, r.write_id) for r in write_rows] == [
        ("ops", "audit", "", 1),
        ("sales", "orders", "dt=d1", 1),
    ]
    audit, orders = decode_txn_writes(write_rows)
    assert [f.subdir for f in orders.files] == ["delta_0000001_0000001_0000"] * 2 + [
        "delta_0000001_0000001_0001"
    ]
    assert [Path(f.uri).name for f in orders.files] == ["bucket_00000", "bucket_00001", "bucket_00000"]
    assert [Path(f.uri).name for f in audit.files] == ["000000_0"]  # insert-only: Hive's plain names
    for ref in orders.files + audit.files:
        local = path_of(ref.uri)
        assert local.parent.name == ref.subdir
        assert ref.checksum == checksum(local)
        assert ref.cm_uri == f"file:{wh.cm.root}/{local.name}_{ref.checksum}"
    assert orders.partition_snapshot is not None and orders.partition_snapshot.values == ["d1"]
    assert orders.table_snapshot == wh.table("sales", "orders")
    assert ids(wh, "sales", "orders") == [0, 1, 10]
    assert {r["dt"] for r in wh.rows("sales", "orders")} == {"d1"}
    assert ids(wh, "ops", "audit") == [0]


def test_streamers_sql_reader_reads_the_write_log(acid_wh: Warehouse) -> None:
    """No back door: the agent's ordinary reader sees what the warehouse recorded."""
    with acid_wh.transaction() as txn:
        acid_wh.acid_insert(txn, "sales", "orders", rows(2), {"dt": "d1"})
        acid_wh.acid_insert(txn, "ops", "audit", rows(1))
    reader = SqlNotificationReader(acid_wh.store.url)
    try:
        assert reader.txn_writes(txn) == acid_wh.txn_write_rows(txn)
    finally:
        reader.close()


def test_write_ids_are_dense_per_table_and_aborted_data_is_invisible(acid_wh: Warehouse) -> None:
    wh = acid_wh
    outcomes = [True, False, True, False, True]
    for n, commit in enumerate(outcomes):
        txn = wh.open_txn()
        wh.acid_insert(txn, "ops", "audit", rows(1, 100 * n))
        if n == 2:  # one txn writes two tables: each table's write ids stay dense on their own
            wh.acid_insert(txn, "sales", "orders", rows(1, 7), {"dt": "d"})
        (wh.commit_txn if commit else wh.abort_txn)(txn)
    assert wh.acid_committed_write_ids("ops", "audit") == [1, 3, 5]
    assert wh.acid_committed_write_ids("sales", "orders") == [1]
    assert ids(wh, "ops", "audit") == [0, 200, 400]
    assert wh.txns("aborted") == [2, 4] and wh.txns("committed") == [1, 3, 5] and wh.txns("open") == []
    on_disk = sorted(p.name for p in table_dir(wh, "ops", "audit").iterdir())
    assert on_disk == [f"delta_{w:07d}_{w:07d}_0000" for w in range(1, 6)]  # aborted deltas stay
    assert {f.subdir for f in wh.files("ops", "audit")} == {
        "delta_0000001_0000001_0000", "delta_0000003_0000003_0000", "delta_0000005_0000005_0000",
    }  # fmt: skip
    aborts = [decode_row(r) for r in wh.notifications() if r.event_type == "ABORT_TXN"]
    assert [e.payload for e in aborts] == [AbortTxnPayload(2, ["ops"]), AbortTxnPayload(4, ["ops"])]
    allocs = [decode_row(r).payload for r in wh.notifications() if r.event_type == "ALLOC_WRITE_ID_EVENT"]
    assert allocs[:3] == [
        AllocWriteIdPayload("ops", "audit", [TxnWriteId(1, 1)]),
        AllocWriteIdPayload("ops", "audit", [TxnWriteId(2, 2)]),
        AllocWriteIdPayload("ops", "audit", [TxnWriteId(3, 3)]),
    ]


def test_txn_events_round_trip_through_the_decoder(acid_wh: Warehouse) -> None:
    start = acid_wh.current_event_id()
    with acid_wh.transaction() as txn:
        acid_wh.acid_insert(txn, "ops", "audit", rows(1))
    with pytest.raises(RuntimeError), acid_wh.transaction() as aborted:
        acid_wh.acid_insert(aborted, "sales", "orders", rows(1), {"dt": "x"})
        raise RuntimeError("writer failed")
    payloads = [decode_row(r).payload for r in acid_wh.notifications(start)]
    assert payloads == [
        OpenTxnPayload([txn]),
        AllocWriteIdPayload("ops", "audit", [TxnWriteId(txn, 1)]),
        CommitTxnPayload(txn, []),
        OpenTxnPayload([aborted]),
        AllocWriteIdPayload("sales", "orders", [TxnWriteId(aborted, 1)]),
        payloads[5],  # ADD_PARTITION, checked elsewhere
        AbortTxnPayload(aborted, ["sales"]),
    ]
    assert acid_wh.txn_state(aborted) == "aborted" and acid_wh.partitions("sales", "orders") == [{"dt": "x"}]
    assert acid_wh.rows("sales", "orders") == []


def test_insert_into_an_acid_table_is_an_autocommit_transaction(acid_wh: Warehouse) -> None:
    start = acid_wh.current_event_id()
    written = acid_wh.insert("sales", "orders", [{"id": 1, "name": "a", "dt": "p"}, {"id": 2, "dt": "q"}])
    assert written == list(range(start + 1, start + 6))
    assert types_after(acid_wh, start) == [
        "OPEN_TXN", "ALLOC_WRITE_ID_EVENT", "ADD_PARTITION", "ADD_PARTITION", "COMMIT_TXN",
    ]  # fmt: skip
    assert ids(acid_wh, "sales", "orders") == [1, 2]
    (txn,) = acid_wh.txns("committed")
    assert [r.partition for r in acid_wh.txn_write_rows(txn)] == ["dt=p", "dt=q"]
    with pytest.raises(WarehouseError, match="OVERWRITE"):
        acid_wh.insert("ops", "audit", rows(1), overwrite=True)
    with pytest.raises(WarehouseError, match="TRUNCATE"):
        acid_wh.truncate("ops", "audit")


def test_refused_txn_operations_write_nothing(acid_wh: Warehouse) -> None:
    wh = acid_wh
    wh.create_table("ops", "plain", COLS)
    txn = wh.open_txn()
    start = wh.current_event_id()
    with pytest.raises(WarehouseError, match="not a transactional table"):
        wh.acid_insert(txn, "ops", "plain", rows(1))
    with pytest.raises(TxnStateError, match="transaction 99 is unknown"):
        wh.acid_insert(99, "ops", "audit", rows(1))
    with pytest.raises(WarehouseError):
        wh.acid_insert(txn, "ops", "audit", [{"id": "not a number"}])
    assert wh.current_event_id() == start
    wh.commit_txn(txn)
    with pytest.raises(TxnStateError, match="committed"):
        wh.commit_txn(txn)
    with pytest.raises(TxnStateError, match="committed"):
        wh.abort_txn(txn)
    with pytest.raises(TxnStateError, match="committed"):
        wh.acid_insert(txn, "ops", "audit", rows(1))
    assert wh.current_event_id() == start + 1
    assert table_dir(wh, "ops", "audit").exists() and list(table_dir(wh, "ops", "audit").iterdir()) == []


def test_a_failing_acid_write_leaves_no_trace(acid_wh: Warehouse, monkeypatch: Any) -> None:
    txn = acid_wh.open_txn()
    start = acid_wh.current_event_id()

    def failing(txn_id: int, write: AcidWrite, event_time: int) -> TxnWriteNotificationRow:
        raise RuntimeError("write log failed")

    monkeypatch.setattr(warehouse_module, "encode_txn_write", failing)
    with pytest.raises(RuntimeError):
        acid_wh.acid_insert(txn, "sales", "orders", rows(1), {"dt": "d"})
    monkeypatch.undo()
    assert acid_wh.current_event_id() == start and acid_wh.partitions("sales", "orders") == []
    assert list(table_dir(acid_wh, "sales", "orders").iterdir()) == []
    acid_wh.acid_insert(txn, "sales", "orders", rows(1), {"dt": "d"})
    acid_wh.commit_txn(txn)
    assert acid_wh.acid_committed_write_ids("sales", "orders") == [1]  # the failed call used no write id


def test_open_writes_block_drop_and_rename_and_a_new_table_restarts_write_ids(acid_wh: Warehouse) -> None:
    wh = acid_wh
    txn = wh.open_txn()
    wh.acid_insert(txn, "ops", "audit", rows(2))
    for refused in (
        lambda: wh.drop_table("ops", "audit"),
        lambda: wh.rename_table("ops", "audit", "audit2"),
        lambda: wh.drop_database("ops", cascade=True),
    ):
        with pytest.raises(OpenWritesError, match=f"open transactions \\[{txn}\\]"):
            refused()
    wh.commit_txn(txn)
    wh.rename_table("ops", "audit", "audit2")
    assert wh.acid_committed_write_ids("ops", "audit2") == [1] and ids(wh, "ops", "audit2") == [0, 1]
    (ref,) = wh.files("ops", "audit2")
    wh.drop_table("ops", "audit2")
    assert (wh.cm.root / f"000000_0_{ref.checksum}").exists()
    assert not table_dir_exists(wh, "ops", "audit2")
    wh.create_table("ops", "audit2", COLS, transactional="insert_only")
    wh.insert("ops", "audit2", rows(1))
    assert wh.acid_committed_write_ids("ops", "audit2") == [1]
    assert ids(wh, "ops", "audit2") == [0]


def table_dir_exists(wh: Warehouse, db: str, table: str) -> bool:
    return (path_of(wh.database(db).location or "") / table).exists()


def test_drop_partition_of_an_acid_table_retains_its_delta_files(acid_wh: Warehouse) -> None:
    acid_wh.insert("sales", "orders", rows(1), {"dt": "d"})
    (ref,) = acid_wh.files("sales", "orders")
    acid_wh.drop_partitions("sales", "orders", [{"dt": "d"}])
    assert (acid_wh.cm.root / f"bucket_00000_{ref.checksum}").exists()
    assert not path_of(ref.uri).exists()
    assert acid_wh.rows("sales", "orders") == []
