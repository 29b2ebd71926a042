"""Reading and writing the JSON files of a target's state dir: one atomic write, one typed error.

Every state file is replaced whole with a unique temp name in the same directory, written, fsynced,
renamed over the old one, and the directory fsynced: a crash leaves the old file or the new one, never
a torn one, and two writers never share a temp file. A file that is not valid JSON, or JSON of the
wrong shape, is a ``StateFileError`` naming the file and what is wrong (never a raw ``KeyError``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamer.errors import StreamerError
from streamer.filesystems import atomic_write


class StateFileError(StreamerError):
    """A state file is unreadable, not JSON, or JSON of the wrong shape; the message names it."""


def write_json(path: str | Path, body: Any) -> None:
    """``atomic_write`` of ``body`` as indented, key-sorted JSON."""
    atomic_write(path, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def read_json(path: str | Path) -> Any:
    """The JSON value in ``path``; None when there is no such file (a file holding ``null`` is
    refused: no writer writes one)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StateFileError(f"cannot read state file {path}: {exc}") from exc
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise StateFileError(f"state file {path} is not valid JSON: {exc}") from exc
    if value is None:
        raise StateFileError(f"state file {path} is malformed: it holds null")
    return value


# --- shape checks: each names the file and the field ----------------------------------------------


def expect_object(value: Any, path: str | Path, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise StateFileError(f"state file {path} is malformed: {what} must be a JSON object, "
                             f"not {_kind(value)}")
    return value


def expect_list(value: Any, path: str | Path, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise StateFileError(f"state file {path} is malformed: {what} must be a JSON list, "
                             f"not {_kind(value)}")
    return value


def expect_int(value: Any, path: str | Path, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StateFileError(f"state file {path} is malformed: {what} must be an integer, "
                             f"not {_kind(value)}")
    return value


def expect_opt_int(value: Any, path: str | Path, what: str) -> int | None:
    return None if value is None else expect_int(value, path, what)


def expect_str(value: Any, path: str | Path, what: str) -> str:
    if not isinstance(value, str):
        raise StateFileError(f"state file {path} is malformed: {what} must be a string, "
                             f"not {_kind(value)}")
    return value


def expect_opt_str(value: Any, path: str | Path, what: str) -> str | None:
    return None if value is None else expect_str(value, path, what)


def field(obj: Mapping[str, Any], key: str, path: str | Path, what: str) -> Any:
    """``obj[key]``, or a ``StateFileError`` naming the missing field."""
    if key not in obj:
        raise StateFileError(f"state file {path} is malformed: {what} has no {key!r}")
    return obj[key]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "a string", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)
