"""One seeded workload (with ACID transactions), shared by the checker tests: running it costs ~1-3 s."""

from __future__ import annotations

import pytest

from tests.unit.testing.replicas import Run, workload_run

SEED, EVENTS = 11, 200


@pytest.fixture(scope="package")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return workload_run(tmp_path_factory.mktemp("checker-workload"), SEED, EVENTS)
