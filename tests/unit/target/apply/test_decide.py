"""Handlers decide: given an event and a view of the target (a few dictionaries here, no catalog, no
files), they return the effects in the order the executor must do them, and change nothing.

Every catalog effect a handler decides must pass the door's checks (``door.check_effect``) for the
target's own paths: a handler never asks the door for something it will refuse."""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.errors import ApplyError
from streamer.events.model import (
    AbortTxnPayload,
    AcidWrite,
    CommitTxnPayload,
    CreateFunctionPayload,
    DatabaseSnapshot,
    Event,
    EventType,
    FunctionSnapshot,
    PartitionSnapshot,
    ResourceUri,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.target.apply import door
from streamer.target.apply.by_state import marked
from streamer.target.apply.effects import (
    AbortTxn,
    AddPartitions,
    AlterPartitions,
    AlterTable,
    CatalogEffect,
    ClaimExternal,
    CommitTxn,
    CopyResources,
    CopyWriteIds,
    CreateDatabase,
    CreateFunction,
    CreateTable,
    DropTable,
    Effect,
    PublishFiles,
    PublishTogether,
    PutPartitions,
    Refuse,
    RelocateDir,
    RemoveTree,
    ResetWriteIds,
    WriteFiles,
)
from streamer.target.apply.handlers import DECIDERS
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.tables import alter_table, create_table, drop_table
from streamer.target.state.visibility import Txn, TxnState
from tests.unit.target import builders as b

WH, EXT = "file:///target/wh", "file:///target/ext"


class DictView:
    """The target as a handler sees it: read-only dictionaries."""

    def __init__(self, tables: Sequence[TableSnapshot] = (), dbs: Sequence[DatabaseSnapshot] = ()) -> None:
        self.paths = TargetPaths(WH, EXT)
        self.source_id = b.SOURCE_ID
        self.tables = {(t.db, t.name): t for t in tables}
        self.parts: list[PartitionSnapshot] = []
        self.dbs = {d.name: d for d in dbs}
        self.functions: dict[tuple[str, str], FunctionSnapshot] = {}

    def target_db(self, source_db: str) -> str:
        return source_db.lower()

    def replica_marks(self) -> dict[str, str]:
        return {REPL_SOURCE_PARAM: self.source_id}

    def database(self, name: str) -> DatabaseSnapshot | None:
        return self.dbs.get(name)

    def check_owned(self, name: str) -> DatabaseSnapshot | None:
        return self.database(name)

    def known_table(self, db: str, name: str) -> TableSnapshot | None:
        return self.tables.get((db, name))

    existing_table = known_table

    def function(self, db: str, name: str) -> FunctionSnapshot | None:
        return self.functions.get((db, name))

    def partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        return [p for p in self.parts if (p.db, p.table) == (db, table)]

    def partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None:
        return next((p for p in self.partitions(db, table) if p.values == values), None)

    def txn(self, txn_id: int) -> Txn | None:
        return None


def _kinds(effects: list[Effect]) -> list[str]:
    return [type(e).__name__ for e in effects]


def _checked(effects: list[Effect], paths: TargetPaths) -> None:
    for effect in effects:
        if isinstance(effect, CatalogEffect):
            door.check_effect(effect, paths)


def _target(view: DictView, snap: TableSnapshot) -> TableSnapshot:
    from streamer.target.apply.tables import target_table
    return target_table(view, snap, None)[0]


def test_a_new_table_s_files_land_before_the_table_that_shows_them() -> None:
    view = DictView()
    ref = b.FileRef(uri=f"file://{b.SRC_WH}/a.db/t/f1", checksum="00", checksum_algorithm="sha256", size=1)
    effects = create_table(view, b.create_table(5, b.table("a", "T"), [ref]))
    assert _kinds(effects) == ["PublishFiles", "ResetWriteIds", "CreateTable", "RememberTable"]
    publish, created = effects[0], effects[2]
    assert isinstance(publish, PublishFiles) and isinstance(created, CreateTable)
    assert publish.target_dir == created.table.sd.location == f"{WH}/a.db/t"
    assert publish.event_id == 5 and list(publish.refs) == [ref]
    assert created.table.parameters[REPL_SOURCE_PARAM] == b.SOURCE_ID
    _checked(effects, view.paths)


def test_a_table_as_the_target_has_it_decides_nothing_but_remembering_it() -> None:
    view = DictView()
    snap = b.table("a", "t")
    view.tables[("a", "t")] = _target(view, snap)
    assert _kinds(create_table(view, b.create_table(6, snap))) == ["RememberTable"]


def test_an_external_table_claims_its_directory_before_anything_is_placed_there() -> None:
    view = DictView()
    snap = b.table("a", "x", location="hdfs://nn:8020/data/x", table_type="EXTERNAL_TABLE")
    effects = create_table(view, b.create_table(7, snap))
    claim = effects[0]
    assert isinstance(claim, ClaimExternal) and claim.source_location == "hdfs://nn:8020/data/x"
    created = next(e for e in effects if isinstance(e, CreateTable))
    assert created.table.sd.location == claim.target_dir and claim.target_dir.startswith(EXT + "/")
    _checked(effects, view.paths)
    dropped = drop_table(view, b.drop_table(8, snap))
    assert not any(isinstance(e, RemoveTree) for e in dropped)  # an external table's files stay


def test_a_managed_rename_copies_then_switches_then_removes_the_old_tree() -> None:
    view = DictView()
    before = b.table("a", "t", ("p",))
    old = _target(view, before)
    view.tables[("a", "t")] = old
    view.parts = [PartitionSnapshot(["1"], "a", "t", StorageDescriptor(location=f"{WH}/a.db/t/p=1"))]
    after = dataclasses.replace(before, name="u",
                                sd=dataclasses.replace(before.sd, location=f"file://{b.SRC_WH}/a.db/u"))
    effects = alter_table(view, b.alter_table(9, before, after))
    kinds = _kinds(effects)
    order = ["CopyWriteIds", "RelocateDir", "AlterTable", "AlterPartitions", "RemoveTree", "ResetWriteIds"]
    assert [k for k in kinds if k in order] == order
    relocate = next(e for e in effects if isinstance(e, RelocateDir))
    assert (relocate.old, relocate.new) == (f"{WH}/a.db/t", f"{WH}/a.db/u")
    renamed = next(e for e in effects if isinstance(e, AlterTable))
    assert (renamed.db, renamed.name, renamed.table.name) == ("a", "t", "u")
    moved = next(e for e in effects if isinstance(e, AlterPartitions))
    assert [p.sd.location for p in moved.partitions] == [f"{WH}/a.db/u/p=1"]
    assert next(e for e in effects if isinstance(e, RemoveTree)).if_linked
    ids = next(e for e in effects if isinstance(e, CopyWriteIds))
    assert (ids.old, ids.new) == (next(e for e in effects if isinstance(e, ResetWriteIds)).key, "a.u")
    _checked(effects, view.paths)


def test_a_function_s_resources_are_copied_before_it_names_them() -> None:
    view = DictView()
    fn = FunctionSnapshot("F", "a", "com.x.F", resource_uris=[ResourceUri("JAR", "hdfs://nn/jars/f.jar")])
    event = b.event(11, EventType.CREATE_FUNCTION, CreateFunctionPayload(fn), db="a")
    effects = DECIDERS[EventType.CREATE_FUNCTION](view, event)
    assert _kinds(effects) == ["CopyResources", "CreateFunction"]
    copy, created = effects
    assert isinstance(copy, CopyResources) and isinstance(created, CreateFunction)
    assert copy.function.resource_uris[0].uri == "hdfs://nn/jars/f.jar"  # read from the source's
    assert created.function.resource_uris[0].uri == f"{WH}/_functions/a/f/f.jar"  # named by the copy
    _checked(effects, view.paths)


def test_a_database_is_created_at_its_derived_place_with_the_replica_s_marks() -> None:
    view = DictView()
    effects = DECIDERS[EventType.CREATE_DATABASE](view, b.create_db(1, "Sales", owner="x"))
    created = effects[0]
    assert isinstance(created, CreateDatabase)
    assert created.db.location == f"{WH}/sales.db" and created.db.parameters[REPL_SOURCE_PARAM] == b.SOURCE_ID
    assert created.db.parameters["owner"] == "x"
    _checked(effects, view.paths)


def test_an_insert_into_an_external_partition_claims_it_before_writing() -> None:
    view = DictView()
    snap = b.table("a", "x", ("d",), location="hdfs://nn:8020/data/x", table_type="EXTERNAL_TABLE")
    view.tables[("a", "x")] = _target(view, snap)
    event = b.insert(12, snap, [], values=["1"], replace=True)
    part = dataclasses.replace(b.partition(snap, "1"),
                               sd=StorageDescriptor(location="hdfs://nn:8020/elsewhere/d=1"))
    event = dataclasses.replace(event, payload=dataclasses.replace(event.payload, partition=part))
    effects = DECIDERS[EventType.INSERT](view, event)
    assert _kinds(effects) == ["RememberTable", "ClaimExternal", "WriteFiles"]
    claim, write = effects[1], effects[2]
    assert isinstance(claim, ClaimExternal) and isinstance(write, WriteFiles)
    assert claim.source_location == "hdfs://nn:8020/elsewhere/d=1" and write.target_dir == claim.target_dir
    assert write.replace and list(write.partition_values) == ["1"]


def test_an_unlocated_insert_syncs_a_table_replicated_by_state_and_halts_any_other() -> None:
    view = DictView()
    snap = b.table("a", "t")
    view.tables[("a", "t")] = _target(view, snap)
    event = b.insert(13, snap, [])
    event = dataclasses.replace(event, payload=dataclasses.replace(event.payload, unlocated=True))
    with pytest.raises(ApplyError, match="could not locate") as refused:
        DECIDERS[EventType.INSERT](view, event)
    assert refused.value.event_id == 13
    view.tables[("a", "t")] = marked(view.tables[("a", "t")], snap.sd.location)
    assert _kinds(DECIDERS[EventType.INSERT](view, event)) == ["RememberTable", "SyncByState"]


def test_a_merged_drop_applies_the_events_before_a_bad_one_then_refuses_it() -> None:
    view = DictView()
    snap = b.table("a", "t", ("d",))
    view.tables[("a", "t")] = _target(view, snap)
    good, bad = b.drop_partition(20, snap, [["1"]]), b.drop_partition(21, snap, [["1", "2"]])
    effects = DECIDERS[EventType.DROP_PARTITION](view, good)
    assert _kinds(effects) == ["RememberTable", "DropPartitions", "RemoveTree"]
    from streamer.target.apply.partitions import drop_partitions
    merged = drop_partitions(view, [good, bad])
    assert _kinds(merged) == ["RememberTable", "DropPartitions", "RemoveTree", "Refuse"]
    refused = merged[-1]
    assert isinstance(refused, Refuse) and isinstance(refused.error, ApplyError)
    assert refused.error.event_id == 21  # the bad event fails as itself
    with pytest.raises(ApplyError) as first:
        drop_partitions(view, [bad, good])  # first: nothing is done
    assert first.value.event_id == 21


def test_added_partitions_land_with_their_files_before_the_catalog_lists_them() -> None:
    view = DictView()
    snap = b.table("a", "t", ("d",))
    view.tables[("a", "t")] = _target(view, snap)
    ref = b.FileRef(uri=f"file://{b.SRC_WH}/a.db/t/d=1/f", checksum="00", checksum_algorithm="sha256",
                    size=1, partition="d=1")
    added = b.add_partition(22, snap, [b.partition(snap, "1")], [ref])
    effects = DECIDERS[EventType.ADD_PARTITION](view, added)
    assert _kinds(effects) == ["RememberTable", "PublishTogether", "PutPartitions", "SyncGone"]
    publish, put = effects[1], effects[2]
    assert isinstance(publish, PublishTogether) and isinstance(put, PutPartitions)
    where = [f"{WH}/a.db/t/d=1"]
    assert [c.target_dir for c in publish.copies] == [p.sd.location for p in put.partitions] == where
    _checked([AddPartitions(put.table, put.partitions)], view.paths)


class TxnView(DictView):
    def __init__(self, txns: dict[int, Txn]) -> None:
        super().__init__()
        self.txns = txns

    def txn(self, txn_id: int) -> Txn | None:
        return self.txns.get(txn_id)


def test_a_commit_publishes_every_write_before_the_one_flip_that_shows_them() -> None:
    view = TxnView({8: Txn(1)})
    snap = b.table("a", "t", ("d",))
    view.tables[("a", "t")] = _target(view, snap)
    ref = b.FileRef(uri=f"file://{b.SRC_WH}/a.db/t/d=1/delta_5_5/bucket_0", checksum="00",
                    checksum_algorithm="sha256", size=3)
    writes = [AcidWrite("a", "t", 5, [ref], "d=1", snap), AcidWrite("a", "t", 5, [ref], "d=1", snap)]
    commit = b.event(30, EventType.COMMIT_TXN, CommitTxnPayload(8, writes), db="a")
    effects = DECIDERS[EventType.COMMIT_TXN](view, commit)
    assert _kinds(effects) == ["PublishTogether", "CommitTxn"]
    publish, flip = effects
    assert isinstance(publish, PublishTogether) and isinstance(flip, CommitTxn)
    assert [c.target_dir for c in publish.copies] == [f"{WH}/a.db/t/d=1"] * 2
    assert dict(flip.visible) == {"a.t": [5]}
    view.txns[8] = Txn(1, TxnState.COMMITTED)
    assert DECIDERS[EventType.COMMIT_TXN](view, commit) == []  # a replay after the flip
    view.txns[8] = Txn(1, TxnState.ABORTED)
    with pytest.raises(ApplyError, match="aborted"):
        DECIDERS[EventType.COMMIT_TXN](view, commit)


def test_an_abort_copies_nothing_and_counts_what_it_wrote() -> None:
    view = TxnView({8: Txn(1, pending_bytes=9)})
    abort = b.event(31, EventType.ABORT_TXN, AbortTxnPayload(8))
    assert DECIDERS[EventType.ABORT_TXN](view, abort) == [AbortTxn(8, 9)]
    view.txns[8] = Txn(1, TxnState.ABORTED)
    assert DECIDERS[EventType.ABORT_TXN](view, abort) == []


def test_a_rename_of_a_table_missing_under_both_names_is_refused_before_anything() -> None:
    view = DictView()
    before = b.table("a", "x")
    after = dataclasses.replace(before, name="y")
    with pytest.raises(ApplyError, match="missing"):
        alter_table(view, b.alter_table(40, before, after))


def test_a_function_in_a_foreign_database_is_refused_as_such_before_its_resources_are_named() -> None:
    class Foreign(DictView):
        def check_owned(self, name: str) -> DatabaseSnapshot | None:
            raise ApplyError(f"target database {name!r} exists and is not created by replication", obj=name)

    twice = [ResourceUri("JAR", "hdfs://nn/a/f.jar"), ResourceUri("JAR", "hdfs://nn/b/f.jar")]
    fn = FunctionSnapshot("f", "a", "C", resource_uris=twice)  # two resources named alike, too
    event = b.event(41, EventType.CREATE_FUNCTION, CreateFunctionPayload(fn), db="a")
    with pytest.raises(ApplyError, match="not created by replication"):
        DECIDERS[EventType.CREATE_FUNCTION](Foreign(), event)


# --- properties ----------------------------------------------------------------------------------
names = st.text(string.ascii_lowercase + string.digits + "_", min_size=1, max_size=12)
keys = st.lists(names, max_size=3, unique=True).map(tuple)
kinds = st.sampled_from(["MANAGED_TABLE", "EXTERNAL_TABLE", "VIRTUAL_VIEW"])


@st.composite
def tables(draw: st.DrawFn) -> TableSnapshot:
    db, name, kind = draw(names), draw(names), draw(kinds)
    location = draw(st.sampled_from([None, f"hdfs://nn:8020/data/{db}/{name}",
                                     f"file://{b.SRC_WH}/{db}.db/{name}"]))
    if kind == "VIRTUAL_VIEW":
        location = None
    elif kind == "EXTERNAL_TABLE" and location is None:
        location = f"s3a://bucket/{db}/{name}"
    snap = b.table(db, name, draw(keys), table_type=kind)
    return dataclasses.replace(snap, sd=dataclasses.replace(snap.sd, location=location))


def _table_events(snap: TableSnapshot) -> list[Event]:
    renamed = dataclasses.replace(snap, name=snap.name + "_r")
    return [b.create_table(1, snap), b.alter_table(2, snap, snap), b.alter_table(3, snap, renamed),
            b.drop_table(4, snap)]


@settings(max_examples=200, deadline=None)
@given(tables(), st.booleans())
def test_every_table_decision_passes_the_door_and_changes_nothing(snap: TableSnapshot, exists: bool) -> None:
    """Whatever the table, every catalog effect its events decide is one the door lets through (names,
    places, bounds), deciding twice gives the same list, and deciding touches no view object."""
    view = DictView()
    if exists:
        view.tables[(snap.db, snap.name)] = _target(view, snap)
    before = dict(view.tables)
    for event in _table_events(snap):
        decide = DECIDERS[event.event_type]
        try:
            first = decide(view, event)
        except ApplyError as exc:  # a refusal, before anything is done: only an ALTER of a missing table
            assert not exists and event.event_type is EventType.ALTER_TABLE, exc
            continue
        assert first == decide(view, event)
        _checked(first, view.paths)
        assert view.tables == before
        for effect in first:
            if isinstance(effect, CreateTable | AlterTable):
                assert effect.table.parameters[REPL_SOURCE_PARAM] == b.SOURCE_ID
            if isinstance(effect, RemoveTree | RelocateDir):
                where = effect.directory if isinstance(effect, RemoveTree) else effect.new
                assert where.startswith(f"{WH}/{snap.db}.db/")  # only ever a managed table's own tree
            if isinstance(effect, DropTable):
                assert (effect.db, effect.name) == (snap.db, snap.name)
