"""JSON persistence of the event model's frozen snapshots (the warehouse stores its metadata so).

Generic over the model's dataclasses so a field added to the model later is stored without code
changes here; ``from_json(cls, to_json(x)) == x`` for every snapshot.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable
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
    build = _builder(typing.cast(Any, cls))
    return typing.cast(T, build(json.loads(text)))


Build = Callable[[Any], Any]


@cache
def _builder(tp: Any) -> Build:
    """A function turning parsed JSON into ``tp``, worked out once per type: the warehouse rebuilds
    snapshots on every read, and inspecting type hints on each call was most of a workload's time."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _builder(args[0]) if len(args) == 1 else _as_is
    if origin is list:
        (item,) = typing.get_args(tp)
        build_item = _builder(item)
        return lambda value: None if value is None else [build_item(v) for v in value]
    if origin is dict:
        _, item = typing.get_args(tp)
        build_value = _builder(item)
        return lambda value: None if value is None else {k: build_value(v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        fields = [(f.name, _builder(hints[f.name])) for f in dataclasses.fields(tp)]

        def build(value: Any) -> Any:
            if value is None:
                return None
            return tp(**{name: b(value[name]) for name, b in fields if name in value})

        return build
    return _as_is


def _as_is(value: Any) -> Any:
    return value
