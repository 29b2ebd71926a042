"""Reading the resume offset out of a Spark checkpoint directory."""

from __future__ import annotations

import json
from pathlib import Path

from streamer.target.checkpoint import resume_offset


def _batch(root: Path, batch: int, offset: int, *, committed: bool) -> None:
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "commits").mkdir(parents=True, exist_ok=True)
    source = json.dumps({"topic": "t", "partition": 0, "offset": offset})
    body = ["v1", json.dumps({"batchWatermarkMs": 0}), source]
    (root / "offsets" / str(batch)).write_text("\n".join(body))
    (root / "offsets" / f".{batch}.crc").write_text("x")
    if committed:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_the_newest_committed_batch_is_where_the_query_resumes(tmp_path: Path) -> None:
    _batch(tmp_path, 0, 5, committed=True)
    _batch(tmp_path, 1, 9, committed=True)
    _batch(tmp_path, 2, 14, committed=False)  # planned, not finished: it runs again from 9
    assert resume_offset(str(tmp_path)) == {"topic": "t", "partition": 0, "offset": 9}
    assert resume_offset(tmp_path.as_uri()) == {"topic": "t", "partition": 0, "offset": 9}


def test_nothing_committed_or_unreadable_gives_none(tmp_path: Path) -> None:
    assert resume_offset(str(tmp_path / "missing")) is None
    _batch(tmp_path, 0, 5, committed=False)
    assert resume_offset(str(tmp_path)) is None
    (tmp_path / "commits" / "0").write_text("v1")
    (tmp_path / "offsets" / "0").write_text("v1\n{}\nnot json")
    assert resume_offset(str(tmp_path)) is None
    assert resume_offset("hdfs://nn/checkpoints/x") is None
