"""The Avro schemas of the event model as loaded from ``schemas/*.avsc``, the wire truth.

Each named record lives in its own file ``<full name>.avsc`` and refers to others by full name; this
module assembles them into one self-contained schema (what a schema registry stores), parses it with
fastavro and computes its CRC-64-AVRO fingerprint (what single-object encoding puts on the wire).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.schema import fingerprint, to_parsing_canonical_form

from streamer.errors import ConfigError
from streamer.events.avro import NAMESPACE

SCHEMAS_DIR_ENV = "STREAMER_SCHEMAS_DIR"
EVENT_SCHEMA_NAME = f"{NAMESPACE}.Event"
_AVRO_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


@dataclass(frozen=True)
class WriterSchema:
    """One version of the Event schema: its JSON, fastavro's parsed form and its fingerprint."""

    json: str
    parsed: Any
    fingerprint: bytes  # 8 bytes, little-endian CRC-64-AVRO of the Parsing Canonical Form

    @classmethod
    def from_json(cls, text: str) -> WriterSchema:
        """Parse a self-contained schema; raises ValueError (or fastavro's errors) if it is invalid."""
        parsed = parse_schema(json.loads(text))
        return cls(json=text, parsed=parsed, fingerprint=schema_fingerprint(parsed))


def schema_fingerprint(parsed: Any) -> bytes:
    """The 8-byte CRC-64-AVRO fingerprint of a parsed schema, in the byte order of the wire."""
    return bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))


def schemas_dir() -> Path:
    """``$STREAMER_SCHEMAS_DIR``, else ``schemas/`` at the repository root."""
    override = os.environ.get(SCHEMAS_DIR_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "schemas"


def assemble(root: str, load: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """Inline the named records ``root`` refers to (``load(full name) -> dict``) at their first use."""
    defined: set[str] = set()

    def expand(node: Any, namespace: str) -> Any:
        if isinstance(node, str):
            full = node if "." in node or node in _AVRO_PRIMITIVES else f"{namespace}.{node}"
            if node in _AVRO_PRIMITIVES or full in defined:
                return node
            return expand(load(full), namespace)
        if isinstance(node, list):
            return [expand(branch, namespace) for branch in node]
        kind = node.get("type")
        if kind == "record":
            space = node.get("namespace", namespace)
            defined.add(f"{space}.{node['name']}" if "." not in node["name"] else node["name"])
            fields = [{**f, "type": expand(f["type"], space)} for f in node["fields"]]
            return {**node, "fields": fields}
        if kind in ("enum", "fixed"):
            space = node.get("namespace", namespace)
            defined.add(f"{space}.{node['name']}" if "." not in node["name"] else node["name"])
            return node
        if kind == "array":
            return {**node, "items": expand(node["items"], namespace)}
        if kind == "map":
            return {**node, "values": expand(node["values"], namespace)}
        return {**node, "type": expand(kind, namespace)}

    return _as_record(expand(root, NAMESPACE))


def _as_record(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"schema root must be a record, found {value!r}")
    return value


def load_writer_schemas(directory: Path | None = None) -> dict[bytes, WriterSchema]:
    """Every Event schema a reader resolves, by fingerprint: the current one and ``history/*.avsc``.

    ``history/`` keeps self-contained copies of earlier versions (written by ``schema_gen --archive``)
    so that records produced before a schema change stay readable.
    """
    directory = directory or schemas_dir()
    current = load_event_schema(directory)
    known = {current.fingerprint: current}
    for path in sorted((directory / "history").glob("*.avsc")):
        try:
            old = WriterSchema.from_json(path.read_text(encoding="utf-8"))
        except Exception as exc:  # fastavro raises several unrelated types for invalid schemas
            raise ConfigError(f"invalid archived Avro schema {path}: {exc}") from exc
        known.setdefault(old.fingerprint, old)
    return known


def load_event_schema(directory: Path | None = None) -> WriterSchema:
    """The current Event schema from ``directory`` (default: :func:`schemas_dir`)."""
    return _load_event_schema(directory or schemas_dir())


@functools.cache
def _load_event_schema(directory: Path) -> WriterSchema:
    def load(name: str) -> dict[str, Any]:
        path = directory / f"{name}.avsc"
        try:
            return _as_record(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise ConfigError(
                f"Avro schema {name} not found: expected {path} (set {SCHEMAS_DIR_ENV}, or regenerate "
                "with `python -m streamer.events.schema_gen`)"
            ) from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read Avro schema {path}: {exc}") from exc

    schema = assemble(EVENT_SCHEMA_NAME, load)
    try:
        return WriterSchema.from_json(json.dumps(schema, separators=(",", ":")))
    except Exception as exc:  # fastavro raises several unrelated types for invalid schemas
        raise ConfigError(f"invalid Avro schemas in {directory}: {exc}") from exc
