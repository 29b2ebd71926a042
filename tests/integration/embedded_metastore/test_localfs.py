"""The embedded metastore's local filesystem: the same directories as Hadoop's, no subprocesses."""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from pathlib import Path

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import Column, DatabaseSnapshot, PartitionSnapshot, TableSnapshot
from streamer.metastore.thrift import HmsCatalog

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SHIMMED = ("chmod", "ls", "readlink", "stat", "chown")


def _shim_path(tmp_path: Path, log: Path) -> str:
    """A PATH whose first directory logs every call of the commands Hadoop shells out to."""
    shims = tmp_path / "shims"
    shims.mkdir(parents=True)
    for name in SHIMMED:
        real = shutil.which(name)
        assert real is not None, name
        script = shims / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\nexec "{real}" "$@"\n')
        script.chmod(0o755)
    return f"{shims}{os.pathsep}{os.environ['PATH']}"


def _make_partitioned_table(hms: EmbeddedMetastore) -> Path:
    db = f"fs_{uuid.uuid4().hex[:8]}"
    with HmsCatalog(hms.uri) as catalog:
        catalog.create_database(DatabaseSnapshot(name=db))
        catalog.create_table(TableSnapshot(name="t", db=db, partition_keys=[Column("k", "string")]))
        catalog.add_partitions(db, "t", [PartitionSnapshot(values=[str(i)]) for i in range(3)])
        table = catalog.get_table(db, "t")
    assert table is not None and table.sd.location
    return Path(table.sd.location.removeprefix("file:"))


def _modes(table_dir: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in [table_dir, *sorted(table_dir.iterdir())]}


def test_metastore_makes_the_same_directories_without_subprocesses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("javac") is None:
        pytest.skip("javac is needed to build streamer's local filesystem")
    results = {}
    for streamer_fs in (True, False):
        log = tmp_path / f"calls-{streamer_fs}.log"
        log.touch()
        monkeypatch.setenv("PATH", _shim_path(tmp_path / str(streamer_fs), log))
        server = EmbeddedMetastore(work_dir=tmp_path / f"hms-{streamer_fs}", streamer_local_fs=streamer_fs)
        with server as hms:
            table_dir = _make_partitioned_table(hms)
            calls = log.read_text().splitlines()
            results[streamer_fs] = (_modes(table_dir), calls, sorted(p.name for p in table_dir.iterdir()))
    ours, hadoop = results[True], results[False]
    assert hadoop[1], "control: Hadoop's local filesystem shells out (else this test proves nothing)"
    assert ours[1] == [], f"streamer's local filesystem ran {ours[1][:5]}"
    assert ours[2] == hadoop[2] == ["k=0", "k=1", "k=2"]
    assert ours[0] == hadoop[0]
