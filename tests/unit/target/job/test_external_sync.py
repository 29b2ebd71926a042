"""The external-table directory sync: plan, path mapping and a real sync on local files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import PathEscapeError
from streamer.events.model import (
    Column,
    DatabaseSnapshot,
    PartitionSnapshot,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.sources import SourceRules
from streamer.target.job.external_sync import ExternalSync, plan_dir, source_dir

SRC = "src1"

names = st.dictionaries(st.sampled_from("abcdef"), st.sampled_from(["c1", "c2"]), max_size=6)


@given(names, names)
def test_plan_makes_target_equal_source(source: dict[str, str], target: dict[str, str]) -> None:
    todo = plan_dir(source, target)
    after = {n: c for n, c in target.items() if n not in todo.delete}
    after.update({n: source[n] for n in todo.copy})
    assert after == source
    assert all(target.get(n) != source[n] for n in todo.copy)  # nothing equal is copied
    assert plan_dir(source, after) == plan_dir(source, source)  # a second cycle does nothing
    assert not plan_dir(source, source).copy and not plan_dir(source, source).delete


def test_source_dir_inverts_the_external_location() -> None:
    paths = TargetPaths("file:///t/wh", "file:///t/ext")
    target = paths.external_location("file:/data/sales/ext")
    assert target == "file:///t/ext/file/_/data/sales/ext"
    assert source_dir(paths, target, "file://") == "file:///data/sales/ext"
    hdfs = paths.external_location("hdfs://nn:8020/data/x")
    assert source_dir(paths, hdfs, "file://") == "hdfs://nn:8020/data/x"  # the layout names the source
    with pytest.raises(PathEscapeError, match="not under"):
        source_dir(paths, "file:///t/wh/db.db/x", "file://")
    for bad in ("file:///t/ext/file/_/data/%2e%2e/x", "file:///t/ext/file/_", "file:///t/ext/data",
                "file:///t/ext/bad scheme!/_/x", "file:///t/ext/hdfs/../x"):
        with pytest.raises(PathEscapeError):
            source_dir(paths, bad, "file://")


def test_source_dir_of_the_path_layout_goes_through_the_prefix() -> None:
    paths = TargetPaths("file:///t/wh", "file:///t/ext", external_layout="path")
    target = paths.external_location("file:/data/sales/ext")
    assert target == "file:///t/ext/data/sales/ext"
    assert source_dir(paths, target, "file://") == "file:///data/sales/ext"
    assert source_dir(paths, "file:/t/ext/data/x", "hdfs://nn:8020") == "hdfs://nn:8020/data/x"
    with pytest.raises(PathEscapeError, match="not under"):
        source_dir(paths, "file:///t/wh/db.db/x", "file://")
    with pytest.raises(PathEscapeError):
        source_dir(paths, "file:///t/ext/data/%2e%2e/x", "file://")
    with pytest.raises(PathEscapeError):
        source_dir(paths, "file:///t/ext/data", "bad scheme!://")


def _hadoop(path: Path) -> str:
    """A location as Hive writes it: ``file:/abs/path``, not percent-encoded."""
    return f"file:{path}"


def _catalog(src_dir: Path, partitioned: bool, paths: TargetPaths) -> MemoryCatalog:
    catalog = MemoryCatalog()
    catalog.create_database(DatabaseSnapshot("db", parameters={REPL_SOURCE_PARAM: SRC}))
    location = paths.external_location(_hadoop(src_dir))
    keys = [Column("dt", "string")] if partitioned else []
    table = TableSnapshot(
        "ext", "db", "EXTERNAL_TABLE", StorageDescriptor(location=location), keys, {REPL_SOURCE_PARAM: SRC}
    )
    catalog.create_table(table)
    catalog.create_table(TableSnapshot("managed", "db", sd=StorageDescriptor(location="file:///t/wh/x")))
    if partitioned:
        part_loc = paths.external_location(_hadoop(src_dir / "dt=1"))
        catalog.add_partitions(
            "db", "ext", [PartitionSnapshot(["1"], sd=StorageDescriptor(location=part_loc))]
        )
    return catalog


def _declared(catalog: MemoryCatalog, paths: TargetPaths, source: Path) -> ExternalSync:
    """A sync whose source store is declared (``--source-prefix``), as every sync's must be."""
    copier = FileCopier(roots=paths.roots, sources=SourceRules(prefixes=(source.as_uri(),)))
    return ExternalSync(catalog, paths, SRC, copier=copier)


def test_an_external_sync_reads_nothing_without_a_declared_prefix(tmp_path: Path) -> None:
    """It lists and hashes the directory itself: with no --source-prefix nothing is read, and the
    failure says which flag to set; one declared elsewhere reads nothing either."""
    paths = TargetPaths((tmp_path / "wh").as_uri(), (tmp_path / "ext").as_uri())
    table_dir = tmp_path / "source" / "ext"
    table_dir.mkdir(parents=True)
    (table_dir / "a").write_bytes(b"one")
    for sync in (ExternalSync(_catalog(table_dir, False, paths), paths, SRC),
                 _declared(_catalog(table_dir, False, paths), paths, tmp_path / "elsewhere")):
        report = sync.sync_once()
        assert report.copied == 0 and len(report.failures) == 1, report
        assert "--source-prefix" in next(iter(report.failures.values()))
    assert not (tmp_path / "ext" / "file").exists()


@pytest.mark.parametrize("partitioned", [False, True])
def test_sync_copies_changes_and_deletes_converging(tmp_path: Path, partitioned: bool) -> None:
    paths = TargetPaths((tmp_path / "wh").as_uri(), (tmp_path / "ext").as_uri())
    table_dir = tmp_path / "source" / "ext"
    src = table_dir / "dt=1" if partitioned else table_dir
    src.mkdir(parents=True)
    (src / "a").write_bytes(b"one")
    (src / "b").write_bytes(b"two")
    (src / ".hidden").write_bytes(b"skip")
    sync = _declared(_catalog(table_dir, partitioned, paths), paths, tmp_path / "source")
    dst = tmp_path / "ext" / "file" / "_" / str(src).lstrip("/")

    report = sync.sync_once()
    assert (report.dirs, report.copied, report.deleted, report.failures) == (1, 2, 0, {})
    assert {p.name: p.read_bytes() for p in dst.iterdir()} == {"a": b"one", "b": b"two"}

    (src / "a").write_bytes(b"ONE!")  # changed without an event
    (src / "b").unlink()
    (src / "c").write_bytes(b"three")
    (dst / ".keep").write_bytes(b"hidden target files stay")
    report = sync.sync_once()
    assert (report.copied, report.deleted) == (2, 1)
    assert {p.name: p.read_bytes() for p in dst.iterdir()} == {
        "a": b"ONE!",
        "c": b"three",
        ".keep": b"hidden target files stay",
    }
    assert sync.sync_once().copied == 0  # converged: nothing more to do


def test_missing_source_directory_is_never_mirrored_as_empty(tmp_path: Path) -> None:
    paths = TargetPaths((tmp_path / "wh").as_uri(), (tmp_path / "ext").as_uri())
    table_dir = tmp_path / "source" / "ext"
    table_dir.mkdir(parents=True)
    (table_dir / "a").write_bytes(b"one")
    sync = _declared(_catalog(table_dir, False, paths), paths, tmp_path / "source")
    sync.sync_once()
    (table_dir / "a").unlink()
    table_dir.rmdir()
    report = sync.sync_once()
    assert report.missing_sources == [f"file://{table_dir}"] and report.deleted == 0
    assert (tmp_path / "ext" / "file" / "_" / str(table_dir).lstrip("/") / "a").read_bytes() == b"one"


def test_run_if_due_honours_the_interval(tmp_path: Path) -> None:
    now = [100.0]
    paths = TargetPaths((tmp_path / "wh").as_uri(), (tmp_path / "ext").as_uri())
    sync = ExternalSync(MemoryCatalog(), paths, SRC, clock=lambda: now[0])
    assert sync.run_if_due(10) is not None
    now[0] += 5
    assert sync.run_if_due(10) is None
    now[0] += 5
    assert sync.run_if_due(10) is not None
    assert sync.run_if_due(0) is None  # 0 = off


def test_the_timer_never_writes_where_another_source_holds_the_directory(tmp_path: Path) -> None:
    """The timer's writes pass the door: an external directory another source's live claim holds is
    reported failed and left untouched, whatever this source's catalog says lives there."""
    from streamer.target.apply.context import ApplyContext

    paths = TargetPaths((tmp_path / "wh").as_uri(), (tmp_path / "ext").as_uri())
    table_dir = tmp_path / "source" / "ext"
    table_dir.mkdir(parents=True)
    (table_dir / "a").write_bytes(b"one")
    catalog = _catalog(table_dir, False, paths)
    catalog.create_database(DatabaseSnapshot("o", parameters={REPL_SOURCE_PARAM: "other"}))
    theirs = TableSnapshot("t", "o", "EXTERNAL_TABLE", StorageDescriptor(), [], {REPL_SOURCE_PARAM: "other"})
    catalog.create_table(theirs)
    held = paths.external_location(_hadoop(table_dir))
    ApplyContext(catalog, FileCopier(), paths, "other").claim_external(_hadoop(table_dir), held, "o.t")
    report = _declared(catalog, paths, tmp_path / "source").sync_once()
    assert report.copied == 0 and list(report.failures) == [held], report
    assert "the directory of" in report.failures[held]
    assert not (tmp_path / "ext" / "file").exists() or not any((tmp_path / "ext").rglob("a"))
