"""Large copies as Spark tasks (``streamer.target.job.executor_copy``) on the session's Spark: staged by
Python workers, verified there, published by the driver; small copies stay on the driver pool."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from streamer.errors import ApplyError, ChecksumMismatchError
from streamer.events.model import FileRef
from streamer.target.apply.files import TMP_PREFIX
from streamer.target.apply.paths import Root
from streamer.target.job.executor_copy import ExecutorCopy, SparkFileCopier
from tests.unit.target import builders as b

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _files(src: Path, n: int, size: int = 4096) -> list[FileRef]:
    return [b.write_source_file(src, f"f{i:03d}", os.urandom(size)) for i in range(n)]


def _copier(spark: SparkSession, dst: Path, **threshold: int) -> SparkFileCopier:
    return SparkFileCopier(spark.sparkContext, ExecutorCopy(**threshold), max_workers=2,
                           roots=[Root.parse(dst.as_uri())])


def test_large_copy_is_staged_by_tasks_and_published_by_the_driver(
    spark: SparkSession, tmp_path: Path
) -> None:
    refs = _files(tmp_path / "src", 12)
    dst = tmp_path / "dst"
    copier = _copier(spark, dst, min_bytes=0, min_files=10)
    staged = copier.stage_all(refs, lambda _: str(dst / "t"), event_id=7)
    hidden = sorted(p.name for p in (dst / "t").iterdir())
    assert len(hidden) == 12 and all(n.startswith(TMP_PREFIX) for n in hidden)  # invisible until publish
    report = staged.publish()
    assert report.files == 12 and report.bytes_copied == 12 * 4096
    for ref in refs:
        copied = dst / "t" / Path(ref.uri).name
        assert copied.read_bytes() == Path(ref.uri.removeprefix("file://")).read_bytes()
    workers = {r.worker_pid for r in copier.last_run}
    assert len(copier.last_run) == 12 and os.getpid() not in workers  # not the driver's process

    # again: the files are in place, so tasks verify and skip them
    again = copier.stage_all(refs, lambda _: str(dst / "t"), event_id=8).publish()
    assert again.skipped == 12 and again.files == 0


def test_small_copy_stays_on_the_driver(spark: SparkSession, tmp_path: Path) -> None:
    refs = _files(tmp_path / "src", 3)
    copier = _copier(spark, tmp_path / "dst", min_bytes=1 << 30, min_files=10)
    copier.stage_all(refs, lambda _: str(tmp_path / "dst" / "t"), event_id=1).publish()
    assert copier.last_run == [] and len(list((tmp_path / "dst" / "t").iterdir())) == 3


def test_tasks_fall_back_to_cmroot_and_a_mismatch_halts_with_nothing_left(
    spark: SparkSession, tmp_path: Path
) -> None:
    refs = _files(tmp_path / "src", 6)
    cm = _files(tmp_path / "cm", 1)[0]
    # the source file changed after the event: its checksum matches only the cmroot copy
    changed = dataclasses.replace(refs[0], checksum=cm.checksum, size=cm.size, cm_uri=cm.uri)
    dst = tmp_path / "dst"
    copier = _copier(spark, dst, min_bytes=1, min_files=0)
    report = copier.stage_all([changed, *refs[1:]], lambda _: str(dst / "a"), event_id=3).publish()
    assert report.cm_fallbacks == 1 and report.files == 6
    assert (dst / "a" / "f000").read_bytes() == Path(cm.uri.removeprefix("file://")).read_bytes()

    wrong = dataclasses.replace(refs[1], checksum="0" * 64, cm_uri=None)
    with pytest.raises(ChecksumMismatchError) as failure:
        copier.stage_all([*refs[2:], wrong], lambda _: str(dst / "b"), event_id=4)
    assert failure.value.event_id == 4 and failure.value.obj == wrong.uri
    assert list((dst / "b").iterdir()) == []  # the other tasks' staged files were discarded


def test_a_failed_copy_job_halts_the_event_and_leaves_no_staging_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A failure a task cannot turn into a typed error (here: a filesystem no executor knows) fails
    its task; once Spark gives up on the job, the files other tasks staged are removed and the event
    fails with the cause."""
    refs = _files(tmp_path / "src", 6)
    broken = FileRef(uri="nosuchfs://nowhere/src/f", checksum=refs[0].checksum,
                     checksum_algorithm="sha256", size=10)
    dst = tmp_path / "dst"
    copier = _copier(spark, dst, min_bytes=0, min_files=2)
    with pytest.raises(ApplyError) as failure:
        copier.stage_all([*refs, broken], lambda _: str(dst / "c"), event_id=9)
    assert "copy on Spark executors failed" in failure.value.cause and failure.value.event_id == 9
    assert [p.name for p in (dst / "c").iterdir()] == []
