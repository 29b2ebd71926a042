"""Rows of a Hive metastore's notification tables, exactly as stored.

These are the boundary between I/O (readers of ``NOTIFICATION_LOG`` and
``TXN_WRITE_NOTIFICATION_LOG``, the bundled warehouse that writes them) and the pure decoder.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NotificationRow:
    """One ``NOTIFICATION_LOG`` row (or one ``NotificationEvent`` from Thrift)."""

    event_id: int
    event_time: int
    event_type: str
    message: str
    message_format: str | None = None
    db_name: str | None = None
    table_name: str | None = None
    cat_name: str | None = None


DEFAULT_CATALOG = "hive"
"""Hive 3+'s default metastore catalog; others (HDP's ``spark``) hold databases of the same names."""


def in_catalog(row: NotificationRow, catalog: str) -> bool:
    """Whether a row belongs to ``catalog``: rows naming none (Hive 2, transaction events, Thrift
    bindings without ``catName``) belong to every catalog; names compare case-insensitively."""
    name = row.cat_name
    if name is None or not name.strip() or name == "null":
        return True
    return name.strip().lower() == catalog.strip().lower()


@dataclass(frozen=True)
class TxnWriteNotificationRow:
    """One ``TXN_WRITE_NOTIFICATION_LOG`` row: the files of one ACID write (Hive 4)."""

    txn_id: int
    write_id: int
    db: str
    table: str
    partition: str  # '' for unpartitioned tables
    table_obj: str  # TJSONProtocol Table
    partition_obj: str | None  # TJSONProtocol Partition
    files: str  # encoded file URIs joined by ']'
    event_time: int
