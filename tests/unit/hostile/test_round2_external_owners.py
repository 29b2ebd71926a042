"""Issue 38 item 1: two sources share one target; a record of one names the other's external
directory (the same source URI, another case or userinfo of its authority, a parent, a directory
inside it) and an INSERT OVERWRITE with no file. Before: the other source's replica was swapped
away. Now the directory has an owner, and the record's database halts with nothing changed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streamer.events.model import Event, TableSnapshot
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.apply.sources import SourceRules
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b

B_LOCATION = "hdfs://nn-b:8020/data/sales"


@dataclasses.dataclass
class Source:
    """One source's target job: its own applier and state dir, the target's catalog and roots."""

    applier: Applier
    state: TargetState

    def run(self, events: list[Event]) -> list[int]:
        planned = plan(events, self.applier.load_progress(), self.state.halts())
        return run_plan(self.applier, planned, self.state).applied


@dataclasses.dataclass
class Target:
    root: Path
    catalog: MemoryCatalog
    paths: TargetPaths

    def source(self, source_id: str, prefixes: tuple[str, ...] = ()) -> Source:
        state = TargetState(self.root / f"state-{source_id}")
        copier = FileCopier(max_workers=2)
        applier = Applier(self.catalog, copier, self.paths, source_id, state=state,
                          sources=SourceRules(prefixes))
        return Source(applier, state)

    def replica_files(self) -> dict[str, bytes]:
        ext = self.root / "ext"
        return {str(p.relative_to(ext)): p.read_bytes() for p in ext.rglob("*") if p.is_file()}


@pytest.fixture
def target(tmp_path: Path) -> Target:
    (tmp_path / "wh").mkdir()
    paths = TargetPaths((tmp_path / "wh").as_uri(), (tmp_path / "ext").as_uri())
    return Target(tmp_path, MemoryCatalog(), paths)


def _external(db: str, name: str, location: str) -> TableSnapshot:
    return b.table(db, name, location=location, table_type="EXTERNAL_TABLE")


def _b_replica(target: Target) -> tuple[Source, Path]:
    """Source B's external table, replicated, with a data file in its target directory."""
    src_b = target.source("src-b")
    sales = _external("b", "sales", B_LOCATION)
    assert src_b.run([b.create_db(1, "b"), b.create_table(2, sales)]) == [1, 2]
    table = target.catalog.get_table("b", "sales")
    assert table is not None and table.sd.location is not None
    replica = Path(table.sd.location.removeprefix("file://"))
    replica.mkdir(parents=True, exist_ok=True)
    (replica / "000000_0").write_bytes(b"B's rows")
    return src_b, replica


@pytest.mark.parametrize("location", [
    B_LOCATION,                                # the same source URI
    "hdfs://NN-B:8020/data/sales",             # another case of the authority
    "hdfs://mallory@nn-b:8020/data/sales",     # userinfo
    "hdfs://nn-b:8020/data",                   # a parent of B's
    "hdfs://nn-b:8020/data/sales/2026",        # a directory inside B's
])
def test_a_record_of_one_source_never_takes_another_sources_external_directory(
    target: Target, location: str
) -> None:
    _, replica = _b_replica(target)
    before = target.replica_files()
    src_a = target.source("src-a")
    taken = _external("a", "sales", location)
    applied = src_a.run([b.create_db(1, "a"), b.create_table(2, taken), b.insert(3, taken, [], replace=True)])
    assert applied == [1], applied
    halt = src_a.state.halts()["a"]
    assert halt.event_id == 2, halt
    assert target.catalog.get_table("a", "sales") is None
    assert target.replica_files() == before
    assert (replica / "000000_0").read_bytes() == b"B's rows"


def test_a_partition_placed_in_another_sources_directory_is_refused_too(target: Target) -> None:
    _, replica = _b_replica(target)
    src_a = target.source("src-a")
    daily = b.table("a", "daily", ("dt",), location="hdfs://nn-a:8020/data/daily",
                    table_type="EXTERNAL_TABLE")
    part = b.partition(daily, "1")
    part = dataclasses.replace(part, sd=dataclasses.replace(part.sd, location=B_LOCATION))
    events = [b.create_db(1, "a"), b.create_table(2, daily), b.add_partition(3, daily, [part])]
    assert src_a.run(events) == [1, 2]
    assert src_a.state.halts()["a"].event_id == 3
    assert target.catalog.get_partition("a", "daily", ["1"]) is None
    assert (replica / "000000_0").read_bytes() == b"B's rows"


def test_a_directory_whose_owner_is_gone_is_taken_over(target: Target) -> None:
    src_b, _ = _b_replica(target)
    assert src_b.run([b.drop_table(3, _external("b", "sales", B_LOCATION))]) == [3]
    src_a = target.source("src-a")
    taken = _external("a", "sales", B_LOCATION)
    assert src_a.run([b.create_db(1, "a"), b.create_table(2, taken)]) == [1, 2]
    # and B, re-creating its table there, is now the one refused
    assert src_b.run([b.create_table(4, _external("b", "sales", B_LOCATION))]) == []
    assert src_b.state.halts()["b"].event_id == 4


def test_two_tables_of_one_source_may_share_a_directory_as_on_the_source(target: Target) -> None:
    src_b, _ = _b_replica(target)
    view_like = _external("b", "sales_again", B_LOCATION)
    inner = _external("b", "sales_2026", B_LOCATION + "/2026")
    assert src_b.run([b.create_table(3, view_like), b.create_table(4, inner)]) == [3, 4]
    assert not src_b.state.halts()


def test_declared_prefixes_are_the_authorities_external_data_may_come_from(target: Target) -> None:
    src_a = target.source("src-a", prefixes=("hdfs://nn-a:8020/data",))
    elsewhere = _external("a", "t", "hdfs://nn-b:8020/other")
    same_nn = _external("a", "u", "hdfs://NN-A:8020/warehouse/u")  # another path on a declared authority
    events = [b.create_db(1, "a"), b.create_table(2, same_nn), b.create_table(3, elsewhere)]
    assert src_a.run(events) == [1, 2]
    halt = src_a.state.halts()["a"]
    assert halt.event_id == 3 and "--source-prefix" in halt.cause, halt
