"""Session-scoped real services (broker, metastore, Spark, warehouse) live in tests/fixtures/;
Hypothesis profiles and the tier markers live in tests/fixtures/tiers.py."""

pytest_plugins = [
    "tests.fixtures.tiers",
    "tests.fixtures.isolation",
    "tests.fixtures.broker",
    "tests.fixtures.hms",
    "tests.fixtures.warehouse",
    "tests.fixtures.spark",
    "tests.fixtures.s3",
]
