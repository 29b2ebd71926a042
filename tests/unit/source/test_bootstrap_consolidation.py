"""Bootstrap consolidation against the bundled warehouse: a dump read while a random workload runs,
consolidated with the events of that time, equals a quiet dump of the source at the same event id."""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.events.model import (
    AlterPartitionPayload,
    Column,
    ColumnStatistic,
    DatabaseSnapshot,
    Event,
    EventType,
    FileRef,
    InsertPayload,
    PartitionSnapshot,
    Source,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.source.bootstrap import read_dump, settle
from streamer.source.consolidate import Dump, TableDump, consolidate
from streamer.source.policy import PolicySet
from streamer.source.reader import SqlNotificationReader
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import COLUMNS, Workload

POLICIES = [["*"], ["d*"], ["`.*`.['t.*', 'r.*'].['t1.*']"]]


def comparable(dump: Dump) -> dict[str, Any]:
    """Everything a target must reproduce; files by URI and checksum (sizes are filled by enrichment),
    constraints, table-level column statistics and those of live partitions."""
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
                {v: stats for v, stats in t.partition_statistics.items() if stats and v in t.partitions},
            )
            for k, t in dump.tables.items()
        },
    }


@contextlib.contextmanager
def _logged(work: Path) -> Iterator[tuple[Warehouse, SqlNotificationReader]]:
    """A source warehouse in ``work`` and a reader of its notification log, closed together."""
    wh = Warehouse.open(str(work / "m.sqlite"), root=work / "wh", cmroot=work / "cm", source_id="s")
    reader = SqlNotificationReader(str(work / "m.sqlite"))
    try:
        yield wh, reader
    finally:
        reader.close()
        wh.close()


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
    with tempfile.TemporaryDirectory() as tmp, _logged(Path(tmp)) as (wh, reader):
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


def _rename_some_table(wh: Warehouse, load: Workload) -> None:
    for db in wh.databases():
        for name in wh.tables(db):
            if wh.table(db, name).table_type == "MANAGED_TABLE" and not wh.table(db, name).is_transactional:
                wh.rename_table(db, name, f"r{wh.current_event_id() + 1}")
                return


def test_renamed_table_keeps_its_partitions_and_files(tmp_path: Path) -> None:
    """A table renamed after it was dumped moves with its partitions and files re-pointed."""
    with _logged(tmp_path) as (wh, reader):
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


def test_parent_renamed_after_its_child_was_dumped_is_renamed_in_the_foreign_key(tmp_path: Path) -> None:
    """Hive renames a parent table in its children's foreign keys; the consolidated dump must too."""
    with _logged(tmp_path) as (wh, reader):
        wh.create_database("d")
        wh.create_table("d", "child", COLUMNS)
        wh.create_table("d", "parent", COLUMNS)
        wh.add_primary_key("d", "parent", "pk", ["id"])
        wh.add_foreign_key("d", "child", "fk", ["id"], "parent")
        source, scope = WarehouseCatalog(wh), PolicySet.parse(["*"])
        start = source.current_event_id()
        dump = read_dump(source, scope)
        wh.rename_table("d", "parent", "renamed")
        result = settle(source, reader, scope, "s", start, dump)
        (fk,) = result.dump.tables[("d", "child")].constraints["fk"]
        assert (fk.ref_db, fk.ref_table) == ("d", "renamed")
        assert comparable(result.dump) == comparable(read_dump(source, scope))


def test_table_renamed_into_the_policy_is_read_again(tmp_path: Path) -> None:
    with _logged(tmp_path) as (wh, reader):
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


def test_partition_statistics_follow_the_events_of_the_dump(tmp_path: Path) -> None:
    """Partition column statistics changed, deleted, dropped with their partition, absent from a re-added
    one and carried along by a table rename, all after the table was dumped, end as the source has them."""
    with _logged(tmp_path) as (wh, reader):
        wh.create_database("d")
        wh.create_table("d", "t", COLUMNS, [Column("dt", "string")])
        rows = [{"id": i, "name": f"n{i}", "amount": 1.0, "ok": True} for i in range(3)]
        for day in ("1", "2", "3"):
            wh.insert("d", "t", rows, {"dt": day})
            wh.update_column_statistics("d", "t", {"dt": day})
        source, scope = WarehouseCatalog(wh), PolicySet.parse(["*"])
        start = source.current_event_id()
        dump = read_dump(source, scope)
        assert set(dump.tables[("d", "t")].partition_statistics) == {("1",), ("2",), ("3",)}
        wh.insert("d", "t", [{"id": 99, "name": "longer", "amount": 2.0, "ok": False}], {"dt": "1"})
        wh.update_column_statistics("d", "t", {"dt": "1"})  # new values
        wh.delete_column_statistics("d", "t", {"dt": "2"}, "name")
        wh.drop_partitions("d", "t", [{"dt": "3"}])
        wh.add_partitions("d", "t", [{"dt": "3"}])  # back, without statistics
        wh.insert("d", "t", rows, {"dt": "4"})
        wh.update_column_statistics("d", "t", {"dt": "4"})
        wh.rename_table("d", "t", "u")
        result = settle(source, reader, scope, "s", start, dump)
        truth = read_dump(source, scope)
        assert comparable(result.dump) == comparable(truth)
        stats = result.dump.tables[("d", "u")].partition_statistics
        assert set(stats) == {("1",), ("2",), ("4",)}
        assert "name" not in stats[("2",)] and stats[("1",)]["id"].high_value == "99"


def test_a_renamed_partition_takes_its_statistics_along() -> None:
    """Hive moves a partition's column statistics when it renames the partition (ALTER_PARTITION)."""
    table = TableSnapshot("t", "d", partition_keys=[Column("dt", "string")])
    old = PartitionSnapshot(["1"], "d", "t", StorageDescriptor(location="/wh/d.db/t/dt=1"))
    new = PartitionSnapshot(["9"], "d", "t", StorageDescriptor(location="/wh/d.db/t/dt=9"))
    stat = ColumnStatistic("id", "bigint", "LONG", num_nulls=0)
    dump = Dump(databases={"d": DatabaseSnapshot("d")})
    dump.tables[("d", "t")] = TableDump(table, partitions={("1",): old}, read_from=5, read_to=5,
                                        partition_statistics={("1",): {"id": stat}})

    def rename(event_id: int) -> Event:
        return Event(Source("s", event_id, 0), EventType.ALTER_PARTITION,
                     AlterPartitionPayload(table, old, new), db="d", table="t")

    later = consolidate(dump, [rename(6)], PolicySet.parse(["*"]), 6).dump.tables[("d", "t")]
    assert later.partition_statistics == {("9",): {"id": stat}} and set(later.partitions) == {("9",)}
    # a rename the read already shows (its statistics were read under the new name) changes nothing
    dump.tables[("d", "t")].partition_statistics = {("9",): {"id": stat}}
    seen = consolidate(dump, [rename(4)], PolicySet.parse(["*"]), 6).dump.tables[("d", "t")]
    assert seen.partition_statistics == {("9",): {"id": stat}}


def test_a_table_created_and_analyzed_during_the_dump_settles(tmp_path: Path) -> None:
    """A DELETE_*_COL_STAT makes consolidation read the table again; the CREATE_TABLE before that read
    must not replace the new read every round (the dump never settled)."""
    with _logged(tmp_path) as (wh, reader):
        wh.create_database("d")
        source, scope = WarehouseCatalog(wh), PolicySet.parse(["*"])
        start = source.current_event_id()
        wh.create_table("d", "t", COLUMNS, [Column("dt", "string")])
        wh.insert("d", "t", [{"id": 1, "name": "a", "amount": 1.0, "ok": True}], {"dt": "1"})
        wh.update_column_statistics("d", "t", {"dt": "1"})
        wh.delete_column_statistics("d", "t", {"dt": "1"}, "name")
        dump = read_dump(source, scope)
        result = settle(source, reader, scope, "s", start, dump, max_rounds=3)
        assert comparable(result.dump) == comparable(read_dump(source, scope))
        assert set(result.dump.tables[("d", "t")].partition_statistics[("1",)]) == {"id", "amount", "ok"}


def test_an_unlocated_insert_during_the_dump_has_its_table_read_again() -> None:
    """An INSERT without files the agent could not locate (``unlocated``) may stand for an overwrite:
    replaying it as an append would keep the dumped files it replaced; only a read after it knows."""
    table = TableSnapshot("t", "d", sd=StorageDescriptor(location="/wh/d.db/t"))
    dump = Dump(databases={"d": DatabaseSnapshot("d")})
    dump.tables[("d", "t")] = TableDump(table, files={(): {"/wh/d.db/t/old": FileRef("/wh/d.db/t/old")}},
                                        read_from=5, read_to=5)
    payload = InsertPayload(None, None, [], False, [], unlocated=True)
    unlocated = Event(Source("s", 6, 0), EventType.INSERT, payload, db="d", table="t")
    result = consolidate(dump, [unlocated], PolicySet.parse(["*"]), 6)
    assert result.unresolved == {("d", "t")} and not result.complete
    read_after = consolidate(dump, [dataclasses.replace(unlocated, source=Source("s", 4, 0))],
                             PolicySet.parse(["*"]), 6)
    assert read_after.unresolved == frozenset()  # the read already shows what it wrote
