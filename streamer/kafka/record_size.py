"""How large a record the agent may publish, and the client/topic settings that follow from it.

Hive's notification messages reach tens of MB (a 20,000-partition ADD_PARTITION is 1.4 MB of JSON,
Avro-encoded about as much). librdkafka refuses a record whose uncompressed size exceeds the
producer's ``message.max.bytes`` (1 MB by default) before sending it, and brokers refuse a
compressed batch over the topic's ``max.message.bytes``; both are set from one limit here. Records
are compressed (JSON-heavy payloads shrink about tenfold), so what crosses the network and sits in
the topic stays far below the limit. Consumers need nothing: librdkafka grows its fetch size for
a large record, up to ``receive.message.max.bytes`` (100 MB by default) per compressed batch.
"""

from __future__ import annotations

from typing import Any

from streamer.errors import ConfigError

#: 64 MiB: above the largest Hive notification messages seen, below Kafka's default request cap
#: (``socket.request.max.bytes``, 100 MiB) with room for the batch around one record.
DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024
#: librdkafka's own ceiling for ``message.max.bytes``.
LIBRDKAFKA_MAX_BYTES = 1_000_000_000
#: zstd: the best ratio on JSON-heavy records at a speed far above what an agent publishes;
#: librdkafka in confluent-kafka and the embedded Tansu broker both speak every codec listed.
DEFAULT_COMPRESSION = "zstd"
COMPRESSIONS = ("zstd", "lz4", "gzip", "snappy", "none")
# the batch framing around one record; message.max.bytes bounds the whole produce batch
_BATCH_OVERHEAD = 64 * 1024


def check_limit(limit: int) -> int:
    """``limit`` if librdkafka can be configured with it, else ``ConfigError`` naming the range."""
    if not 1024 <= limit <= LIBRDKAFKA_MAX_BYTES - _BATCH_OVERHEAD:
        raise ConfigError(f"--max-record-bytes must be between 1024 and "
                          f"{LIBRDKAFKA_MAX_BYTES - _BATCH_OVERHEAD}, got {limit}")
    return limit


def producer_settings(limit: int, compression: str) -> dict[str, Any]:
    """librdkafka producer properties: a record of ``limit`` bytes (uncompressed) fits in one batch."""
    if compression not in COMPRESSIONS:
        raise ConfigError(f"--compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}")
    return {"message.max.bytes": check_limit(limit) + _BATCH_OVERHEAD, "compression.type": compression}


def topic_config(limit: int) -> dict[str, str]:
    """Topic properties for a new topic: the broker accepts a batch holding a record of ``limit`` bytes."""
    return {"max.message.bytes": str(check_limit(limit) + _BATCH_OVERHEAD)}


def record_size(key: bytes | None, value: bytes) -> int:
    """The bytes librdkafka counts against the limit."""
    return len(value) + (len(key) if key is not None else 0)


def too_large(key: bytes | None, value: bytes, limit: int) -> bool:
    """True if a record cannot be published under ``limit`` (its uncompressed size is what counts)."""
    return record_size(key, value) > limit
