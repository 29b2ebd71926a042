"""Seeded workloads: realistic mixes whose logs pass the checker, reproducible from the seed."""

from __future__ import annotations

from pathlib import Path

from streamer.warehouse import Warehouse
from streamer.warehouse.check import check_log
from streamer.warehouse.workload import Workload, scripted_scenario


def test_a_few_hundred_events_pass_the_checker(warehouse: Warehouse) -> None:
    stats = Workload(warehouse, seed=7, max_rows=5).run(250)
    assert stats.events >= 250 and stats.first_event_id == 1
    report = check_log(warehouse.notifications())
    assert report.ok, report.problems[:5]
    assert report.events == stats.events
    expected = {"CREATE_DATABASE", "CREATE_TABLE", "INSERT", "ADD_PARTITION", "ALTER_TABLE", "DROP_PARTITION"}
    assert expected <= set(report.by_type), report.by_type
    assert {"insert", "overwrite", "truncate", "rename_table", "drop_table"} <= set(stats.operations)


def test_same_seed_gives_the_same_log(tmp_path: Path) -> None:
    logs = []
    for run in ("a", "b"):
        with Warehouse.open(
            str(tmp_path / f"{run}.sqlite"), tmp_path / run / "w", tmp_path / run / "cm"
        ) as wh:
            Workload(wh, seed=3, max_rows=3, txn_share=0.3).run(60)
            logs.append([(r.event_type, r.db_name, r.table_name) for r in wh.notifications()])
    assert logs[0] == logs[1]


def test_scripted_scenario_leaves_the_expected_state(sqlite_warehouse: Warehouse) -> None:
    wh = sqlite_warehouse
    last = scripted_scenario(wh)
    assert check_log(wh.notifications()).ok
    assert last == wh.current_event_id()
    assert wh.tables("sales") == ["audit", "clicks", "clients", "orders", "payments"]
    assert wh.partitions("sales", "orders") == [{"dt": "2024-01-01"}, {"dt": "2024-01-02"}]
    assert sorted(r["id"] for r in wh.rows("sales", "orders")) == [1, 2, 3, 4, 5, 10]  # type: ignore[type-var]
    assert wh.rows("sales", "clients") == [{"id": 1, "name": "alice"}, {"id": 3, "name": "carol"}]
    assert wh.functions("sales") == ["to_upper"]
    assert [r["id"] for r in wh.rows("sales", "payments")] == [1, 2]
    assert wh.rows("sales", "audit") == [{"id": 1, "name": "payments loaded"}]
    assert wh.txns("committed") == [1] and wh.txns("aborted") == [2]
    assert wh.acid_committed_write_ids("sales", "payments") == [1]
    types = [r.event_type for r in wh.notifications()]
    assert types.count("COMMIT_TXN") == 1 and types.count("ABORT_TXN") == 1


def test_transactions_knob_gives_commits_aborts_and_cross_database_txns(warehouse: Warehouse) -> None:
    stats = Workload(warehouse, seed=5, max_rows=3, txn_share=0.5, abort_ratio=0.5).run(250)
    report = check_log(warehouse.notifications())
    assert report.ok, report.problems[:5]
    assert stats.txns_committed + stats.txns_aborted == len(warehouse.txns()) >= 20
    assert stats.txns_aborted >= 0.25 * (stats.txns_committed + stats.txns_aborted)
    assert stats.txns_cross_db >= 2 and warehouse.txns("open") == []
    assert report.by_type["OPEN_TXN"] == report.by_type["COMMIT_TXN"] + report.by_type["ABORT_TXN"]
    for db in warehouse.databases():  # committed rows are exactly those of committed write ids
        for name in warehouse.tables(db):
            if warehouse.table(db, name).parameters.get("transactional") == "true":
                committed = set(warehouse.acid_committed_write_ids(db, name))
                assert {f.subdir for f in warehouse.files(db, name)} <= {
                    f"delta_{w:07d}_{w:07d}_{s:04d}" for w in committed for s in range(4)
                }


def test_no_transactions_unless_asked(sqlite_warehouse: Warehouse) -> None:
    Workload(sqlite_warehouse, seed=7, max_rows=3).run(80)
    assert sqlite_warehouse.txns() == []
