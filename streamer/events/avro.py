"""Generic conversion between the event model's frozen dataclasses and fastavro's datum shapes.

Converters are derived once per type from dataclass fields and type hints, then cached, so adding a
field to the model needs no code here. Unions of records are written in fastavro's tuple notation
``(full name, record)`` and read back by record name, so two payloads of the same shape never mix.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from enum import Enum
from operator import attrgetter
from typing import Any, TypeVar

NAMESPACE = "io.streamer.events"
"""Avro namespace of every record of the event model."""

PRIMITIVES: dict[type, str] = {str: "string", int: "long", float: "double", bool: "boolean", bytes: "bytes"}

Converter = Callable[[Any], Any]
T = TypeVar("T")


def avro_name(cls: type) -> str:
    """The Avro full name of a model dataclass."""
    return f"{NAMESPACE}.{cls.__name__}"


def split_optional(hint: Any) -> tuple[Any, bool]:
    """``X | None`` -> ``(X, True)``; a union of several non-None members stays a union."""
    if not _is_union(hint):
        return hint, False
    members = [m for m in typing.get_args(hint) if m is not type(None)]
    optional = len(members) != len(typing.get_args(hint))
    if len(members) == 1:
        return members[0], optional
    return typing.Union[tuple(members)], optional  # noqa: UP007 - built from a runtime tuple


def union_members(hint: Any) -> tuple[type, ...]:
    """The dataclasses of a union of records (the payload), or ``()`` if ``hint`` is no such union."""
    if not _is_union(hint):
        return ()
    members = typing.get_args(hint)
    if all(dataclasses.is_dataclass(m) for m in members):
        return typing.cast(tuple[type, ...], members)
    raise TypeError(f"unsupported union {hint!r}: only unions of dataclasses (and None) map to Avro")


def _is_union(hint: Any) -> bool:
    return isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union


def field_hints(cls: type) -> list[tuple[str, Any]]:
    """``(name, resolved type hint)`` of each dataclass field, in declaration order."""
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name]) for f in dataclasses.fields(cls)]


# --- writing: dataclass -> fastavro datum ------------------------------------------------------

_WRITERS: dict[type, Converter] = {}
_READERS: dict[type, Converter] = {}


def to_avro(obj: Any) -> dict[str, Any]:
    """A model dataclass instance as the dict fastavro writes with the type's record schema.

    The result shares nested dicts with ``obj`` (no copies on the hot path): read it, don't modify it.
    """
    return typing.cast(dict[str, Any], record_writer(type(obj))(obj))


def from_avro(cls: type[T], datum: dict[str, Any]) -> T:
    """The instance of ``cls`` that fastavro read (with ``return_record_name=True``, override on)."""
    return typing.cast(T, record_reader(cls)(datum))


def record_writer(cls: type) -> Converter:
    """A cached function turning a ``cls`` instance into a fastavro record dict."""
    cached = _WRITERS.get(cls)
    if cached is not None:
        return cached
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    names: list[str] = []
    converted: list[tuple[str, Converter]] = []
    has_dict = not hasattr(cls, "__slots__")

    def write(obj: Any) -> dict[str, Any]:
        if type(obj) is not cls:
            raise TypeError(f"{type(obj).__name__} where {cls.__name__} is expected")
        if not converted and has_dict:
            return typing.cast(dict[str, Any], obj.__dict__)  # fastavro only reads it
        record = dict(obj.__dict__) if has_dict else {name: getattr(obj, name) for name in names}
        for name, convert in converted:
            record[name] = convert(record[name])
        return record

    _WRITERS[cls] = write  # registered before the fields are built, so recursive types resolve
    for name, hint in field_hints(cls):
        names.append(name)
        convert = value_writer(hint)
        if convert is not None:
            converted.append((name, convert))
    return write


def value_writer(hint: Any) -> Converter | None:
    """The conversion a value of type ``hint`` needs, or None when fastavro takes it as it is."""
    inner, optional = split_optional(hint)
    records = union_members(inner)
    if dataclasses.is_dataclass(inner) and optional:
        records = (typing.cast(type, inner),)
    if records:
        # Tuple notation: fastavro then picks the union branch by name instead of validating each.
        names = {cls: avro_name(cls) for cls in records}
        writers = {cls: record_writer(cls) for cls in records}

        def write_union(value: Any) -> Any:
            if value is None:
                return None
            cls = type(value)
            if cls not in names:
                allowed = ", ".join(c.__name__ for c in records)
                raise TypeError(f"{cls.__name__} where one of {allowed} is expected")
            return (names[cls], writers[cls](value))

        return write_union
    convert = _writer_for_plain(inner)
    if convert is None or not optional:
        return convert
    return lambda value: None if value is None else convert(value)


def _writer_for_plain(hint: Any) -> Converter | None:
    origin = typing.get_origin(hint)
    if origin is list:
        item = value_writer(typing.get_args(hint)[0])
        return None if item is None else (lambda values: [item(v) for v in values])
    if origin is dict:
        key, value_hint = typing.get_args(hint)
        if key is not str:
            raise TypeError(f"unsupported {hint!r}: Avro maps have string keys")
        value = value_writer(value_hint)
        return None if value is None else (lambda mapping: {k: value(v) for k, v in mapping.items()})
    if isinstance(hint, type) and issubclass(hint, Enum):
        return attrgetter("value")
    if dataclasses.is_dataclass(hint):
        return record_writer(typing.cast(type, hint))
    if hint in PRIMITIVES:
        return None
    raise TypeError(f"unsupported type {hint!r} in the event model")


# --- reading: fastavro datum -> dataclass ------------------------------------------------------


def record_reader(cls: type) -> Converter:
    """A cached function building a ``cls`` instance from the record dict fastavro read.

    The fields are checked against the model by the schema-drift test, so the instance is built the
    way ``copy`` does (new object, fill its ``__dict__``): the decoder's hot path, about twice as fast
    as calling a frozen dataclass's ``__init__``. Classes with ``__post_init__`` or slots get ``__init__``.
    """
    cached = _READERS.get(cls)
    if cached is not None:
        return cached
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    converted: list[tuple[str, Converter]] = []
    fast = not hasattr(cls, "__post_init__") and not hasattr(cls, "__slots__")
    new = object.__new__

    def read(datum: dict[str, Any]) -> Any:
        for name, convert in converted:
            datum[name] = convert(datum[name])
        if not fast:
            return cls(**datum)
        obj = new(cls)
        obj.__dict__.update(datum)
        return obj

    _READERS[cls] = read
    for name, hint in field_hints(cls):
        convert = value_reader(hint)
        if convert is not None:
            converted.append((name, convert))
    return read


def value_reader(hint: Any) -> Converter | None:
    inner, optional = split_optional(hint)
    records = union_members(inner)
    if records:
        by_name = {avro_name(cls): record_reader(cls) for cls in records}

        def read_union(value: Any) -> Any:
            if value is None:
                if optional:
                    return None
                raise ValueError("null where a record is required")
            name, datum = value
            reader = by_name.get(name)
            if reader is None:
                raise ValueError(f"unknown record {name!r} in a union of {sorted(by_name)}")
            return reader(datum)

        return read_union
    convert = _reader_for_plain(inner)
    if convert is None or not optional:
        return convert
    return lambda value: None if value is None else convert(value)


def _reader_for_plain(hint: Any) -> Converter | None:
    origin = typing.get_origin(hint)
    if origin is list:
        item = value_reader(typing.get_args(hint)[0])
        return None if item is None else (lambda values: [item(v) for v in values])
    if origin is dict:
        value = value_reader(typing.get_args(hint)[1])
        return None if value is None else (lambda mapping: {k: value(v) for k, v in mapping.items()})
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum_reader(hint)
    if dataclasses.is_dataclass(hint):
        reader = record_reader(typing.cast(type, hint))
        # A single-record union arrives as a plain dict (return_record_name_override); accept both.
        return lambda value: reader(value[1] if isinstance(value, tuple) else value)
    if hint in PRIMITIVES:
        return None
    raise TypeError(f"unsupported type {hint!r} in the event model")


def _enum_reader(enum: type[Enum]) -> Converter:
    members = {member.value: member for member in enum}

    def read_enum(value: Any) -> Enum:
        try:
            return members[value]
        except (KeyError, TypeError):
            raise ValueError(f"unknown {enum.__name__} {value!r} (written by a newer streamer?)") from None

    return read_enum
