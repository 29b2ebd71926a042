"""Where a restarted target query resumes, read from Spark's checkpoint directory.

Spark keeps one file per micro-batch under ``offsets/`` (``v1``, the batch metadata, then one JSON
line per source) and marks finished batches under ``commits/``. The job reads it only to explain a
failed query: if the topic no longer holds the offset the query would resume from, the failure is
data loss, whatever form it took inside Spark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


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
    try:
        lines = (root / "offsets" / str(committed[-1])).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 3:
        return None
    try:
        offset = json.loads(lines[2])
    except ValueError:
        return None
    return offset if isinstance(offset, dict) and "offset" in offset else None
