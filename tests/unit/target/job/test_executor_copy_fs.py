"""The job's filesystem settings travel with executor copies (``streamer.target.job.executor_copy``), without
Spark: a fake context ships each task's function as PySpark does (cloudpickle) to a simulated fresh
Python worker, whose filesystem settings start at the defaults."""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fsspec.config
import pytest
from fsspec.implementations.webhdfs import WebHDFS
from pyspark import cloudpickle

from streamer import filesystems
from streamer.filesystems import FsSettings, current_settings, parse_fs_options, url_to_fs
from streamer.target.apply.paths import Root
from streamer.target.job import executor_copy as spark_copy
from streamer.target.job.executor_copy import ExecutorCopy, SparkFileCopier, _CopyConfig, use_fs_settings
from tests.unit.target import builders as b

SECRET = "hunter2-not-for-logs"
SETTINGS = FsSettings(
    options=parse_fs_options(["webhdfs.port=50070", f"s3.secret={SECRET}", "s3.endpoint_url=http://s3:9000"]),
    hdfs_driver="webhdfs",
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsspec.config, "conf", {})
    monkeypatch.setattr(filesystems, "_settings", FsSettings())
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    monkeypatch.delenv("ARROW_LIBHDFS_DIR", raising=False)


class _Executor:
    """Runs shipped task functions as a fresh Python worker would: default filesystem settings."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.payloads: list[bytes] = []
        self.seen: list[FsSettings] = []  # the worker's settings after each task
        self.hdfs_urls: list[str] = []  # where the worker's url_to_fs sends an hdfs:// URL

    def run(self, fn: Callable[[Iterator[Any]], Iterator[Any]], partitions: list[Any]) -> list[Any]:
        payload = cloudpickle.dumps(fn)  # what PySpark ships; fails here if the task is not picklable
        self.payloads.append(payload)
        self.monkeypatch.setattr(fsspec.config, "conf", {})
        self.monkeypatch.setattr(filesystems, "_settings", FsSettings())
        task = cloudpickle.loads(payload)
        out = [r for part in partitions for r in task(iter([part]))]
        self.seen.append(current_settings())
        fs, _ = url_to_fs("hdfs://nn1:8020/w")
        assert isinstance(fs, WebHDFS)
        self.hdfs_urls.append(fs.url)
        return out


class _Rdd:
    def __init__(self, executor: _Executor, partitions: list[Any]) -> None:
        self.executor, self.partitions = executor, partitions
        self.fn: Callable[[Iterator[Any]], Iterator[Any]] | None = None

    def mapPartitions(self, fn: Callable[[Iterator[Any]], Iterator[Any]]) -> _Rdd:
        self.fn = fn
        return self

    def collect(self) -> list[Any]:
        assert self.fn is not None
        return self.executor.run(self.fn, self.partitions)


class _SparkContext:
    defaultParallelism = 2

    def __init__(self, executor: _Executor) -> None:
        self.executor = executor

    def parallelize(self, items: list[Any], n: int) -> _Rdd:
        assert len(items) == n
        return _Rdd(self.executor, items)


def test_executor_tasks_resolve_urls_with_the_drivers_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    filesystems.configure(SETTINGS)  # as the command's --fs-option/--hdfs-driver do on the driver
    executor = _Executor(monkeypatch)
    dst = tmp_path / "dst"
    sc: Any = _SparkContext(executor)
    copier = SparkFileCopier(sc, ExecutorCopy(min_bytes=0, min_files=1), max_workers=2,
                             roots=[Root.parse(dst.as_uri())])
    assert copier.fs_settings == SETTINGS
    refs = [b.write_source_file(tmp_path / "src", f"f{i}", os.urandom(64)) for i in range(3)]
    with caplog.at_level(logging.DEBUG):
        report = copier.stage_all(refs, lambda _: str(dst / "t"), event_id=5).publish()

    assert report.files == 3 and len(copier.last_run) == 3
    assert executor.seen == [SETTINGS]  # the worker configured url_to_fs with the job's settings
    assert executor.hdfs_urls == ["http://nn1:50070/webhdfs/v1"]  # --hdfs-driver and webhdfs.port
    assert fsspec.config.conf["s3"]["endpoint_url"] == "http://s3:9000"  # as configure does on the driver
    assert SECRET not in caplog.text  # the worker logs its settings masked


def test_the_payload_is_plain_picklable_data_with_secrets_masked_in_its_repr() -> None:
    config = _CopyConfig(1 << 20, (), "tag-", 7, fs=SETTINGS)
    again = pickle.loads(pickle.dumps(config))
    assert again == config and again.fs.options == SETTINGS.options
    assert again.fs.hdfs_driver == "webhdfs"
    assert SECRET not in repr(config) and "*****" in repr(config)


def test_a_copier_takes_the_settings_of_its_process_unless_given() -> None:
    sc: Any = object()  # not used until a copy runs
    filesystems.configure(SETTINGS)
    assert SparkFileCopier(sc, ExecutorCopy()).fs_settings == SETTINGS
    other = FsSettings(hdfs_driver="libhdfs")
    assert SparkFileCopier(sc, ExecutorCopy(), fs_settings=other).fs_settings == other


def test_a_reused_worker_configures_only_when_the_settings_change(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[FsSettings] = []
    real = spark_copy.configure

    def counting(settings: FsSettings) -> None:
        calls.append(settings)
        real(settings)

    monkeypatch.setattr(spark_copy, "configure", counting)
    use_fs_settings(SETTINGS)
    use_fs_settings(SETTINGS)
    assert calls == [SETTINGS] and current_settings() == SETTINGS
    use_fs_settings(FsSettings())
    assert calls == [SETTINGS, FsSettings()]
