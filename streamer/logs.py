"""Logging set-up, done once in the CLI entry point; library modules only use module loggers."""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime

from streamer.errors import ConfigError


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        obj = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            obj["exc"] = self.formatException(record.exc_info)
        return json.dumps(obj)


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("py4j", "urllib3", "thrift"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# log4j2 levels, as the Spark driver's configuration (streamer/target/job/log4j2.properties) takes them
SPARK_LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")


def spark_log_level(default: str = "WARN") -> str:
    """The Spark driver's log4j2 level: ``$STREAMER_SPARK_LOG_LEVEL`` if set, else INFO (Spark's own
    detail) when streamer logs at DEBUG (``--log-level DEBUG``), else ``default``."""
    explicit = os.environ.get("STREAMER_SPARK_LOG_LEVEL", "").strip().upper()
    if explicit:
        if explicit not in SPARK_LOG_LEVELS:
            raise ConfigError(
                f"STREAMER_SPARK_LOG_LEVEL={explicit}: not a log4j2 level ({', '.join(SPARK_LOG_LEVELS)})"
            )
        return explicit
    if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
        return "INFO"
    return default.upper()
