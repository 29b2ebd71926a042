"""Reading the resume offset and a running micro-batch's range out of a Spark checkpoint directory."""

from __future__ import annotations

import json
from pathlib import Path

from streamer.target.job.checkpoint import (
    LOCAL_CHECKPOINT_MANAGERS,
    batch_range,
    manager_for,
    resume_offset,
)


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


def _at(offset: int) -> dict[str, object]:
    return {"topic": "t", "partition": 0, "offset": offset}


def test_a_batch_runs_from_the_end_logged_for_the_batch_before_it(tmp_path: Path) -> None:
    _batch(tmp_path, 0, 5, committed=True)
    _batch(tmp_path, 1, 9, committed=True)
    _batch(tmp_path, 2, 14, committed=False)  # the running batch: logged before it runs
    assert batch_range(str(tmp_path), 2) == (_at(9), _at(14))
    assert batch_range(tmp_path.as_uri(), 1) == (_at(5), _at(9))


def test_a_range_not_known_for_certain_is_none(tmp_path: Path) -> None:
    _batch(tmp_path, 0, 5, committed=True)
    assert batch_range(str(tmp_path), 0) is None  # starts at the source's initial offset: not logged
    assert batch_range(str(tmp_path), 1) is None  # not logged (yet)
    _batch(tmp_path, 1, 9, committed=False)
    assert batch_range("hdfs://nn/checkpoints/x", 1) is None
    assert batch_range(str(tmp_path / "missing"), 1) is None
    for body in (
        "v2\n{}\n" + json.dumps(_at(9)),  # a format this Spark does not write
        "v1\n{}\n" + json.dumps(_at(9)) + "\n" + json.dumps(_at(3)),  # two sources
        "v1\n{}\nnot json",
        "v1\n{}\n[9]",
    ):
        (tmp_path / "offsets" / "1").write_text(body)
        assert batch_range(str(tmp_path), 1) is None, body
    assert resume_offset(str(tmp_path)) == _at(5)


NEW, OLD = LOCAL_CHECKPOINT_MANAGERS


def test_local_checkpoints_get_the_filesystem_manager_this_spark_has(tmp_path: Path) -> None:
    for local in (str(tmp_path), tmp_path.as_uri(), "relative/dir"):
        assert manager_for(local, None, lambda name: True) == NEW
    assert manager_for(str(tmp_path), None, lambda name: name == OLD) == OLD  # Spark 3's package
    assert manager_for(str(tmp_path), None, lambda name: False) is None


def test_remote_checkpoints_keep_sparks_default_and_a_users_choice_stays(tmp_path: Path) -> None:
    for remote in ("hdfs://nn:8020/ckpt", "s3a://bucket/ckpt"):
        assert manager_for(remote, None, lambda name: True) is None
        assert manager_for(remote, NEW, lambda name: True) is None  # ours, set for an earlier query
    mine = "com.example.MyCheckpointFileManager"
    assert manager_for(str(tmp_path), mine, lambda name: True) == mine
    assert manager_for("hdfs://nn:8020/ckpt", mine, lambda name: True) == mine
