"""Offsets read from Spark's checkpoint directory: where a restarted query resumes, and what a
running micro-batch covers.

Spark keeps one file per micro-batch under ``offsets/`` (``v1``, the batch metadata, then one JSON
line per source), written before the batch runs, and marks finished batches under ``commits/``. The
job reads it to explain a failed query (if the topic no longer holds the offset the query would
resume from, the failure is data loss, whatever form it took inside Spark) and to read a
micro-batch's records itself (``batch_range``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CHECKPOINT_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
# Spark 4 moved the class into a subpackage; both names are tried, newest first.
LOCAL_CHECKPOINT_MANAGERS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)


def manager_candidates(checkpoint_dir: str) -> tuple[str, ...]:
    """Checkpoint file managers to use for this directory, best first; empty = Spark's default.

    Spark's default writes through Hadoop's ``FileContext``, whose local filesystem (PySpark ships
    no native Hadoop library) starts a ``readlink`` or ``chmod`` process for every status and
    rename: about four processes per checkpoint file, two files per micro-batch, ~70 ms each on
    two cores. Through the ``FileSystem`` API the same write costs one ``chmod`` (~20 ms), and a
    local ``FileSystem.rename`` is rename(2), as atomic as Spark's default needs. Remote stores keep
    Spark's default: their rename semantics are Spark's call, not ours.
    """
    return LOCAL_CHECKPOINT_MANAGERS if _local(checkpoint_dir) is not None else ()


def manager_for(checkpoint_dir: str, current: str | None, available: Callable[[str], bool]) -> str | None:
    """The checkpoint manager a query on ``checkpoint_dir`` should run with (None: Spark's default).

    ``current`` is the session's setting: one the user chose stays; one of ours set for an earlier
    query is replaced. ``available`` says whether this Spark has a class.
    """
    if current and current not in LOCAL_CHECKPOINT_MANAGERS:
        return current
    return next((name for name in manager_candidates(checkpoint_dir) if available(name)), None)


def _local(checkpoint_dir: str) -> Path | None:
    parts = urlsplit(checkpoint_dir)
    if parts.scheme in ("", "file"):
        return Path(parts.path if parts.scheme else checkpoint_dir)
    return None  # a remote checkpoint (hdfs://, s3a://): not read here


def _batch_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def resume_offset(checkpoint_dir: str) -> dict[str, Any] | None:
    """The source offset of the newest committed micro-batch (the next batch starts there), or
    None when nothing was committed or the checkpoint is not on a local filesystem."""
    root = _local(checkpoint_dir)
    if root is None:
        return None
    committed = _batch_ids(root / "commits")
    if not committed:
        return None
    return _logged_offset(root, committed[-1], strict=False)


def batch_range(checkpoint_dir: str, batch_id: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The source offsets micro-batch ``batch_id`` runs from and to: the ends Spark logged for the
    batch before it and for this one. None when either is not there to read: the first batch of a
    checkpoint (it starts at the source's initial offset, which Spark does not log), a checkpoint
    not on a local filesystem, or a file of another shape (one source per query is all the job
    runs)."""
    root = _local(checkpoint_dir)
    if root is None or batch_id < 1:
        return None
    start, end = _logged_offset(root, batch_id - 1, strict=True), _logged_offset(root, batch_id, strict=True)
    if start is None or end is None:
        return None
    return start, end


def batch_end(checkpoint_dir: str, batch_id: int) -> dict[str, Any] | None:
    """The source offset micro-batch ``batch_id`` runs to (as ``batch_range``, for the first batch too)."""
    root = _local(checkpoint_dir)
    return None if root is None else _logged_offset(root, batch_id, strict=True)


def _logged_offset(root: Path, batch_id: int, *, strict: bool) -> dict[str, Any] | None:
    """The source's offset in ``offsets/<batch_id>``, or None (no such file, another shape).
    ``strict``: only the format this Spark writes (``v1``, one source), as records are read by it."""
    try:
        lines = (root / "offsets" / str(batch_id)).read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if len(lines) < 3 or (strict and (len(lines) != 3 or lines[0] != "v1")):
        return None
    try:
        offset = json.loads(lines[2])
    except ValueError:
        return None
    return offset if isinstance(offset, dict) and "offset" in offset else None
