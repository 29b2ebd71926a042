"""The bundled Hive-compatible source warehouse (DESIGN §3.7): a metastore on sqlite or PostgreSQL
whose ``NOTIFICATION_LOG`` receives what a Hive metastore writes, with real Parquet data files and
change management to cmroot, and ACID transactions (Hive's delta layout, write ids,
``TXN_WRITE_NOTIFICATION_LOG``). The source agent reads it through its ordinary SQL reader.
"""

from streamer.warehouse.acid import FULL, INSERT_ONLY
from streamer.warehouse.errors import (
    AlreadyExistsError,
    NoSuchObjectError,
    OpenWritesError,
    TxnStateError,
    WarehouseError,
)
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from streamer.warehouse.warehouse import GZIP_FORMAT, JSON_FORMAT, MESSAGE_FORMATS, Warehouse

__all__ = [
    "CHECKSUM_ALGORITHM",
    "FULL",
    "GZIP_FORMAT",
    "INSERT_ONLY",
    "JSON_FORMAT",
    "MESSAGE_FORMATS",
    "AlreadyExistsError",
    "NoSuchObjectError",
    "OpenWritesError",
    "TxnStateError",
    "Warehouse",
    "WarehouseError",
]
