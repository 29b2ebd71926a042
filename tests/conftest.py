"""Session-scoped real services (broker, metastore, Spark, warehouse) live in tests/fixtures/."""

pytest_plugins = [
    "tests.fixtures.broker",
    "tests.fixtures.hms",
    "tests.fixtures.warehouse",
    "tests.fixtures.spark",
    "tests.fixtures.s3",
]
