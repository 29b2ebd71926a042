"""JSON persistence of the event model's frozen snapshots (the warehouse stores its metadata so).

Generic over the model's dataclasses so a field added to the model later is stored without code
changes here; ``from_json(cls, to_json(x)) == x`` for every snapshot.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any, TypeVar, Union

T = TypeVar("T")


def to_json(obj: object) -> str:
    """Serialize a snapshot dataclass as compact JSON with sorted keys."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"expected a dataclass instance, got {type(obj).__name__}")
    return json.dumps(dataclasses.asdict(obj), sort_keys=True, separators=(",", ":"))


def from_json(cls: type[T], text: str) -> T:
    """Rebuild a snapshot of type ``cls`` from :func:`to_json` output."""
    value = _build(cls, json.loads(text))
    return typing.cast(T, value)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(args[0], value) if len(args) == 1 else value
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_build(item, v) for v in value]
    if origin is dict:
        _, item = typing.get_args(tp)
        return {k: _build(item, v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        kwargs = {
            f.name: _build(hints[f.name], value[f.name]) for f in dataclasses.fields(tp) if f.name in value
        }
        return tp(**kwargs)
    return value
