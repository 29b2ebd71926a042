"""The target applies events whose files carry HDFS checksums, as Hadoop computes them, into a real
metastore; a file whose content does not match halts its database with nothing visible."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest

from streamer import checksums
from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import FileRef
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.metastore.thrift import HmsCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from tests.integration.checksums.hadoop import MODES, reference
from tests.unit.target import builders as b

pytestmark = pytest.mark.integration

BPC, BLOCK = 512, 4096  # a small block size, so the files span several blocks


def _visible(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)}


def test_hdfs_checksummed_files_apply_and_a_wrong_one_halts(
    hms: EmbeddedMetastore, harness: str, tmp_path: Path
) -> None:
    db = f"hdfs_{uuid.uuid4().hex[:8]}"
    src, wh = tmp_path / "src", tmp_path / "wh"
    snap = b.table(db, "t", location=f"file://{src}/{db}.db/t")
    base = src / f"{db}.db" / "t"
    base.mkdir(parents=True)
    rng = random.Random(3)
    paths = []
    for i, size in enumerate([0, 100, BLOCK, 3 * BLOCK + 17]):
        path = base / f"00000{i}_0"
        path.write_bytes(rng.randbytes(size))
        paths.append(path)
    refs: list[FileRef] = []
    for algorithm, path in zip(MODES, paths, strict=True):  # one file per algorithm, values from Hadoop
        (value,) = reference(harness, algorithm, BPC, BLOCK, [path])
        refs.append(FileRef(uri=f"file://{path}", checksum=value, checksum_algorithm=algorithm))
    bad_path = base / "000009_0"
    bad_path.write_bytes(rng.randbytes(2 * BLOCK))
    (recorded,) = reference(harness, checksums.HDFS_MD5_CRC32C, BPC, BLOCK, [paths[3]])  # another file's
    bad = FileRef(uri=f"file://{bad_path}", checksum=recorded, checksum_algorithm=checksums.HDFS_MD5_CRC32C)

    state = TargetState(tmp_path / "state")
    catalog = HmsCatalog(hms.uri)
    try:
        copier = FileCopier(max_workers=2, chunk_size=1000)
        target = TargetPaths(str(wh), str(tmp_path / "ext"))  # the source lies outside every target root
        applier = Applier(catalog, copier, target, b.SOURCE_ID, state=state)

        def run(events: list[b.Event]) -> list[int]:
            return run_plan(applier, plan(events, applier.load_progress(), state.halts()), state).applied

        assert run([b.create_db(1, db), b.create_table(2, snap), b.insert(3, snap, refs)]) == [1, 2, 3]
        table_dir = wh / f"{db}.db" / "t"
        assert _visible(table_dir) == {p.name: p.read_bytes() for p in paths}

        assert run([b.insert(4, snap, [refs[1], bad])]) == []
        halt = state.halts()[db]
        assert halt.event_id == 4 and halt.object == bad.uri
        assert "hdfs-md5-of-md5-of-crc32c checksum" in halt.cause and recorded in halt.cause
        assert _visible(table_dir) == {p.name: p.read_bytes() for p in paths}  # nothing of event 4
        database = catalog.get_database(db)
        assert database is not None and database.parameters[LAST_ID_PARAM] == "3"
    finally:
        catalog.close()
