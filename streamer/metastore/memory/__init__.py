"""The in-memory ``Catalog`` for pure tests: one class, ``MemoryCatalog`` (``catalog``). Import from here."""

from streamer.metastore.memory.catalog import MemoryCatalog, MemoryCatalogError, StatsKey, TableKey

__all__ = ["MemoryCatalog", "MemoryCatalogError", "StatsKey", "TableKey"]
