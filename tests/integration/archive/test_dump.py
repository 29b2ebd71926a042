"""``streamer dump`` of a real bundled source warehouse (its notification log written as a
DbNotificationListener's), then ``streamer load`` of the dump into a fresh target metastore in child
processes given no broker address: the replica equals the source, read from the target's catalog
and files (streamer's checksums are compared with the source's files). A dump holds the log's events
after its bootstrap too: a workload written between the bootstrap's read and the head's is loaded
from the dump alone, its data copied by ``--with-data``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from streamer.archive.dump import DumpSettings, run_dump
from streamer.archive.manifest import MANIFEST_NAME, from_json
from streamer.archive.reading import read_archive
from streamer.source.enrich import EnrichSettings
from streamer.source.policy import PolicySet
from streamer.source.reader import SqlNotificationReader
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.warehouse import Warehouse
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from tests.integration.archive.helpers import load
from tests.integration.target.helpers import Source, TargetStack, assert_target_equals_source, mixed_workload

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


class _DumpedSource:
    """What ``assert_target_equals_source`` reads of a source: its warehouse (no agent, no broker)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse


@pytest.fixture
def bundled(tmp_path: Path, prefix: str) -> Iterator[tuple[Warehouse, str]]:
    """A fresh bundled warehouse (and its URL) with a change-manager root, and no agent."""
    work = tmp_path / "source"
    url = str(work / "metastore.sqlite")
    wh = Warehouse.open(url, root=work / "warehouse", cmroot=work / "cmroot", source_id=f"src-{prefix[:-1]}")
    try:
        yield wh, url
    finally:
        wh.close()


@contextlib.contextmanager
def _out_of_reach(work: Path, moved: Path) -> Iterator[None]:
    """The source's files (and change-manager copies) moved away meanwhile: a load reads the dump only."""
    moved.mkdir()
    for name in ("warehouse", "cmroot"):
        if (work / name).exists():
            (work / name).rename(moved / name)
    try:
        yield
    finally:
        for name in ("warehouse", "cmroot"):  # back, for the comparison with the source
            if (moved / name).exists():
                (moved / name).rename(work / name)


@pytest.mark.parametrize("with_data", [False, True], ids=["references", "with-data"])
def test_a_dump_loads_with_no_broker_and_equals_the_source(
    target_stack: TargetStack, tmp_path: Path, prefix: str, bundled: tuple[Warehouse, str], with_data: bool
) -> None:
    (wh, url), stack = bundled, target_stack
    work = tmp_path / "source"
    mixed_workload(wh, prefix, 30, seed=7)
    dump = tmp_path / "dump"
    out = stack.cli(
        "dump", "--source-id", wh.source_id, "--warehouse", url, "--policy", f"`{prefix}.*`",
        "--checksum-algorithm", CHECKSUM_ALGORITHM, "--cmroot", str(work / "cmroot"),
        "--to", str(dump), "--records-per-file", "3", *(["--with-data"] if with_data else []),
    ).stdout
    manifest = from_json((dump / MANIFEST_NAME).read_bytes())
    assert len(manifest.files) >= 2 and f"{manifest.records} records" in out
    assert manifest.files[0].first_offset == 0 and manifest.files[-1].last_offset == manifest.records - 1
    if with_data:
        assert any((dump / "data").rglob("*"))
        with _out_of_reach(work, tmp_path / "moved"):
            done = load(stack, dump, "--source-prefix", (dump / "data").resolve().as_uri())
    else:
        done = load(stack, dump)
    assert f"event {manifest.last_event_id}" in done
    assert_target_equals_source(cast(Source, cast(Any, _DumpedSource(wh))), stack, None)


def test_the_events_after_a_dump_s_bootstrap_load_from_it_with_their_data(
    target_stack: TargetStack, tmp_path: Path, prefix: str, bundled: tuple[Warehouse, str]
) -> None:
    """DDL and inserts written after the bootstrap's event id E, before the dump reads the log's head,
    reach the target from the dump alone (data copied by ``--with-data``; no broker, no source files)."""
    wh, url = bundled
    work = tmp_path / "source"
    mixed_workload(wh, prefix, 20, seed=3)
    later: list[int] = []

    def write_more(bootstrap_id: int) -> None:
        assert bootstrap_id == wh.current_event_id()
        later.append(mixed_workload(wh, prefix, 30, seed=4))  # tables made, filled, dropped; a db dropped

    dump = tmp_path / "dump"
    enrich = EnrichSettings(checksum_algorithm=CHECKSUM_ALGORITHM, cmroot=str(work / "cmroot"))
    settings = DumpSettings(wh.source_id, str(dump), PolicySet.parse([f"`{prefix}.*`"]), enrich,
                            with_data=True, records_per_file=10)
    reader = SqlNotificationReader(url)
    try:
        summary = run_dump(settings, reader, WarehouseCatalog(wh), after_bootstrap=write_more)
    finally:
        reader.close()
    assert summary.last_event_id == later[0] == wh.current_event_id()
    assert summary.last_event_id - summary.bootstrap_id >= 30 and summary.data_bytes > 0
    _, manifest = read_archive(str(dump))
    events_after = sum(e.records for e in manifest.files if e.last_event_id > summary.bootstrap_id)
    assert manifest.last_event_id == summary.last_event_id and events_after >= 20

    with _out_of_reach(work, tmp_path / "moved"):
        done = load(target_stack, dump, "--source-prefix", (dump / "data").resolve().as_uri())
    assert f"event {summary.last_event_id}" in done
    assert_target_equals_source(cast(Source, cast(Any, _DumpedSource(wh))), target_stack, None)
