"""Hypothesis strategies for the event model, shared by codec, decoder and planner property tests.

Values are small (short lists, short text) but cover the wire's corners: 64-bit extremes, unicode,
empty collections, None in every optional field. Names come from a tiny alphabet so that generated
events collide on databases and tables, which is what planner tests need. ``events()`` draws a payload
type, an event type that carries it, then a payload whose ``db``/``table`` fields agree with the
envelope's.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, TypeVar

from hypothesis import strategies as st

from streamer.events.avro import field_hints, split_optional, union_members
from streamer.events.model import (
    PAYLOAD_TYPE_OF,
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    Source,
    StorageDescriptor,
    TableSnapshot,
)

T = TypeVar("T")
E = EventType

_DATABASE_LEVEL = {E.CREATE_DATABASE, E.ALTER_DATABASE, E.DROP_DATABASE, E.CREATE_FUNCTION, E.DROP_FUNCTION}
_NO_OBJECT = {E.OPEN_TXN, E.COMMIT_TXN, E.ABORT_TXN, E.PROGRESS, E.BOOTSTRAP_END}

MAX_SIZE = 2
"""Longest generated list or map: enough for order and multiplicity bugs, small enough to be fast."""
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
"""Any Avro long."""
ids = st.integers(min_value=1, max_value=2**62)
"""Positive ids (event, transaction, write ids)."""
texts = st.text(max_size=12)
"""Free text, any unicode a Python str holds except surrogates."""
identifiers = st.text(alphabet="abcxyz_019", min_size=1, max_size=4)
"""Hive-like lower-case names from a tiny alphabet, so that draws collide."""
parameter_maps = st.dictionaries(st.text(max_size=8), texts, max_size=MAX_SIZE)


def model(cls: type, **overrides: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Instances of any model dataclass, fields drawn from their type hints unless overridden."""
    return _record(cls, overrides) if overrides else _cached(cls)


def table_snapshots(db: str | None = None, name: str | None = None) -> st.SearchStrategy[TableSnapshot]:
    return _cached(TableSnapshot).map(lambda t: _place(t, db, name))


def partition_snapshots(
    db: str | None = None, table: str | None = None
) -> st.SearchStrategy[PartitionSnapshot]:
    return _cached(PartitionSnapshot).map(lambda p: _place(p, db, table))


def database_snapshots(name: str | None = None) -> st.SearchStrategy[DatabaseSnapshot]:
    return _cached(DatabaseSnapshot).map(lambda d: _place(d, name, None))


def function_snapshots(db: str | None = None) -> st.SearchStrategy[FunctionSnapshot]:
    return _cached(FunctionSnapshot).map(lambda f: _place(f, db, None))


def storage_descriptors() -> st.SearchStrategy[StorageDescriptor]:
    return _cached(StorageDescriptor)


def file_refs() -> st.SearchStrategy[FileRef]:
    return _cached(FileRef)


def constraints(db: str | None = None, table: str | None = None) -> st.SearchStrategy[Constraint]:
    return _cached(Constraint).map(lambda c: _place(c, db, table))


def column_statistics() -> st.SearchStrategy[ColumnStatistic]:
    return _cached(ColumnStatistic)


def payloads(payload_type: type, db: str | None = None, table: str | None = None) -> st.SearchStrategy[Any]:
    """Payloads of ``payload_type``; given ``db`` / ``table``, every object in them lives there."""
    return _cached(payload_type).map(lambda p: _place(p, db, table))


@st.composite
def events(
    draw: st.DrawFn,
    event_types: Sequence[EventType] | None = None,
    *,
    event_ids: st.SearchStrategy[int] = ids,
    source_ids: st.SearchStrategy[str] = identifiers,
    dbs: st.SearchStrategy[str] = identifiers,
    tables: st.SearchStrategy[str] = identifiers,
) -> Event:
    """Valid events of ``event_types`` (default: all), with a payload of the type each carries.

    The envelope's ``db``/``table`` and every db/table named in the payload agree (``table`` is None
    for database-level events, ``db`` may be None for transaction and progress records).
    """
    event_type = draw(st.sampled_from(list(event_types or EventType)))
    db, table = draw(dbs), draw(tables)
    payload = _place(draw(_cached(PAYLOAD_TYPE_OF[event_type])), db, table)
    source = Source(
        source_id=draw(source_ids),
        event_id=draw(event_ids),
        event_time=draw(st.integers(min_value=0, max_value=2**40)),
        message_format=draw(st.none() | st.sampled_from(["json-2.0", "gzip(json-2.0)", "json"])),
        catalog=draw(st.none() | st.just("hive")),
    )
    no_table = event_type in _DATABASE_LEVEL or event_type in _NO_OBJECT
    return Event(
        source=source,
        event_type=event_type,
        payload=payload,
        db=draw(st.none() | st.just(db)) if event_type in _NO_OBJECT else db,
        table=None if no_table else table,
        ts_ms=draw(st.none() | st.integers(min_value=0, max_value=2**45)),
        prev_event_id=draw(st.none() | st.integers(min_value=0, max_value=2**62)),
    )


# --- the generic walk over type hints ------------------------------------------------------------

_CACHE: dict[type, st.SearchStrategy[Any]] = {}
_NAMED = {"db", "table", "name", "column", "values"}


def _cached(cls: type) -> st.SearchStrategy[Any]:
    """One strategy per type: building them is slower than drawing from them."""
    strategy = _CACHE.get(cls)
    if strategy is None:
        strategy = _CACHE[cls] = _record(cls, {})
    return strategy


def _record(cls: type, overrides: Mapping[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    fields = {name: overrides.get(name) or _for_hint(hint, name) for name, hint in field_hints(cls)}
    return st.builds(cls, **fields)


def _for_hint(hint: Any, name: str) -> st.SearchStrategy[Any]:
    inner, optional = split_optional(hint)
    records = union_members(inner)
    strategy = st.one_of([_cached(r) for r in records]) if records else _plain(inner, name)
    return st.none() | strategy if optional else strategy


def _plain(hint: Any, name: str) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if origin is list:
        return st.lists(_for_hint(typing.get_args(hint)[0], name), max_size=MAX_SIZE)
    if origin is dict:
        values = _for_hint(typing.get_args(hint)[1], name)
        return st.dictionaries(st.text(max_size=8), values, max_size=MAX_SIZE)
    if dataclasses.is_dataclass(hint):
        return _cached(typing.cast(type, hint))
    if isinstance(hint, type) and issubclass(hint, Enum):
        return st.sampled_from(list(hint))
    if hint is str:
        return identifiers if name in _NAMED else texts
    if hint is bool:
        return st.booleans()
    if hint is int:
        return ids if name.endswith(("_id", "_ids")) or name == "size" else longs
    if hint is float:
        return st.floats(allow_nan=False)
    if hint is bytes:
        return st.binary(max_size=16)
    raise TypeError(f"no strategy for {hint!r}")


def _place(obj: T, db: str | None, table: str | None) -> T:
    """``obj`` with every db / table name it holds (at any depth) set to ``db`` / ``table``.

    None leaves names as drawn; optional names that were drawn as None stay None.
    """
    if isinstance(obj, list):
        return typing.cast(T, [_place(item, db, table) for item in obj])
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return obj
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        target = _NAME_FIELDS.get((type(obj), field.name))
        if target is not None:
            wanted = db if target == "db" else table
            if wanted is not None and value is not None:
                changes[field.name] = wanted
        elif isinstance(value, list) or dataclasses.is_dataclass(value):
            changes[field.name] = _place(value, db, table)
    return dataclasses.replace(obj, **changes)


def _name_fields() -> dict[tuple[type, str], str]:
    """(class, field) -> "db" or "table", for every string field that names a database or table."""
    out: dict[tuple[type, str], str] = {(TableSnapshot, "name"): "table", (DatabaseSnapshot, "name"): "db"}
    pending: list[type] = [Event]
    seen: set[type] = set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for name, hint in field_hints(cls):
            inner = split_optional(hint)[0]
            if name in ("db", "table") and inner is str and cls is not Event:
                out[(cls, name)] = name
            pending.extend(_dataclasses_in(inner))
    return out


def _dataclasses_in(hint: Any) -> list[type]:
    if dataclasses.is_dataclass(hint):
        return [typing.cast(type, hint)]
    return [cls for arg in typing.get_args(hint) for cls in _dataclasses_in(split_optional(arg)[0])]


_NAME_FIELDS = _name_fields()
