"""The compiled Hadoop reference harness, once per session."""

from __future__ import annotations

import pytest

from tests.integration.checksums.hadoop import compile_harness


@pytest.fixture(scope="session")
def harness(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The classpath of the compiled harness plus Hadoop's jars."""
    return compile_harness(tmp_path_factory.mktemp("hdfs-checksum"))
