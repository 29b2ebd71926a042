"""PooledFileCopier: FileCopier's whole behaviour suite (tests/unit/target/apply/test_files.py) run
again with its copier replaced by the pooled one, and what the pool changes: no thread started per
copy, one file copied in the caller's thread, several callers (lanes) at once on the shared pool."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import tests.unit.target.apply.test_files as file_tests
from streamer.errors import ApplyError, ChecksumMismatchError
from streamer.target.apply.files import FileCopier, StagedFile
from streamer.target.apply.paths import Root
from streamer.target.job.executor_copy import PooledFileCopier, SparkFileCopier, executor_copier
from tests.unit.target.builders import write_source_file

# FileCopier's tests, collected here too; the fixture below gives them the pooled copier
globals().update({name: test for name, test in vars(file_tests).items() if name.startswith("test_")})
dirs = file_tests.dirs


@pytest.fixture(autouse=True)
def pooled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_tests, "FileCopier", PooledFileCopier)


def _copier(dst: Path, workers: int = 3) -> PooledFileCopier:
    return PooledFileCopier(max_workers=workers, chunk_size=7, roots=[Root.parse(str(dst.parent))])


class _Recording(PooledFileCopier):
    """Records the thread each file is staged in."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads: list[str] = []

    def _stage_one(self, f: StagedFile, event_id: int | None) -> None:
        self.threads.append(threading.current_thread().name)
        super()._stage_one(f, event_id)


def test_the_suite_runs_on_the_pooled_copier() -> None:
    assert file_tests.FileCopier is PooledFileCopier
    assert {"test_copies_and_verifies", "test_neither_matching_fails_and_leaves_nothing"} <= set(globals())


def test_many_copies_start_no_thread_each(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    copier = _Recording(max_workers=3, chunk_size=7, roots=[Root.parse(str(dst.parent))])
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(threading.Thread, "start", start)
        for i in range(20):
            refs = [write_source_file(src, f"f{i}-{j}", b"x" * (j + 1)) for j in range(1 + i % 4)]
            assert copier.copy_all(refs, lambda r, i=i: str(dst / f"t{i}")).files == len(refs)
    assert len(started) <= 3  # the pool's threads, once (a FileCopier starts up to 3 per copy)
    assert threading.current_thread().name in copier.threads  # a copy of one file ran in the caller's thread
    assert any(t.startswith("copy") for t in copier.threads)  # the others on the pool
    copier.close()


def test_callers_at_once_share_the_pool(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    copier = _copier(dst, workers=2)

    def lane(n: int) -> int:
        refs = [write_source_file(src, f"l{n}-{j}", bytes([n]) * (j + 3)) for j in range(5)]
        return copier.copy_all(refs, lambda r: str(dst / f"lane{n}")).files

    with ThreadPoolExecutor(4) as lanes:
        assert list(lanes.map(lane, range(8))) == [5] * 8
    assert file_tests._visible(dst) == {
        f"lane{n}/l{n}-{j}": bytes([n]) * (j + 3) for n in range(8) for j in range(5)
    }
    assert not file_tests._temps(dst)
    copier.close()


@pytest.mark.parametrize("files", [1, 4])
def test_failures_as_the_thread_per_copy_copier_reports_them(
    dirs: tuple[Path, Path, Path], files: int
) -> None:
    """One failing file among ``files``: the same error type and message as FileCopier's, nothing left."""
    src, _, dst = dirs

    def failing(make: Callable[..., FileCopier]) -> BaseException:
        refs = [write_source_file(src, f"g{j}", b"good") for j in range(files - 1)]
        bad = write_source_file(src, "bad", b"original")
        (src / "bad").write_bytes(b"changed!")  # same size, other content, no cmroot copy
        with pytest.raises(ApplyError) as info:
            make(max_workers=3, chunk_size=7, roots=[Root.parse(str(dst.parent))]).copy_all(
                [*refs, bad], lambda r: str(dst / "t"), event_id=9
            )
        assert file_tests._visible(dst) == {} and not file_tests._temps(dst)
        return info.value

    plain, pooled = failing(FileCopier), failing(PooledFileCopier)
    assert type(plain) is type(pooled) is ChecksumMismatchError
    assert str(plain) == str(pooled)


def test_the_jobs_copiers_are_pooled() -> None:
    assert issubclass(SparkFileCopier, PooledFileCopier)
    assert type(executor_copier(None, 0, 0, 4)) is PooledFileCopier
