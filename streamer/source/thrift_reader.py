"""``NotificationReader`` over a Hive Metastore's Thrift API (``get_next_notification``).

For sources whose metastore database is out of reach. The HMS must let the agent's user call the
notification API (``hive.metastore.event.db.notification.api.auth``: proxy superusers only by
default). ``hmsclient``'s bindings predate Hive 4's ``get_all_write_event_info``, so ``txn_writes``
is empty here: Hive 3.1 sources carry ACID data in INSERT events anyway; a Hive 4 source with ACID
tables needs the SQL reader (its COMMIT_TXN writes live only in TXN_WRITE_NOTIFICATION_LOG).
A metastore with ``hive.metastore.sasl.enabled`` needs ``auth`` (Kerberos, ``streamer.metastore.transport``).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from streamer.errors import ConfigError, StreamerError
from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow
from streamer.metastore.transport import HmsAuth, open_client

log = logging.getLogger(__name__)


def parse_thrift_uri(uri: str) -> tuple[str, int]:
    """``thrift://host:port`` → (host, port); the port defaults to the metastore's 9083."""
    parts = urlsplit(uri)
    if parts.scheme != "thrift" or not parts.hostname:
        raise ConfigError(f"HMS URI {uri!r}: expected thrift://host[:port]")
    return parts.hostname, parts.port or 9083


class MetastoreUnreachableError(StreamerError):
    """The source metastore did not answer a first read of its notification log."""


class ThriftNotificationReader:
    """Reads the notification log through the metastore server; reconnects after a failed call."""

    def __init__(self, uri: str, timeout_seconds: float = 60.0, *, auth: HmsAuth | None = None) -> None:
        self.uri = uri
        self.host, self.port = parse_thrift_uri(uri)
        self.timeout_seconds = timeout_seconds
        self.auth = auth or HmsAuth()
        self._client: Any = None
        self._warned_writes = False

    def read_after(self, last_id: int, limit: int) -> list[NotificationRow]:
        from hmsclient.genthrift.hive_metastore.ttypes import NotificationEventRequest

        response = self._call(lambda c: c.get_next_notification(NotificationEventRequest(last_id, limit)))
        events = sorted(response.events or [], key=lambda e: e.eventId)
        return [_row(e) for e in events]

    def check(self) -> None:
        """Connect and read the log's head now: an unreachable or wrong metastore fails here in one
        line naming the URI (call it before creating anything for the reader's sake: the topic)."""
        try:
            self.head_event_id()
        except Exception as exc:  # any transport, SASL or protocol error: one line, the cause kept
            raise MetastoreUnreachableError(
                f"cannot read the notification log of the source metastore at {self.uri}: "
                f"{type(exc).__name__}: {exc} (check --hms-uri and that the metastore runs)"
            ) from exc

    def head_event_id(self) -> int:
        return int(self._call(lambda c: c.get_current_notificationEventId()).eventId or 0)

    def databases(self) -> set[str]:
        return {str(name).lower() for name in self._call(lambda c: c.get_all_databases())}

    def config_value(self, name: str, default: str) -> str:
        """A setting of the metastore server (``get_config_value``; Hive serves ``hive.*`` names)."""
        return str(self._call(lambda c: c.get_config_value(name, default)))

    def txn_writes(self, txn_id: int) -> list[TxnWriteNotificationRow]:
        if not self._warned_writes:
            log.warning("the Thrift reader cannot fetch ACID write lists (Hive 4 get_all_write_event_info); "
                        "COMMIT_TXN events from %s carry no writes", self.uri)
            self._warned_writes = True
        return []

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None

    def _call(self, fn: Any) -> Any:
        if self._client is None:
            self._client = open_client(self.uri, timeout_s=self.timeout_seconds, auth=self.auth)
        try:
            return fn(self._client)
        except Exception:
            self.close()  # the connection's state is unknown after a failed call: reopen next time
            raise


def _row(e: Any) -> NotificationRow:
    return NotificationRow(
        event_id=int(e.eventId),
        event_time=int(e.eventTime or 0),
        event_type=str(e.eventType),
        message=e.message or "",
        message_format=e.messageFormat,
        db_name=e.dbName,
        table_name=e.tableName,
        cat_name=getattr(e, "catName", None),
    )
