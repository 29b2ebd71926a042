"""The target job: plans and applies a source's events onto a target warehouse.

``read_table(spark, "db.table")`` reads a replica as a consistent snapshot (ACID replicas: exactly
the committed rows); see ``streamer.target.reader``. ``streamer.target.verify.verify`` compares a
replica with the source at its ``repl.last.id`` and returns a ``VerifyReport`` of drift.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamer.target.reader import read_table

__all__ = ["read_table"]


def __getattr__(name: str) -> Any:
    # lazy, so that importing a submodule (the CLI does) does not pull in the reader's dependencies
    if name == "read_table":
        from streamer.target.reader import read_table

        return read_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
