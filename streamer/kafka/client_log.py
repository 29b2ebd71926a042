"""librdkafka's own log lines through Python ``logging``, summarised.

librdkafka retries a refused connection every few hundred milliseconds and prints a ``%3|...|FAIL|``
line to stderr each time: a wrong broker address floods a terminal with a thousand lines that
name neither the address nor what to do. Every client streamer builds passes a ``ClientLog`` as
its ``logger``: each distinct line is logged once, repeats are counted (shown at DEBUG, and in
``summary``), and the newest error is kept for streamer's own error messages.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

_NUMBERS = re.compile(r"\d+")
# "[thrd:main]: " style prefixes and the client's instance name vary between otherwise equal lines
_THREAD = re.compile(r"\[thrd:[^\]]*\]:?\s*")

LOGGER_NAME = "streamer.kafka.librdkafka"


def line_key(message: str) -> str:
    """What makes two librdkafka lines "the same": the text with numbers and thread names blanked."""
    return _NUMBERS.sub("#", _THREAD.sub("", message))


class ClientLog:
    """A ``logger`` for confluent-kafka clients: first occurrence logged, repeats counted.

    librdkafka's errors are about requests it retries on its own; streamer raises its own error
    when one matters (naming the cause seen here), so a first occurrence is logged at most at
    ``cap`` (INFO by default; DEBUG for probes whose failure streamer reports itself).
    """

    def __init__(self, name: str = LOGGER_NAME, cap: int = logging.INFO) -> None:
        self.logger = logging.getLogger(name)
        self.cap = cap
        self.counts: Counter[str] = Counter()
        self.last_error: str | None = None
        self._lock = threading.Lock()

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        """Called by confluent-kafka as ``logger.log(level, "%s [%s] %s", facility, client, text)``."""
        text = msg % args if args else msg
        key = line_key(text)
        with self._lock:
            self.counts[key] += 1
            seen = self.counts[key]
            if level >= logging.WARNING:
                self.last_error = _cause(text)
        if seen == 1:
            self.logger.log(min(level, self.cap), "%s", text)
        elif seen & (seen - 1) == 0:  # 2, 4, 8...: a count that grows slower than the flood
            self.logger.debug("%s (seen %d times)", text, seen)

    def summary(self) -> dict[str, int]:
        """Each distinct line's count (the line with numbers blanked)."""
        with self._lock:
            return dict(self.counts)


def _cause(text: str) -> str:
    """The part of a librdkafka line worth quoting: after the ``FACILITY [client] broker:`` prefix."""
    body = _THREAD.sub("", text)
    parts = body.split("]", 1)
    body = parts[1] if len(parts) == 2 and body.startswith(tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")) else body
    return body.strip().removeprefix(":").strip()


def with_client_log(config: Mapping[str, Any], log: ClientLog | None = None) -> dict[str, Any]:
    """A copy of a client config whose librdkafka lines go through ``log`` (a new ``ClientLog`` if None)."""
    out = dict(config)
    out["logger"] = log if log is not None else ClientLog()
    return out
