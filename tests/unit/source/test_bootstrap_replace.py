"""Policy REPLACE: the changed tables' dump splits into drops and additions that a target applies."""

from __future__ import annotations

from pathlib import Path

from streamer.events.model import BootstrapKind, BootstrapObjectPayload, BootstrapScope, Column
from streamer.metastore.memory import MemoryCatalog
from streamer.source.bootstrap import records, snapshot
from streamer.source.policy import PolicySet
from streamer.source.policy_record import parse_policy_record, policy_record
from streamer.source.reader import SqlNotificationReader
from streamer.source.replace import _Changed, split
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import COLUMNS

from .test_bootstrap_records import _applier, _run

ROWS = [{"id": 1, "name": "a", "amount": 1.0, "ok": True}]


def test_policy_record_round_trips_texts_with_commas() -> None:
    policies = PolicySet.parse(["d.['a', 'b,c']", "*"])
    assert [p.text for p in parse_policy_record(policy_record(policies)).policies] == [
        p.text for p in policies.policies
    ]


def test_replace_drops_newly_excluded_and_bootstraps_newly_included_tables(tmp_path: Path) -> None:
    url = str(tmp_path / "m.sqlite")
    wh = Warehouse.open(url, root=tmp_path / "wh", cmroot=tmp_path / "cm", source_id="s")
    reader = SqlNotificationReader(str(tmp_path / "m.sqlite"))
    try:
        wh.create_database("d")
        wh.create_database("e")
        for name in ("a1", "a2", "b1"):
            wh.create_table("d", name, COLUMNS, [Column("dt", "string")])
            wh.insert("d", name, ROWS, {"dt": "1"})
        wh.create_table("e", "x", COLUMNS, [])
        wh.insert("e", "x", ROWS)
        source = WarehouseCatalog(wh)
        old, new = PolicySet.parse(["d.['a.*']"]), PolicySet.parse(["d.['a1', 'b.*']", "e"])
        first = snapshot(source, reader, old, "s")
        catalog = MemoryCatalog()
        applier, state = _applier(tmp_path, catalog)
        _run(applier, state, records(first, "s"))
        assert sorted(catalog.list_tables("d")) == ["a1", "a2"]

        wh.insert("d", "b1", ROWS, {"dt": "2"})  # changes before the policy change are in the dump
        changed = snapshot(source, reader, _Changed(old, new), "s")
        assert set(changed.dump.tables) == {("d", "a2"), ("d", "b1"), ("e", "x")}
        added, drops = split(changed, old, new)
        assert [t.name for t in drops] == ["a2"]
        recs = records(added, "s", scope=BootstrapScope.TABLES, drops=drops, databases={"e"})
        kinds = [e.payload.kind for e in recs if isinstance(e.payload, BootstrapObjectPayload)]
        k = BootstrapKind
        assert kinds == [k.DROP_TABLE, k.TABLE, k.DATABASE, k.TABLE]
        # a TABLES bootstrap is not skipped by the databases' progress (the target's progress file is)
        progress = {"d": changed.event_id}
        assert len(plan(recs, progress, set()).steps) == len(recs)
        report = run_plan(applier, plan(recs, applier.load_progress(), state.halts()), state)
        assert not report.halted
        assert sorted(catalog.list_tables("d")) == ["a1", "b1"]
        assert catalog.list_tables("e") == ["x"]
        assert sorted(p.values for p in catalog.list_partitions("d", "b1")) == [["1"], ["2"]]
        calls: list[str] = []
        catalog.create_table = lambda t: calls.append(t.name)  # type: ignore[method-assign]
        catalog.drop_table = lambda db, t: calls.append(t)  # type: ignore[method-assign]
        _run(applier, state, recs)  # delivered again: nothing is redone
        assert calls == []
    finally:
        reader.close()
        wh.close()
