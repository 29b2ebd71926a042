"""Logging set-up, done once in the CLI entry point; library modules only use module loggers.

Every line the handler writes is masked (``mask_secrets``: URL passwords, ``key=secret`` pairs) and,
in the text format, has its control characters escaped, so that a name taken from a source (a
database called ``"x\\n2026-01-01 ERROR ..."``) cannot forge log lines.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import traceback
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from streamer.errors import ConfigError

MASK = "***"

# scheme://user:password@host: the password (up to the last "@" before a "/" or a blank)
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*:)[^\s/]*(?P<tail>@)")
# a key that names a secret: sasl.password, ssl.key.password, aws_secret_access_key, api-key, token ...
_SECRET_KEY = r"[\w.\-]*(?:passw(?:or)?d|pwd|secret|token|credential|api[_.\-]?key|access[_.\-]?key)[\w.\-]*"
# key=value (value quoted, or up to a blank, comma, semicolon or ampersand); 'key': 'value' (a repr)
_SECRET_PAIR = re.compile(
    rf"""(?P<head>(?<![\w.\-])(?P<q>['"]?){_SECRET_KEY}(?P=q)\s*(?:=|(?<=['"]):)\s*)"""
    r"""(?P<value>"[^"]*"|'[^']*'|[^\s,;&'")}\]]+)""",
    re.IGNORECASE,
)
# a JAAS configuration holds credentials in its own syntax: masked whole, up to its closing ";"
_JAAS = re.compile(r"""(?P<head>(?P<q>['"]?)sasl\.jaas\.config(?P=q)\s*(?:=|:)\s*)(?P<value>[^;\n]*;?)""",
                   re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")


def mask_secrets(text: str) -> str:
    """``text`` with URL passwords, JAAS configurations and values of secret-looking keys replaced
    by ``***`` (errors and log lines often quote a setting or URL as given)."""
    text = _JAAS.sub(lambda m: m.group("head") + _quoted_mask(m.group("value")), text)
    text = _URL_PASSWORD.sub(_url_mask, text)
    return _SECRET_PAIR.sub(lambda m: m.group("head") + _quoted_mask(m.group("value")), text)


def _url_mask(match: re.Match[str]) -> str:
    password = match.group()[len(match.group("head")) : -1]
    shown = password if password in ("password", MASK) else MASK  # a placeholder in help text stays
    return match.group("head") + shown + match.group("tail")


def _quoted_mask(value: str) -> str:
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1 else ""
    return f"{quote}{MASK}{quote}"


def escape_controls(text: str) -> str:
    """Control characters as escapes (``\\n``, ``\\x1b``): one record stays one line."""
    return _CONTROL.sub(_escape_one, text)


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or (
        f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
    )


_ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]


class TextFormatter(logging.Formatter):
    """``time level logger: message``, the message masked and on one line (a traceback follows,
    masked, on its own lines)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(mask_secrets(record.message))
        return super().formatMessage(record)

    def formatException(self, ei: _ExcInfo) -> str:
        return mask_secrets(format_exception(ei))

    def formatStack(self, stack_info: str) -> str:
        return mask_secrets(super().formatStack(stack_info))


def format_exception(ei: _ExcInfo) -> str:
    """A traceback on its own lines, each exception's message (a cause, a chained one's) on one line:
    a name in a message (``"x\\n2026-01-01 ERROR ..."``) cannot forge a line after the frames."""
    if ei[1] is None:
        return ""
    te = traceback.TracebackException.from_exception(ei[1])
    seen: set[int] = set()
    todo = [te]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        message = getattr(node, "_str", None)  # the message CPython prints for it
        if isinstance(message, str):
            setattr(node, "_str", escape_controls(message))  # noqa: B010 (a private attribute)
        todo += [n for n in (node.__cause__, node.__context__) if n is not None]
        todo += list(getattr(node, "exceptions", None) or [])  # an exception group's members
    return "".join(te.format()).rstrip("\n")


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers; secrets masked (json escapes control characters)."""

    def format(self, record: logging.LogRecord) -> str:
        obj = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "msg": mask_secrets(record.getMessage()),
        }
        if record.exc_info:
            obj["exc"] = mask_secrets(self.formatException(record.exc_info))
        return json.dumps(obj)


class StderrHandler(logging.StreamHandler):
    """Writes each record to ``sys.stderr`` as it is at that moment, not as it was when logging was
    configured: a caller that swapped stderr for a while (a test runner invoking the CLI in-process)
    and closed its stand-in leaves no handler writing to a closed stream. ``setStream`` still pins
    a stream of its own."""

    def __init__(self) -> None:
        self._pinned: Any = None
        super().__init__()
        self._pinned = None  # StreamHandler's own set-up pinned the stderr of that moment

    @property
    def stream(self) -> Any:
        return self._pinned if self._pinned is not None else sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        self._pinned = value


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("py4j", "urllib3", "thrift"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # an unreachable metastore is streamer's one error line, not also the socket's own ERROR record
    logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)


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
