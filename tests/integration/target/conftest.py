"""Fixtures of the target end-to-end tests: sources, target stacks, running jobs, Spark readers.

The session's metastore (``hms``) is shared: every test names its databases uniquely, so tests do
not see each other's replicas. A second metastore (``hms_spoke``) starts only for hub and spoke.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.kafka.broker import EmbeddedBroker
from tests.integration.target.helpers import Source, SparkReader, TargetStack
from tests.integration.target.in_process import TargetJob


@pytest.fixture(scope="session")
def hms_spoke(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedMetastore]:
    """A second, independent metastore (its own Derby) for the second target of hub and spoke."""
    work = tmp_path_factory.mktemp("hms-spoke")
    with EmbeddedMetastore(work_dir=work, warehouse_dir=work / "warehouse") as server:
        yield server


@pytest.fixture(scope="session")
def spark_readers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[EmbeddedMetastore], SparkReader]]:
    """One Spark reader per metastore for the whole session (a JVM start costs ~10 s)."""
    readers: dict[str, SparkReader] = {}
    logs = tmp_path_factory.mktemp("spark-readers")

    def get(hms: EmbeddedMetastore) -> SparkReader:
        if hms.uri not in readers:
            readers[hms.uri] = SparkReader(hms.uri, logs / "warehouse", logs / f"reader-{len(readers)}.log")
        return readers[hms.uri]

    try:
        yield get
    finally:
        for reader in readers.values():
            reader.close()


@pytest.fixture
def prefix() -> str:
    """A unique database-name prefix for this test (the session metastore is shared)."""
    return f"x{uuid.uuid4().hex[:6]}_"


@pytest.fixture
def source(broker: EmbeddedBroker, topic: str, tmp_path: Path, prefix: str) -> Iterator[Source]:
    """A fresh bundled warehouse and an agent publishing to this test's topic."""
    src = Source.open(tmp_path / "source", broker.client_settings(), topic, f"src-{prefix.rstrip('_')}")
    try:
        yield src
    finally:
        src.close()


@pytest.fixture
def target_stack(hms: EmbeddedMetastore, tmp_path: Path) -> TargetStack:
    return TargetStack(hms, tmp_path / "target")


@pytest.fixture
def target_jobs() -> Iterator[list[TargetJob]]:
    """Target jobs a test starts (in this process or a child); all are stopped afterwards, whatever
    happened."""
    jobs: list[TargetJob] = []
    try:
        yield jobs
    finally:
        for job in jobs:
            job.stop()
