"""The agent's topic, sized for its records: created with the limit, or, existing with a smaller one,
said once at start-up rather than at the first refusal."""

from __future__ import annotations

import logging
from typing import Any

from streamer.kafka.errors import KafkaClientError
from streamer.kafka.record_size import topic_config
from streamer.kafka.topics import ensure_topic, topic_max_message_bytes

log = logging.getLogger("streamer.source.agent")


def limit_warning(topic: str, topic_limit: int | None, max_record_bytes: int) -> str | None:
    """The warning for a topic that may refuse records the agent accepts; None if there is none."""
    if topic_limit is None or topic_limit >= max_record_bytes:
        return None
    return (f"topic {topic} takes batches of at most {topic_limit:,} bytes (max.message.bytes), below "
            f"--max-record-bytes {max_record_bytes:,}: a record whose compressed batch is larger will be "
            f"refused and stop the agent. Raise the topic's max.message.bytes to {max_record_bytes} "
            "(kafka-configs --alter --entity-type topics ...), or lower --max-record-bytes to match")


def warn_if_topic_limit_below(
    kafka: dict[str, Any], topic: str, max_record_bytes: int, timeout: float
) -> None:
    """Log ``limit_warning`` for an existing topic (a broker that cannot say is not an error here)."""
    try:
        topic_limit = topic_max_message_bytes(kafka, topic, timeout)
    except KafkaClientError as exc:
        log.debug("could not read topic %s's max.message.bytes: %s", topic, exc)
        return
    warning = limit_warning(topic, topic_limit, max_record_bytes)
    if warning is not None:
        log.warning("%s", warning)


def ensure_sized_topic(kafka: dict[str, Any], topic: str, max_record_bytes: int, timeout: float) -> None:
    """Create ``topic`` taking records of ``max_record_bytes``; warn if it exists with a smaller limit."""
    if not ensure_topic(kafka, topic, timeout=timeout, config_overrides=topic_config(max_record_bytes)):
        warn_if_topic_limit_below(kafka, topic, max_record_bytes, timeout)
