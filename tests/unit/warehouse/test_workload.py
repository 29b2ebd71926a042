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
            Workload(wh, seed=3, max_rows=3).run(60)
            logs.append([(r.event_type, r.db_name, r.table_name) for r in wh.notifications()])
    assert logs[0] == logs[1]


def test_scripted_scenario_leaves_the_expected_state(sqlite_warehouse: Warehouse) -> None:
    wh = sqlite_warehouse
    last = scripted_scenario(wh)
    assert check_log(wh.notifications()).ok
    assert last == wh.current_event_id()
    assert wh.tables("sales") == ["clicks", "clients", "orders"]
    assert wh.partitions("sales", "orders") == [{"dt": "2024-01-01"}, {"dt": "2024-01-02"}]
    assert sorted(r["id"] for r in wh.rows("sales", "orders")) == [1, 2, 3, 4, 5, 10]  # type: ignore[type-var]
    assert wh.rows("sales", "clients") == [{"id": 1, "name": "alice"}, {"id": 3, "name": "carol"}]
    assert wh.functions("sales") == ["to_upper"]
