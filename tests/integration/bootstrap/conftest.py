"""The target end-to-end fixtures (sources, target stacks, jobs, Spark readers), shared here."""

from tests.integration.target.conftest import prefix, source, spark_readers, target_jobs, target_stack

__all__ = ["prefix", "source", "spark_readers", "target_jobs", "target_stack"]
