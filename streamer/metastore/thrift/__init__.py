"""The ``Catalog`` on a Hive Metastore over Thrift: one class, ``HmsCatalog`` (``catalog``), over one
``ThriftConnection`` (``connection``); Hive 2.x transactions (``txns``); snapshots <-> Thrift objects
(``convert``, driven by ``streamer.hive.fields``). Import from here; see docs/design/metastore.md.
"""

from streamer.metastore.thrift.catalog import HmsCatalog
from streamer.metastore.thrift.connection import (
    CALLS,
    CatalogError,
    CatalogUnavailableError,
    CatalogUnsupportedError,
    ObjectExistsError,
    ThriftConnection,
)
from streamer.metastore.thrift.txns import ThriftTxns, TxnSnapshot

__all__ = [
    "CALLS",
    "CatalogError",
    "CatalogUnavailableError",
    "CatalogUnsupportedError",
    "HmsCatalog",
    "ObjectExistsError",
    "ThriftConnection",
    "ThriftTxns",
    "TxnSnapshot",
]
