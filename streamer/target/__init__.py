"""The target: applies a source's events onto a target warehouse, and operates the replica.

Sub-packages in import order (each imports only those before it): ``state`` (what the target
records), ``apply`` (planner and applier), ``table_reader`` (reading replica tables from Spark),
``dr`` (verify, failover, failback), ``job`` (the streaming query), then ``commands`` (the CLI).
``read_table(spark, "db.table")`` reads a replica table (ACID replicas: exactly the committed rows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamer.target.table_reader import read_table

__all__ = ["read_table"]


def __getattr__(name: str) -> Any:
    # lazy, so that importing a submodule (the CLI does) does not pull in the reader's dependencies
    if name == "read_table":
        from streamer.target.table_reader import read_table

        return read_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
