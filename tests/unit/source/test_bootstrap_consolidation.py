"""Bootstrap consolidation against the bundled warehouse: a dump read while a random workload runs,
consolidated with the events of that time, equals a quiet dump of the source at the same event id."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.events.model import Column
from streamer.source.bootstrap import read_dump, settle
from streamer.source.consolidate import Dump
from streamer.source.policy import PolicySet
from streamer.source.reader import SqlNotificationReader
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import COLUMNS, Workload

POLICIES = [["*"], ["d*"], ["`.*`.['t.*', 'r.*'].['t1.*']"]]


def comparable(dump: Dump) -> dict[str, Any]:
    """Everything a target must reproduce; files by URI and checksum (sizes are filled by enrichment),
    constraints and table-level column statistics."""
    return {
        "databases": dump.databases,
        "functions": dump.functions,
        "tables": {
            k: (
                t.table,
                t.partitions,
                {v: sorted((u, r.checksum) for u, r in refs.items()) for v, refs in t.files.items() if refs},
                sorted(t.write_ids),
                {
                    name: sorted(cs, key=lambda c: c.position)
                    for name, cs in t.constraints.items()
                    # Hive drops foreign keys onto a dropped table with it (no event); the bundled
                    # warehouse keeps them dangling: only live ones are compared
                    if all(c.ref_table is None or (c.ref_db or "", c.ref_table) in dump.tables for c in cs)
                },
                t.statistics,
            )
            for k, t in dump.tables.items()
        },
    }


def _warehouse(work: Path) -> Warehouse:
    return Warehouse.open(str(work / "m.sqlite"), root=work / "wh", cmroot=work / "cm", source_id="s")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    before=st.integers(5, 30),
    during=st.lists(st.integers(0, 6), min_size=1, max_size=25),
    policy=st.sampled_from(POLICIES),
    renames=st.booleans(),
    metadata=st.booleans(),
)
def test_dump_plus_consolidation_is_the_state_at_e1(
    seed: int, before: int, during: list[int], policy: list[str], renames: bool, metadata: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wh = _warehouse(Path(tmp))
        reader = SqlNotificationReader(str(Path(tmp) / "m.sqlite"))
        try:
            share = 0.15 if metadata else 0.0  # statistics and constraints, dumped and consolidated
            load = Workload(wh, seed=seed, txn_share=0.15, stats_share=share, constraint_share=share)
            load.run(before)
            steps: Iterator[int] = iter(during)
            source = WarehouseCatalog(wh)
            scope = PolicySet.parse(policy)

            def meanwhile(kind: str, name: str) -> None:
                n = next(steps, 0)
                if n:
                    load.run(n)
                if renames and kind == "table" and "." in name:
                    _rename_some_table(wh, load)

            start = source.current_event_id()
            dump = read_dump(source, scope, meanwhile)
            for n in steps:  # whatever the dump left over still happens before E1
                load.run(n)
            result = settle(source, reader, scope, "s", start, dump)
            assert result.event_id == wh.current_event_id()
            truth = read_dump(source, scope)
            assert comparable(result.dump) == comparable(truth)
        finally:
            reader.close()
            wh.close()


def _rename_some_table(wh: Warehouse, load: Workload) -> None:
    for db in wh.databases():
        for name in wh.tables(db):
            if wh.table(db, name).table_type == "MANAGED_TABLE" and not wh.table(db, name).is_transactional:
                wh.rename_table(db, name, f"r{wh.current_event_id() + 1}")
                return


def test_renamed_table_keeps_its_partitions_and_files(tmp_path: Path) -> None:
    """A table renamed after it was dumped moves with its partitions and files re-pointed."""
    wh = _warehouse(tmp_path)
    reader = SqlNotificationReader(str(tmp_path / "m.sqlite"))
    try:
        wh.create_database("d")
        wh.create_table("d", "t", COLUMNS, [Column("dt", "string")])
        rows = [{"id": i, "name": f"n{i}", "amount": 1.0, "ok": True} for i in range(3)]
        for day in ("1", "2"):
            wh.insert("d", "t", rows, {"dt": day})
        source, scope = WarehouseCatalog(wh), PolicySet.parse(["*"])
        start = source.current_event_id()
        dump = read_dump(source, scope)
        wh.rename_table("d", "t", "u")
        wh.insert("d", "u", rows, {"dt": "3"})
        result = settle(source, reader, scope, "s", start, dump)
        assert set(result.dump.tables) == {("d", "u")}
        assert comparable(result.dump) == comparable(read_dump(source, scope))
        assert all("/u/" in uri for refs in result.dump.tables[("d", "u")].files.values() for uri in refs)
    finally:
        reader.close()
        wh.close()


def test_table_renamed_into_the_policy_is_read_again(tmp_path: Path) -> None:
    wh = _warehouse(tmp_path)
    reader = SqlNotificationReader(str(tmp_path / "m.sqlite"))
    try:
        wh.create_database("d")
        wh.create_table("d", "skip", COLUMNS, [Column("dt", "string")])
        wh.insert("d", "skip", [{"id": 1, "name": "a", "amount": 1.0, "ok": True}], {"dt": "1"})
        source, scope = WarehouseCatalog(wh), PolicySet.parse(["d.['keep.*']"])
        start = source.current_event_id()
        dump = read_dump(source, scope)
        assert not dump.tables
        wh.rename_table("d", "skip", "keep1")
        result = settle(source, reader, scope, "s", start, dump)
        assert set(result.dump.tables) == {("d", "keep1")}
        assert comparable(result.dump) == comparable(read_dump(source, scope))
    finally:
        reader.close()
        wh.close()
