"""Errors of the embedded metastore; all derive from streamer's root exception."""

from __future__ import annotations

from streamer.errors import StreamerError


class MetastoreError(StreamerError):
    """The embedded metastore could not be configured, started or stopped."""


class MetastoreStartError(MetastoreError):
    """The metastore process died or did not answer in time; the message carries its log tail."""
