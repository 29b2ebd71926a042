"""The door: every kind of catalog change is checked by the same rules before the catalog sees it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.errors import EventError
from streamer.events.model import (
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FunctionSnapshot,
    PartitionSnapshot,
    ResourceUri,
    SerDe,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply import door
from streamer.target.apply.by_state import SOURCE_LOCATION_PARAM
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.effects import (
    AddConstraints,
    AddPartitions,
    AlterDatabase,
    AlterPartitions,
    AlterTable,
    CatalogEffect,
    CreateDatabase,
    CreateFunction,
    CreateTable,
    DeleteStatistics,
    DropConstraint,
    DropDatabase,
    DropFunction,
    DropPartitions,
    DropTable,
    UpdateStatistics,
)
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from tests.unit.target import builders as b
from tests.unit.test_architecture import CATALOG_WRITES

WH, EXT = "/wh", "/ext"
PATHS = TargetPaths(WH, EXT)


def _table(db: str = "a", name: str = "t", *, external: bool = False, location: str | None = None,
           keys: tuple[str, ...] = ()) -> TableSnapshot:
    kind = "EXTERNAL_TABLE" if external else "MANAGED_TABLE"
    where = location or (f"{EXT}/hdfs/nn/data/{name}" if external else f"{WH}/{db}.db/{name}")
    snap = b.table(db, name, keys, location=where)
    return dataclasses.replace(snap, table_type=kind)


def _part(t: TableSnapshot, *values: str, location: str | None = None) -> PartitionSnapshot:
    spec = "/".join(f"{c.name}={v}" for c, v in zip(t.partition_keys, values, strict=False))
    where = location or f"{t.sd.location}/{spec}"
    return PartitionSnapshot(list(values), t.db, t.name, StorageDescriptor(location=where))


def _effects(db: str) -> list[CatalogEffect]:
    """One effect of every kind, each changing database ``db`` with places the door accepts."""
    t, pt = _table(db), _table(db, "p", keys=("k",))
    constraint = Constraint("PRIMARY_KEY", "pk", db, "t", "c")
    return [
        CreateDatabase(DatabaseSnapshot(db, location=f"{WH}/{db}.db")),
        AlterDatabase(db, DatabaseSnapshot(db, location=f"{WH}/{db}.db")),
        DropDatabase(db),
        CreateTable(t), AlterTable(db, "t", t), DropTable(db, "t"),
        AddPartitions(pt, [_part(pt, "1")]), AlterPartitions(pt, [_part(pt, "1")]),
        DropPartitions(db, "p", [["1"]], ["k"]),
        CreateFunction(FunctionSnapshot("f", db, "x.F")), DropFunction(db, "f"),
        AddConstraints([constraint]), DropConstraint(db, "t", "pk"),
        UpdateStatistics(db, "t", None, [ColumnStatistic("c", "bigint", "LONG", num_nulls=0)]),
        DeleteStatistics(db, "t", None, None),
    ]


class _Recorder:
    """A catalog that only notes which method each effect calls."""

    def __init__(self) -> None:
        self.called: list[str] = []

    def __getattr__(self, name: str) -> object:
        return lambda *args, **kwargs: self.called.append(name)


def test_every_catalog_write_method_has_an_effect() -> None:
    """The door knows every way to change a catalog the architecture check forbids elsewhere, one
    effect kind per method."""
    recorder = _Recorder()
    for effect in _effects("a"):
        door._do(recorder, effect)  # type: ignore[arg-type]
    assert sorted(recorder.called) == sorted(CATALOG_WRITES)


@pytest.fixture
def ctx(tmp_path: Path) -> ApplyContext:
    catalog = MemoryCatalog()
    catalog.create_database(DatabaseSnapshot("mine", parameters={REPL_SOURCE_PARAM: b.SOURCE_ID}))
    catalog.create_database(DatabaseSnapshot("theirs", parameters={REPL_SOURCE_PARAM: "other"}))
    catalog.create_database(DatabaseSnapshot("users"))  # not made by replication
    paths = TargetPaths(str(tmp_path / "wh"), str(tmp_path / "ext"))
    return ApplyContext(catalog, FileCopier(max_workers=1), paths, b.SOURCE_ID)


@pytest.mark.parametrize("kind", range(len(_effects("x"))), ids=[type(e).__name__ for e in _effects("x")])
@pytest.mark.parametrize("db", ["theirs", "users"])
def test_no_kind_of_change_reaches_a_database_this_source_does_not_own(
    ctx: ApplyContext, kind: int, db: str
) -> None:
    effect = _relocated(_effects(db)[kind], ctx.paths)
    before = dict(ctx.catalog.databases)  # type: ignore[attr-defined]
    with pytest.raises(EventError, match=f"target database '{db}' exists and is"):
        ctx.do(effect)
    assert ctx.catalog.calls[-1:] != [type(effect).__name__]  # type: ignore[attr-defined]
    assert ctx.catalog.databases == before  # type: ignore[attr-defined]


def test_a_change_of_a_database_this_source_owns_is_done(ctx: ApplyContext) -> None:
    ctx.do(_relocated(CreateTable(_table("mine")), ctx.paths))
    assert ctx.catalog.get_table("mine", "t") is not None


def test_places_are_checked_before_the_catalog_is_called(ctx: ApplyContext) -> None:
    misplaced = _relocated(CreateTable(_table("mine", location=f"{WH}/theirs.db/t")), ctx.paths)
    with pytest.raises(EventError, match="not below its database's directory"):
        ctx.do(misplaced)
    assert ctx.catalog.get_table("mine", "t") is None


def test_a_rename_into_a_foreign_database_is_refused(ctx: ApplyContext) -> None:
    ctx.do(_relocated(CreateTable(_table("mine")), ctx.paths))
    moved = _relocated(CreateTable(_table("theirs")), ctx.paths)
    assert isinstance(moved, CreateTable)
    with pytest.raises(EventError, match="'theirs'"):
        ctx.do(AlterTable("mine", "t", moved.table))
    assert ctx.catalog.get_table("mine", "t") is not None


def _relocated(effect: CatalogEffect, paths: TargetPaths) -> CatalogEffect:
    """``effect`` with its places moved from ``/wh`` and ``/ext`` to ``paths``' roots."""
    wh, ext = paths.warehouse.path, paths.external.path if paths.external else EXT

    def move(value: object) -> object:
        if isinstance(value, str):
            return value.replace(f"{WH}/", f"{wh}/").replace(f"{EXT}/", f"{ext}/")
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.replace(value, **{f.name: move(getattr(value, f.name))
                                                 for f in dataclasses.fields(value) if f.init})
        if isinstance(value, list):
            return [move(v) for v in value]
        if isinstance(value, dict):
            return {k: move(v) for k, v in value.items()}
        return value

    return move(effect)  # type: ignore[return-value]


# --- places, names, bounds: pure -----------------------------------------------------------------
REFUSED: dict[str, CatalogEffect] = {
    "managed table in another database's directory": CreateTable(_table("a", location=f"{WH}/b.db/t")),
    "managed table at its database's directory": CreateTable(_table("a", location=f"{WH}/a.db")),
    "managed table outside the warehouse": CreateTable(_table("a", location="/etc/t")),
    "external table outside the external base": CreateTable(
        _table("a", external=True, location=f"{WH}/a.db/x")),
    "external table at the external base": AlterTable("a", "t", _table("a", external=True, location=EXT)),
    "view with a location": CreateTable(dataclasses.replace(_table("a"), table_type="VIRTUAL_VIEW")),
    "managed partition outside its table": AddPartitions(
        _table("a", keys=("k",)), [_part(_table("a", keys=("k",)), "1", location=f"{WH}/a.db/u/k=1")]),
    "managed partition at its table's directory": AlterPartitions(
        _table("a", keys=("k",)), [_part(_table("a", keys=("k",)), "1", location=f"{WH}/a.db/t")]),
    "external partition outside the external base": AddPartitions(
        _table("a", external=True, keys=("k",)),
        [_part(_table("a", external=True, keys=("k",)), "1", location="/data/k=1")]),
    "partition of another table": AddPartitions(
        _table("a", keys=("k",)), [dataclasses.replace(_part(_table("a", keys=("k",)), "1"), table="u")]),
    "partition without one value per key": AddPartitions(
        _table("a", keys=("k", "j")), [_part(_table("a", keys=("k", "j")), "1")]),
    "partition drop of an empty spec": DropPartitions("a", "t", [[]], None),
    "partition drop of a short spec": DropPartitions("a", "t", [["1"]], ["k", "j"]),
    "serde path outside the roots": CreateTable(dataclasses.replace(_table("a"), sd=dataclasses.replace(
        _table("a").sd, serde=SerDe(parameters={"path": "hdfs://nn/b.db/t"})))),
    "table parameter outside the roots": CreateTable(
        dataclasses.replace(_table("a"), parameters={"x.location": "file:///etc"})),
    "database outside the roots": CreateDatabase(DatabaseSnapshot("a", location="file:///etc/a.db")),
    "function resource outside the roots": CreateFunction(
        FunctionSnapshot("f", "a", "x.F", resource_uris=[ResourceUri("JAR", "hdfs://nn/lib/f.jar")])),
    "database name with a slash": DropDatabase("a/../b"),
    "table name of dots": DropTable("a", ".."),
    "database name with a newline": AlterDatabase("a\nb", DatabaseSnapshot("a\nb")),
    "table name longer than Hive's": DropTable("a", "t" * 257),
    "too many partitions in one call": DropPartitions("a", "t", [["1"]] * (door.MAX_PARTITIONS_PER_CALL + 1)),
}


@pytest.mark.parametrize("effect", REFUSED.values(), ids=REFUSED.keys())
def test_the_door_refuses(effect: CatalogEffect) -> None:
    with pytest.raises(EventError):
        door.check_effect(effect, PATHS)


def test_the_door_passes_what_handlers_make() -> None:
    source_marked = dataclasses.replace(_table("a"), parameters={SOURCE_LOCATION_PARAM: "hdfs://nn/a.db/t"})
    for effect in [*_effects("a"), CreateTable(source_marked)]:
        door.check_effect(effect, PATHS)


names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)


@settings(max_examples=200)
@given(db=names, table=names)
def test_names_the_door_passes_are_one_path_segment(db: str, table: str) -> None:
    """Whatever names a crafted record carries: passed, each is one path segment without control
    characters; refused, with an error naming the object."""
    try:
        door.check_effect(DropTable(db, table), PATHS)
    except EventError as exc:
        assert exc.obj
        return
    for name in (db, table):
        assert "/" not in name and name not in (".", "..")
        assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)


# --- file changes: the place check ---------------------------------------------------------------
def _wh(ctx: ApplyContext, *rel: str) -> str:
    return ctx.paths.warehouse.join(*rel)


@pytest.mark.parametrize("rel", [("theirs.db", "t"), ("users.db",), ("_functions", "theirs", "f"),
                                 ("loose",), ("_streamer", "x"), ("theirs.db",)])
def test_no_file_change_reaches_a_directory_this_source_does_not_own(
    ctx: ApplyContext, rel: tuple[str, ...]
) -> None:
    url = _wh(ctx, *rel)
    with pytest.raises(EventError):
        door.check_place(ctx, url, event_id=5)
    with pytest.raises(EventError):
        door.remove_tree(ctx, url, event_id=5)


def test_a_file_change_of_an_owned_or_new_database_passes(ctx: ApplyContext, tmp_path: Path) -> None:
    for rel in [("mine.db", "t"), ("mine.db", "t", "p=1"), ("_functions", "mine", "f"), ("new.db", "t")]:
        door.check_place(ctx, _wh(ctx, *rel))
    (tmp_path / "wh" / "mine.db" / "t").mkdir(parents=True)
    door.remove_tree(ctx, _wh(ctx, "mine.db", "t"), event_id=5)
    assert not (tmp_path / "wh" / "mine.db" / "t").exists()


def test_a_removal_never_reaches_streamers_own_tree(ctx: ApplyContext, tmp_path: Path) -> None:
    """Another source's staging directory (``_streamer/`` below the warehouse root) is no place this
    source may remove."""
    theirs = tmp_path / "wh" / "_streamer" / "staging" / "other"
    (theirs / "1-x").mkdir(parents=True)
    with pytest.raises(EventError):
        door.remove_tree(ctx, _wh(ctx, "_streamer", "staging", "other", "1-x"), event_id=6)
    assert (theirs / "1-x").is_dir()


def test_an_external_directory_another_source_holds_is_not_changed(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    paths = TargetPaths(str(tmp_path / "wh"), str(tmp_path / "ext"))
    theirs = ApplyContext(catalog, FileCopier(max_workers=1), paths, "other")
    catalog.create_database(DatabaseSnapshot("o", parameters={REPL_SOURCE_PARAM: "other"}))
    table = _table("o", "t", external=True)
    catalog.create_table(dataclasses.replace(table, parameters={REPL_SOURCE_PARAM: "other"}))
    held = paths.external_location("hdfs://nn/data/sales")
    theirs.claim_external("hdfs://nn/data/sales", held, "o.t")
    mine = ApplyContext(catalog, FileCopier(max_workers=1), paths, b.SOURCE_ID)
    for url in (held, held + "/p=1"):
        with pytest.raises(EventError, match="the directory of"):
            door.check_place(mine, url)
    door.check_place(mine, paths.external_location("hdfs://nn/data/other"))
    door.check_place(theirs, held + "/p=1")


@pytest.mark.parametrize("effect", REFUSED.values(), ids=REFUSED.keys())
def test_the_door_refuses_before_the_catalog_is_called(ctx: ApplyContext, effect: CatalogEffect) -> None:
    """The same refusals through ``ctx.do``: ``execute`` checks before it calls anything."""
    calls = list(ctx.catalog.calls)  # type: ignore[attr-defined]
    with pytest.raises(EventError):
        ctx.do(_relocated(effect, ctx.paths))
    assert ctx.catalog.calls == calls  # type: ignore[attr-defined]
