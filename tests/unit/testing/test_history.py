"""The source history: replaying the log must reproduce exactly what the warehouse shows."""

from __future__ import annotations

from streamer.events.model import Column
from streamer.testing import History, table_key
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import scripted_scenario
from tests.unit.testing.observe import observe_warehouse
from tests.unit.testing.replicas import Run


def test_final_state_of_a_random_workload_equals_the_warehouse(run: Run) -> None:
    h = run.history
    at_end = h.states_at(h.last_event_id)
    assert at_end.keys() == run.final.keys()
    for key, state in run.final.items():
        assert at_end[key] == state, key
    assert len(h.tables()) > len(at_end)  # some tables were renamed or dropped on the way


def test_states_step_by_step(sqlite_warehouse: Warehouse) -> None:
    wh = sqlite_warehouse
    wh.create_database("s")
    wh.create_table("s", "t", [Column("id", "bigint")])
    first = wh.insert("s", "t", [{"id": 1}])[0]
    seen_after_first = observe_warehouse(wh)
    second = wh.insert("s", "t", [{"id": 2}])[0]
    overwrite = wh.insert("s", "t", [{"id": 3}], overwrite=True)[0]
    after_overwrite = observe_warehouse(wh)
    wh.rename_table("s", "t", "u")
    renamed = wh.current_event_id()
    wh.truncate("s", "u")
    truncated = wh.current_event_id()
    history = History.from_rows(wh.notifications(), "warehouse")

    t, u = table_key("s", "t"), table_key("s", "u")
    assert history.state_at(t, first) == seen_after_first[t]
    assert len(history.state_at(t, second).files()[""]) == 2  # type: ignore[union-attr]
    assert history.state_at(t, overwrite) == after_overwrite[t]
    assert history.state_at(t, renamed) is None
    moved = history.state_at(u, renamed)
    assert moved is not None and moved.files() == after_overwrite[t].files()
    assert history.state_at(u, truncated).files() == {"": ()}  # type: ignore[union-attr]
    assert history.compatible(t, seen_after_first[t]) == ((first, second - 1),)
    assert history.compatible(u, None) == ((0, renamed - 1),)


def test_scripted_demo_matches_the_warehouse(sqlite_warehouse: Warehouse) -> None:
    last = scripted_scenario(sqlite_warehouse)
    history = History.from_rows(sqlite_warehouse.notifications(), "w", sqlite_warehouse.txn_write_rows)
    assert history.states_at(last) == observe_warehouse(sqlite_warehouse)
    assert history.head_at(0) == 0 and history.head_at(float("inf")) == last
