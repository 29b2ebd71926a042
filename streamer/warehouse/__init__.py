"""The bundled Hive-compatible source warehouse (DESIGN §3.7): a metastore on sqlite or PostgreSQL
whose ``NOTIFICATION_LOG`` receives what a Hive metastore writes, with real Parquet data files and
change management to cmroot. The source agent reads it through its ordinary SQL reader.
"""

from streamer.warehouse.errors import AlreadyExistsError, NoSuchObjectError, WarehouseError
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from streamer.warehouse.warehouse import GZIP_FORMAT, JSON_FORMAT, MESSAGE_FORMATS, Warehouse

__all__ = [
    "CHECKSUM_ALGORITHM",
    "GZIP_FORMAT",
    "JSON_FORMAT",
    "MESSAGE_FORMATS",
    "AlreadyExistsError",
    "NoSuchObjectError",
    "Warehouse",
    "WarehouseError",
]
