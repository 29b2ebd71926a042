"""The archiver's Prometheus metrics, on ``streamer archive run``'s own ``/metrics`` page.

In a registry of their own (the archiver is neither a source nor a target role): its lag in records
behind the topic's end, what it last archived, and how much it wrote. With the build and process
families every streamer process exports (``streamer.metrics.BUILD_INFO``).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector, start_http_server

from streamer.metrics import BUILD_INFO

ARCHIVE_REGISTRY = CollectorRegistry(auto_describe=True)
ARCHIVE_REGISTRY.register(BUILD_INFO)
ProcessCollector(registry=ARCHIVE_REGISTRY)

ARCHIVE_LAG_RECORDS = Gauge(
    "streamer_archive_lag_records",
    "Offsets of the topic not archived yet: its end (high watermark) minus the archive's next offset",
    registry=ARCHIVE_REGISTRY,
)
ARCHIVE_LAST_EVENT_ID = Gauge(
    "streamer_archive_last_event_id", "Event id of the last record archived (in the manifest)",
    registry=ARCHIVE_REGISTRY,
)
ARCHIVE_LAST_OFFSET = Gauge(
    "streamer_archive_last_offset", "Topic offset of the last record archived (in the manifest)",
    registry=ARCHIVE_REGISTRY,
)
ARCHIVE_FILES = Counter(
    "streamer_archive_files", "Archive files written and named in the manifest", registry=ARCHIVE_REGISTRY
)
ARCHIVE_RECORDS = Counter(
    "streamer_archive_records", "Records archived (named in the manifest)", registry=ARCHIVE_REGISTRY
)
ARCHIVE_BYTES = Counter(
    "streamer_archive_bytes", "Bytes of archive files written", registry=ARCHIVE_REGISTRY
)


def serve(port: int, addr: str) -> None:
    """Serve ``/metrics`` in a daemon thread (port 0: off)."""
    if port:
        start_http_server(port, addr, registry=ARCHIVE_REGISTRY)
