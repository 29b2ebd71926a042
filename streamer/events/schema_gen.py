"""Generate ``schemas/*.avsc`` from the event model's dataclasses: ``python -m streamer.events.schema_gen``.

The dataclasses are the source of truth for the shape; the generated files are the wire truth that
code loads and other languages read. A unit test fails when the two drift apart. Mapping: ``X | None``
-> ``["null", X]`` (default null), ``list`` -> array, ``dict`` -> map, ``int`` -> long, ``float`` ->
double, enums -> string (old readers survive new symbols; the codec validates), the payload union ->
a union of records, one branch per payload type. Dataclass defaults become Avro defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import sys
import typing
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from streamer.events.avro import (
    NAMESPACE,
    PRIMITIVES,
    avro_name,
    field_hints,
    split_optional,
    union_members,
    value_writer,
)
from streamer.events.model import Event
from streamer.events.schemas import WriterSchema, load_event_schema, schemas_dir


def record_schemas(root: type = Event) -> dict[str, dict[str, Any]]:
    """Every record reachable from ``root``, by full name; records refer to each other by full name."""
    out: dict[str, dict[str, Any]] = {}
    pending: list[type] = [root]
    while pending:
        cls = pending.pop(0)
        if avro_name(cls) not in out:
            out[avro_name(cls)] = _record_schema(cls, pending)
    return out


def schema_files(root: type = Event) -> dict[str, str]:
    """File name -> exact text of each ``.avsc`` file, as committed."""
    return {
        f"{name}.avsc": json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
        for name, schema in sorted(record_schemas(root).items())
    }


def write_schemas(directory: Path) -> list[Path]:
    """(Re)write the files in ``directory`` and delete generated files of records that no longer exist."""
    directory.mkdir(parents=True, exist_ok=True)
    files = schema_files()
    for stale in directory.glob(f"{NAMESPACE}.*.avsc"):
        if stale.name not in files:
            stale.unlink()
    written = []
    for name, text in files.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def archive_current(directory: Path) -> Path:
    """Keep a self-contained copy of the schema in ``directory`` under ``history/<fingerprint>.avsc``.

    Run it before changing the model, so that the new readers still resolve records already written.
    """
    current: WriterSchema = load_event_schema(directory)
    history = directory / "history"
    history.mkdir(exist_ok=True)
    path = history / f"{current.fingerprint.hex()}.avsc"
    text = json.dumps(json.loads(current.json), indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def _record_schema(cls: type, pending: list[type]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "record", "name": cls.__name__, "namespace": NAMESPACE}
    doc = _doc(cls)
    if doc:
        schema["doc"] = doc
    fields_by_name = {f.name: f for f in dataclasses.fields(cls)}
    schema["fields"] = [_field_schema(fields_by_name[name], hint, pending) for name, hint in field_hints(cls)]
    return schema


def _doc(cls: type) -> str | None:
    doc = cls.__doc__
    if not doc or doc.startswith(f"{cls.__name__}("):  # dataclass's generated signature, not a doc
        return None
    return " ".join(inspect.cleandoc(doc).split())


def _field_schema(field: dataclasses.Field[Any], hint: Any, pending: list[type]) -> dict[str, Any]:
    inner, optional = split_optional(hint)
    records = union_members(inner)
    if records:
        pending.extend(records)
        branches: list[Any] = [avro_name(r) for r in records]
    else:
        branches = [_plain_type(inner, pending)]
    out: dict[str, Any] = {"name": field.name}
    has_default, default = _default(field, hint)
    if optional:
        # Avro: a union's default must match its first branch.
        branches = [*branches, "null"] if has_default and default is not None else ["null", *branches]
    out["type"] = branches if optional or len(branches) > 1 else branches[0]
    if isinstance(inner, type) and issubclass(inner, Enum):
        out["doc"] = f"one of the {inner.__name__} values (a string, so old readers survive new values)"
    if has_default:
        out["default"] = default
    return out


def _plain_type(hint: Any, pending: list[type]) -> Any:
    origin = typing.get_origin(hint)
    if origin is list:
        return {"type": "array", "items": _nested_type(typing.get_args(hint)[0], pending)}
    if origin is dict:
        return {"type": "map", "values": _nested_type(typing.get_args(hint)[1], pending)}
    if isinstance(hint, type) and issubclass(hint, Enum):
        return "string"
    if dataclasses.is_dataclass(hint):
        cls = typing.cast(type, hint)
        pending.append(cls)
        return avro_name(cls)
    if hint in PRIMITIVES:
        return PRIMITIVES[hint]
    raise TypeError(f"unsupported type {hint!r} in the event model")


def _nested_type(hint: Any, pending: list[type]) -> Any:
    inner, optional = split_optional(hint)
    records = union_members(inner)
    branches = [avro_name(r) for r in records] if records else [_plain_type(inner, pending)]
    pending.extend(records)
    return ["null", *branches] if optional else (branches if len(branches) > 1 else branches[0])


def _default(field: dataclasses.Field[Any], hint: Any) -> tuple[bool, Any]:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return False, None
    convert = value_writer(hint)
    return True, _json_value(convert(value) if convert is not None else value)


def _json_value(datum: Any) -> Any:
    """A fastavro datum as an Avro JSON default (records in tuple notation lose their name)."""
    if isinstance(datum, tuple):
        return _json_value(datum[1])
    if isinstance(datum, dict):
        return {k: _json_value(v) for k, v in datum.items()}
    if isinstance(datum, list):
        return [_json_value(v) for v in datum]
    if isinstance(datum, bytes):
        return datum.decode("latin-1")  # the Avro spec's JSON encoding of bytes defaults
    return datum


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamer.events.schema_gen", description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="schemas directory (default: repo schemas/)")
    parser.add_argument("--check", action="store_true", help="only report drift; exit 1 if any")
    parser.add_argument("--archive", action="store_true", help="keep the current schema in history/ first")
    args = parser.parse_args(argv)
    directory: Path = args.dir or schemas_dir()
    if args.check:
        lines = drift(directory)
        for line in lines:
            print(line, file=sys.stderr)
        return 1 if lines else 0
    if args.archive:
        print(f"archived {archive_current(directory)}")
    for path in write_schemas(directory):
        print(f"wrote {path}")
    return 0


def drift(directory: Path) -> list[str]:
    """Differences between the generated files and ``directory``, one line each."""
    expected = schema_files()
    found = {p.name: p.read_text(encoding="utf-8") for p in directory.glob(f"{NAMESPACE}.*.avsc")}
    lines = [f"missing {name}" for name in sorted(expected.keys() - found.keys())]
    lines += [f"stale {name}" for name in sorted(found.keys() - expected.keys())]
    common = sorted(expected.keys() & found.keys())
    lines += [f"differs {name}" for name in common if expected[name] != found[name]]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
