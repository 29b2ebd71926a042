"""``streamer dump`` of a real bundled source warehouse (its notification log written as a
DbNotificationListener's), then ``streamer load`` of the dump into a fresh target metastore in child
processes given no broker address: the replica equals the source, read from the target's catalog
and files (streamer's checksums are compared with the source's files)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, cast

import pytest

from streamer.archive.manifest import MANIFEST_NAME, from_json
from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.warehouse import Warehouse
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from tests.integration.target.helpers import Source, TargetStack, assert_target_equals_source, mixed_workload

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


class _DumpedSource:
    """What ``assert_target_equals_source`` reads of a source: its warehouse (no agent, no broker)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse


@pytest.mark.parametrize("with_data", [False, True], ids=["references", "with-data"])
def test_a_dump_loads_with_no_broker_and_equals_the_source(
    hms: EmbeddedMetastore, tmp_path: Path, with_data: bool
) -> None:
    prefix = f"d{uuid.uuid4().hex[:6]}_"
    source_id = f"src-{prefix.rstrip('_')}"
    work = tmp_path / "source"
    url = str(work / "metastore.sqlite")
    wh = Warehouse.open(url, root=work / "warehouse", cmroot=work / "cmroot", source_id=source_id)
    try:
        mixed_workload(wh, prefix, 30, seed=7)
        stack = TargetStack(hms, tmp_path / "target")
        dump = tmp_path / "dump"
        out = stack.cli(
            "dump", "--source-id", source_id, "--warehouse", url, "--policy", f"`{prefix}.*`",
            "--checksum-algorithm", CHECKSUM_ALGORITHM, "--cmroot", str(work / "cmroot"),
            "--to", str(dump), "--records-per-file", "3", *(["--with-data"] if with_data else []),
        ).stdout
        manifest = from_json((dump / MANIFEST_NAME).read_bytes())
        assert len(manifest.files) >= 2 and f"{manifest.records} records" in out
        assert manifest.files[0].first_offset == 0 and manifest.files[-1].last_offset == manifest.records - 1
        moved = tmp_path / "moved"
        if with_data:  # the source's files (and change-manager copies) are out of reach of the load
            assert any((dump / "data").rglob("*"))
            moved.mkdir()
            for name in ("warehouse", "cmroot"):
                if (work / name).exists():
                    (work / name).rename(moved / name)
        done = stack.cli(
            "load", "--from", str(dump), "--hms-uri", stack.hms.uri,
            "--warehouse-root", stack.warehouse_root.as_uri(),
            "--external-base-dir", stack.external_base.as_uri(), "--state-dir", str(stack.state_dir),
            *(["--source-prefix", (dump / "data").resolve().as_uri()] if with_data else []),
        )
        for name in ("warehouse", "cmroot"):  # back, for the comparison with the source
            if (moved / name).exists():
                (moved / name).rename(work / name)
        assert f"event {manifest.last_event_id}" in done.stdout + done.stderr
        assert_target_equals_source(cast(Source, cast(Any, _DumpedSource(wh))), stack, None)
    finally:
        wh.close()
