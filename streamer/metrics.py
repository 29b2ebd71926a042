"""Every Prometheus metric streamer exports, defined once.

Names follow Prometheus rules (``_total``, ``_seconds``, ``_bytes``); labels are bounded: database
and event type, never table names or ids.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

# --- source agent ---
SOURCE_LAST_EVENT_ID = Gauge(
    "streamer_source_last_event_id", "Last source event id published (or passed) by the agent",
    registry=REGISTRY,
)
SOURCE_HEAD_EVENT_ID = Gauge(
    "streamer_source_head_event_id", "Newest event id in the source notification log", registry=REGISTRY
)
SOURCE_LAG_EVENTS = Gauge(
    "streamer_source_lag_events", "Source head event id minus last published id", registry=REGISTRY
)
SOURCE_GAP = Gauge(
    "streamer_source_gap", "1 while the agent is halted on a notification-log gap", registry=REGISTRY
)
SOURCE_EVENTS_PUBLISHED = Counter(
    "streamer_source_events_published_total", "Events published to Kafka", ["event_type"],
    registry=REGISTRY,
)
SOURCE_EVENTS_FILTERED = Counter(
    "streamer_source_events_filtered_total", "Events passed over by the replication policy",
    registry=REGISTRY,
)
SOURCE_PUBLISH_SECONDS = Histogram(
    "streamer_source_publish_seconds", "Time to publish and commit one batch", buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
SOURCE_ERRORS = Counter(
    "streamer_source_errors_total", "Errors seen by the agent, by kind", ["kind"], registry=REGISTRY
)

# --- target job ---
TARGET_LAST_APPLIED = Gauge(
    "streamer_target_last_applied_event_id", "Last source event id applied, per database", ["db"],
    registry=REGISTRY,
)
TARGET_SOURCE_HEAD = Gauge(
    "streamer_target_source_head_event_id", "Newest source event id the target has heard of",
    registry=REGISTRY,
)
TARGET_LAG_EVENTS = Gauge(
    "streamer_target_lag_events", "Source head event id minus the last applied id", registry=REGISTRY
)
TARGET_LAG_SECONDS = Histogram(
    "streamer_target_lag_seconds", "Source event time to applied on the target",
    buckets=_LATENCY_BUCKETS, registry=REGISTRY,
)
TARGET_EVENTS_APPLIED = Counter(
    "streamer_target_events_applied_total", "Events applied", ["event_type"], registry=REGISTRY
)
TARGET_BYTES_COPIED = Counter(
    "streamer_target_bytes_copied_total", "Bytes of data files copied", registry=REGISTRY
)
TARGET_FILES_UNVERIFIED = Counter(
    "streamer_target_files_unverified_total", "Files copied without a checksum to verify",
    registry=REGISTRY,
)
TARGET_CM_FALLBACKS = Counter(
    "streamer_target_cm_fallbacks_total", "Files copied from cmroot because the source changed",
    registry=REGISTRY,
)
TARGET_HALTED = Gauge(
    "streamer_target_halted", "1 while a database is halted on an event", ["db"], registry=REGISTRY
)
TARGET_BATCH_SECONDS = Histogram(
    "streamer_target_batch_seconds", "Duration of one micro-batch apply", buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
TARGET_TXNS_COMMITTED = Counter(
    "streamer_target_txns_committed_total", "ACID transactions made visible", registry=REGISTRY
)
TARGET_TXNS_ABORTED = Counter(
    "streamer_target_txns_aborted_total", "ACID transactions dropped on abort", registry=REGISTRY
)
TARGET_ABORTED_BYTES_SKIPPED = Counter(
    "streamer_target_aborted_bytes_skipped_total", "Bytes of aborted transactions never copied",
    registry=REGISTRY,
)
TARGET_OPEN_TXNS = Gauge(
    "streamer_target_open_txns", "Source transactions buffered on the target", registry=REGISTRY
)


def serve(port: int, addr: str = "127.0.0.1") -> None:
    """Serve ``/metrics`` on ``addr:port`` (loopback unless told otherwise); port 0 disables it."""
    if port:
        start_http_server(port, addr=addr, registry=REGISTRY)
        log.info("metrics on http://%s:%d/metrics", addr, port)
