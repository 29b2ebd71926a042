"""An in-memory ``Catalog`` for tests of the applier, with the metastore's semantics that matter.

Like ``thrift_catalog``: reads of missing objects return ``None``, drops of missing objects do nothing,
creating an existing object raises, altering a missing one raises, and ``alter_table`` with another
db/name renames the table together with its partitions, statistics and constraints. Unlike the
metastore it never touches files and adds no parameters of its own, so tests can compare exactly.
"""

from __future__ import annotations

from streamer.metastore.memory_parts import MemoryParts
from streamer.metastore.memory_store import MemoryCatalogError, StatsKey, TableKey
from streamer.metastore.memory_tables import MemoryTables

__all__ = ["MemoryCatalog", "MemoryCatalogError", "StatsKey", "TableKey"]


class MemoryCatalog(MemoryTables, MemoryParts):
    """``Catalog`` in dicts (``databases``, ``tables``, ...); ``calls`` names every change made."""
