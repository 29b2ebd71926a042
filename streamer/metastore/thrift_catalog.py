"""The target catalog on a Hive Metastore, over Thrift (``hmsclient``'s generated Hive 2.x client).

``HmsCatalog`` implements ``Catalog`` from parts: the connection and call wrapper
(``thrift_calls``), databases and tables (``thrift_tables``), partitions and statistics
(``thrift_partitions``), functions and constraints (``thrift_functions``). Snapshots go through
``streamer.metastore.convert``. What the metastore changes on its own: docs/design/metastore.md.
"""

from __future__ import annotations

from streamer.metastore.thrift_calls import (
    CatalogError,
    CatalogUnavailableError,
    CatalogUnsupportedError,
    ObjectExistsError,
)
from streamer.metastore.thrift_functions import FunctionConstraintCalls
from streamer.metastore.thrift_partitions import PartitionCalls

__all__ = [
    "CatalogError",
    "CatalogUnavailableError",
    "CatalogUnsupportedError",
    "HmsCatalog",
    "ObjectExistsError",
]


class HmsCatalog(PartitionCalls, FunctionConstraintCalls):
    """``Catalog`` on a Hive Metastore at ``uri`` (``thrift://host:port``); connects on creation.

    ``auth`` chooses plain Thrift (default) or SASL/GSSAPI (Kerberos), see ``streamer.metastore.transport``.
    Missing objects read as ``None``, dropping a missing object does nothing, and every other
    metastore error is a ``CatalogError`` naming the object.
    """
