"""The default topic of a source, spelled once: the agent publishes to it and every target command
reads it, so a default that differed between them would silently read an empty topic.

Pure (no Kafka client import), so command modules can use it at import time for their ``--help``.
"""

from __future__ import annotations

import hashlib
import re

SOURCE_ID_PLACEHOLDER = "<source-id>"


def default_topic(source_id: str) -> str:
    """The topic a source publishes to when no ``--topic`` is given."""
    return f"streamer.{source_id}.events"


def topic_or_default(topic: str | None, source_id: str) -> str:
    """``--topic`` if given, else the source's default topic."""
    return topic or default_topic(source_id)


DEFAULT_TOPIC_HELP = default_topic(SOURCE_ID_PLACEHOLDER)
"""The default as ``--help`` shows it: ``streamer.<source-id>.events``."""


def target_group(source_id: str, hms_uri: str, state_dir: str) -> str:
    """The consumer group a target job commits its position to, for Kafka lag tools only
    (``streamer.kafka.group_commit``; ``target run --consumer-group`` names another).

    ``streamer-target-<source id>-<target metastore host>-<8 hex digits>``: the host makes it
    readable in a lag tool's list, the digits (of the metastore URI and the absolute state dir) keep
    two targets of one source on one metastore (under ``--db-map``) apart.
    """
    first = hms_uri.split(",")[0].strip()
    host = first.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0] or "local"
    digest = hashlib.sha256(f"{hms_uri}\n{state_dir}".encode()).hexdigest()[:8]
    return "-".join(_group_part(part) for part in ("streamer-target", source_id, host, digest))


def _group_part(text: str) -> str:
    """Characters Kafka tools print and shells take unquoted; anything else becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)
