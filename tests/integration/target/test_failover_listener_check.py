"""A failover onto a metastore that writes no notification log warns that no reverse stream can
carry its writes back (issue 40 item 6): the settings are asked of a real metastore, one that logs
(``streamer hms run --notifications``) and one that does not."""

from __future__ import annotations

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.source.prerequisites import check_reverse_stream
from streamer.source.thrift_reader import ThriftNotificationReader

pytestmark = pytest.mark.integration


def _warning(hms: EmbeddedMetastore) -> str | None:
    reader = ThriftNotificationReader(hms.uri)
    try:
        return check_reverse_stream(reader.config_value, hms.uri)
    finally:
        reader.close()


def test_a_new_primary_without_a_log_is_warned_about(hms: EmbeddedMetastore) -> None:
    warning = _warning(hms)
    assert warning is not None and "writes no notification log" in warning and hms.uri in warning


def test_a_new_primary_that_logs_is_not(hms_notifying: EmbeddedMetastore) -> None:
    assert _warning(hms_notifying) is None
