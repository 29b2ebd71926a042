"""The default topic of a source, spelled once: the agent publishes to it and every target command
reads it, so a default that differed between them would silently read an empty topic.

Pure (no Kafka client import), so command modules can use it at import time for their ``--help``.
"""

from __future__ import annotations

SOURCE_ID_PLACEHOLDER = "<source-id>"


def default_topic(source_id: str) -> str:
    """The topic a source publishes to when no ``--topic`` is given."""
    return f"streamer.{source_id}.events"


def topic_or_default(topic: str | None, source_id: str) -> str:
    """``--topic`` if given, else the source's default topic."""
    return topic or default_topic(source_id)


DEFAULT_TOPIC_HELP = default_topic(SOURCE_ID_PLACEHOLDER)
"""The default as ``--help`` shows it: ``streamer.<source-id>.events``."""
