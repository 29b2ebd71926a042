"""The largest record a target reads (``streamer target run --max-record-bytes``), refused where read.

A record crosses the network compressed: 75.5 MB of one repeated byte is 2.5 KB of zstd, so the
topic's ``max.message.bytes`` says nothing about what a consumer holds once it decompresses. The
target bounds the decompressed size itself, in two places:

- librdkafka decompresses each record batch whole, in its own threads, before the application sees
  any record of it. For zstd it stops at ``receive.message.max.bytes`` (the batch fails with
  ``_BAD_COMPRESSION`` and nothing is delivered), so every consumer the target makes gets that
  setting from the limit (:func:`consumer_settings`). librdkafka (2.16 here) grows its zstd buffer
  threefold per attempt and gives up at the first size past the setting, so a batch a third of it
  can already fail (confluentinc/librdkafka#5260, measured: a 1 MB record under a 2.1 MB setting);
  the setting is three times the largest batch the agent's producer sends with the same limit
  (``record_size.producer_settings``), so every such batch decompresses and none grows past it. For
  gzip, lz4 and snappy librdkafka has no bound at all (it decompresses whatever the batch holds); the
  agent never uses them by default (``--compression zstd``).
- Every record the target reads is checked (:func:`check_message`) before it becomes a Spark row or
  is decoded: a key and value over the limit, or a zstd batch librdkafka refused, is an
  :class:`OversizedRecordError` naming the topic, partition, offset and size.

The refusal stops the stream at that record, as a record that cannot be decoded does: it names no
database to halt (nothing of it is read), so nothing at or after its offset is applied until an
operator acts (docs/security.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streamer.errors import ConfigError, StreamerError
from streamer.kafka.record_size import DEFAULT_MAX_RECORD_BYTES, producer_settings

if TYPE_CHECKING:  # no Kafka client import: the target's command module reads the default
    from confluent_kafka import Message

#: The agent's default limit: every record an agent publishes with its defaults is read; a larger
#: record comes from an agent whose limit was raised (raise this one with it) or from no agent.
DEFAULT_TARGET_MAX_RECORD_BYTES = DEFAULT_MAX_RECORD_BYTES
#: librdkafka refuses a consumer whose fetch.max.bytes is below message.max.bytes (1,000,000): the
#: fetch size follows the limit when it is below librdkafka's default, so the limit cannot go lower.
MIN_TARGET_MAX_RECORD_BYTES = 1 << 20
#: librdkafka's zstd buffer grows threefold per attempt (see the module's docstring)
ZSTD_GROWTH = 3
#: receive.message.max.bytes may not exceed 2^31-1 (librdkafka), and is ZSTD_GROWTH batches
MAX_TARGET_MAX_RECORD_BYTES = (2**31 - 1) // ZSTD_GROWTH - 64 * 1024
# librdkafka's consumer defaults that decide its effective fetch.max.bytes (rdkafka_conf.c)
_FETCH_MAX_BYTES = 52_428_800
_QUEUED_MAX_KBYTES = 65_536
_MESSAGE_MAX_BYTES = 1_000_000
_FRAMING = 512  # librdkafka: receive.message.max.bytes >= fetch.max.bytes + 512


def check_limit(limit: int) -> int:
    """``limit`` if consumers can be configured with it, else ``ConfigError`` naming the range."""
    if not MIN_TARGET_MAX_RECORD_BYTES <= limit <= MAX_TARGET_MAX_RECORD_BYTES:
        raise ConfigError(f"--max-record-bytes must be between {MIN_TARGET_MAX_RECORD_BYTES} and "
                          f"{MAX_TARGET_MAX_RECORD_BYTES}, got {limit}")
    return limit


def batch_bytes(limit: int) -> int:
    """The decompressed size of the largest batch that holds a record of ``limit`` bytes: what the
    agent's producer may send with the same limit (``message.max.bytes``)."""
    return int(producer_settings(limit, "zstd")["message.max.bytes"])


def receive_bytes(limit: int) -> int:
    """``receive.message.max.bytes`` for ``limit``: where librdkafka stops decompressing a zstd batch,
    past every size it may try for a batch of ``batch_bytes(limit)``."""
    return ZSTD_GROWTH * batch_bytes(limit)


def consumer_settings(limit: int, config: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka consumer properties bounding decompression by ``limit``, to merge over ``config``
    (the consumer's own settings: a ``receive.message.max.bytes`` there is replaced).

    ``receive.message.max.bytes`` bounds a fetch response and the decompressed size of a zstd batch;
    librdkafka requires it to exceed ``fetch.max.bytes`` by 512 bytes, so ``fetch.max.bytes`` is
    lowered to ``limit`` where its effective value (the one set, or librdkafka's default) is larger.
    """
    receive = receive_bytes(check_limit(limit))
    out: dict[str, Any] = {"receive.message.max.bytes": receive}
    if _effective_fetch_max(config) + _FRAMING > receive:
        out["fetch.max.bytes"] = limit
    return out


def _effective_fetch_max(config: Mapping[str, Any]) -> int:
    """librdkafka's fetch.max.bytes for ``config``: the value set, else its default capped by the
    fetch queue (``queued.max.messages.kbytes``) and raised to ``message.max.bytes``."""
    if "fetch.max.bytes" in config:
        return int(config["fetch.max.bytes"])
    queued = int(config.get("queued.max.messages.kbytes", _QUEUED_MAX_KBYTES)) * 1024
    return max(min(_FETCH_MAX_BYTES, queued), int(config.get("message.max.bytes", _MESSAGE_MAX_BYTES)))


class OversizedRecordError(StreamerError):
    """A record over the target's ``--max-record-bytes``: refused before it is decoded, so the
    stream stops at it. ``size`` is its key and value decompressed; None when librdkafka stopped
    decompressing its zstd batch at ``receive_bytes(limit)`` (``compressed``: the batch's size then):
    it is then over ``batch_bytes(limit)``, the largest size librdkafka's last attempt is sure of."""

    def __init__(
        self, topic: str, partition: int, offset: int, size: int | None, limit: int,
        compressed: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.size = size
        self.limit = limit
        self.compressed = compressed
        where = f"record too large: topic {topic!r} partition {partition} offset {offset}"
        if size is not None:
            what = f"it holds {size:,} bytes (key and value, decompressed)"
        else:
            packed = f" of {compressed:,} bytes" if compressed is not None else ""
            what = (f"its zstd record batch{packed} decompresses to more than {batch_bytes(limit):,} bytes "
                    f"(librdkafka stopped at receive.message.max.bytes {receive_bytes(limit):,}; a corrupt "
                    "batch fails alike)")
        super().__init__(
            f"{where}: {what}, over --max-record-bytes {limit:,}: refused before it is decoded. The "
            "target stops at this record; nothing at or after it is applied. If the agent published it "
            "(its --max-record-bytes is larger), raise the target's to the agent's and start the job "
            "again; else the topic holds a record no agent wrote (docs/security.md)"
        )

    @classmethod
    def from_failure(cls, failure: str) -> OversizedRecordError | None:
        """The error a failed Spark query's text carries (the source raised it in another process)."""
        found = _IN_FAILURE.search(failure)
        if found is None:
            return None
        size, packed = found["size"], found["compressed"]
        return cls(
            found["topic"], int(found["partition"]), int(found["offset"]),
            _number(size) if size is not None else None, _number(found["limit"]),
            _number(packed) if packed is not None else None,
        )


_IN_FAILURE = re.compile(
    r"OversizedRecordError: record too large: topic '(?P<topic>[^']*)' partition (?P<partition>\d+) "
    r"offset (?P<offset>\d+): (?:it holds (?P<size>[\d,]+) bytes|its zstd record batch"
    r"(?: of (?P<compressed>[\d,]+) bytes)?).*?over --max-record-bytes (?P<limit>[\d,]+)"
)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def refusal(
    topic: str, partition: int, offset: int, size: int, limit: int
) -> OversizedRecordError | None:
    """The refusal of a record of ``size`` bytes (key and value) under ``limit``; None if it fits."""
    return OversizedRecordError(topic, partition, offset, size, limit) if size > limit else None


_COMPRESSED = re.compile(r"\(codec 0x(?P<codec>[0-9a-f]+)\) of message at \d+ of (?P<bytes>\d+) bytes")
_ZSTD = 4  # Kafka's compression attribute of a zstd batch
BAD_COMPRESSION = -198  # librdkafka's RD_KAFKA_RESP_ERR__BAD_COMPRESSION (KafkaError._BAD_COMPRESSION)


def client_refusal(
    topic: str, partition: int, offset: int, code: int, text: str, limit: int
) -> OversizedRecordError | None:
    """The refusal librdkafka's consumer error (``code``, ``text``) means, if it is one: a zstd batch
    it did not decompress (``_BAD_COMPRESSION``) past ``receive.message.max.bytes``."""
    if code != BAD_COMPRESSION:
        return None
    found = _COMPRESSED.search(text)
    if found is None or int(found["codec"], 16) != _ZSTD:
        return None  # another codec: librdkafka bounds none of them, so the batch is corrupt
    return OversizedRecordError(topic, partition, offset, None, limit, int(found["bytes"]))


def message_refusal(msg: Message, limit: int) -> OversizedRecordError | None:
    """:func:`refusal` or :func:`client_refusal` of a consumed message (a record or an error)."""
    topic, partition, offset = str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0)
    err = msg.error()
    if err is not None:
        return client_refusal(topic, partition, offset, err.code(), err.str(), limit)
    key, value = msg.key(), msg.value()
    size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    return refusal(topic, partition, offset, size, limit)


def check_message(msg: Message, limit: int) -> None:
    """Raise :class:`OversizedRecordError` for a message :func:`message_refusal` refuses."""
    refused = message_refusal(msg, limit)
    if refused is not None:
        raise refused
