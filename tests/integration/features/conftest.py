"""The target end-to-end fixtures (sources, target stacks, jobs, Spark readers), shared with these tests."""

from tests.integration.target.conftest import (  # noqa: F401 - fixtures are registered by import
    prefix,
    source,
    spark_readers,
    target_jobs,
    target_stack,
)
