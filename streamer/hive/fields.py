"""One declarative table of Hive's metastore objects <-> streamer's snapshots, for every wire form.

Each ``HiveObject`` lists its Thrift fields once: the field id and TJSON type (``hive_metastore.thrift``),
the Thrift name (the attribute of a generated class and the key of a TJSON struct alike), the
snapshot attribute it fills, and how a missing value reads or a ``None`` is sent. Both wire forms
are driven from it: TJSON text in Hive's messages (``streamer.hive.objects``) and the Thrift
objects of the metastore API (``streamer.metastore.thrift.convert``), so a field is added, renamed
or defaulted in one place. Pure: no I/O, no generated classes (``load``/``dump`` take the accessors).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Generic, NamedTuple, TypeVar

from streamer.events import model as ev
from streamer.hive.tjson import BIN, BOOL, DBL, I16, I32, I64, STR, ListOf, MapOf, Struct, TJSONError, TType

T = TypeVar("T")

RESOURCE_TYPES = {1: "JAR", 2: "FILE", 3: "ARCHIVE"}  # Hive's ResourceType


@dataclass(frozen=True)
class Field:
    """One Thrift field and the snapshot attribute it carries.

    ``default``: what a missing (``None``) value reads as. ``required``: a TJSON text without it is
    refused (the metastore's own answers are trusted). ``send_none_as``: what the Thrift client sends
    for ``None`` (a value Hive 2.3's server needs set). ``unset_false``: TJSON leaves ``False`` unset,
    as Hive does for this optional flag. ``read``/``write``: a value's conversion (wire -> snapshot,
    snapshot -> wire; with ``of``, of the nested object's snapshot, and a missing one stays ``None``).
    ``thrift_write``: the Thrift client's ``write`` where Hive 2.3 takes another form. ``of``: a nested
    object (``many``: a list of them; ``flat``: a union whose one set member's attributes are the
    snapshot's own, the member chosen by its object's ``fixed["kind"]``).
    """

    fid: int
    theirs: str
    wire: TType | None = None
    ours: str | None = None
    default: Any = None
    required: bool = False
    send_none_as: Any = None
    unset_false: bool = False
    read: Callable[[Any], Any] | None = None
    write: Callable[[Any], Any] | None = None
    thrift_write: Callable[[Any], Any] | None = None
    of: HiveObject[Any] | None = None
    many: bool = False
    flat: bool = False

    @property
    def wire_type(self) -> TType:
        if self.of is not None:
            return ListOf(self.of.struct) if self.many else self.of.struct
        assert self.wire is not None, self.theirs
        return self.wire


@dataclass(frozen=True)
class HiveObject(Generic[T]):
    """A Hive struct (``name``: its Thrift class), the snapshot class it maps to, and its fields."""

    name: str
    snapshot: type[T]
    fields: tuple[Field, ...]
    fixed: dict[str, Any] = field(default_factory=dict)  # snapshot attributes no field carries

    @property
    def struct(self) -> Struct:
        """The TJSON spec of the struct (``streamer.hive.tjson``)."""
        return Struct(self.name, {f.fid: (f.theirs, f.wire_type) for f in self.fields})


# --- the two directions, for any accessor -------------------------------------------------------

Getter = Callable[[Any, str], Any]
Maker = Callable[["HiveObject[Any]", dict[str, Any]], Any]


def dict_get(obj: Any, name: str) -> Any:
    """The accessor of a TJSON struct read by ``streamer.hive.tjson`` (a dict keyed by Thrift name)."""
    return obj.get(name)


def load(obj: HiveObject[T], value: Any, get: Getter = dict_get, *, strict: bool = True, path: str = "") -> T:
    """The snapshot of ``value`` (``None``: every field missing), its fields read through ``get``.

    ``strict``: a missing required field is a ``TJSONError`` naming it (TJSON text from a message)."""
    where = path or obj.name
    out: dict[str, Any] = dict(obj.fixed)
    for f in obj.fields:
        if f.ours is None and not f.flat:
            continue
        v = None if value is None else get(value, f.theirs)
        if v is None and f.required and strict:
            raise TJSONError(f"{where}: required field {f.theirs!r} is missing")
        if f.flat:
            out.update(_load_member(_of(f), v, get, strict, f"{where}.{f.theirs}"))
        else:
            out[str(f.ours)] = _load_value(f, v, get, strict, f"{where}.{f.theirs}")
    return obj.snapshot(**out)


def _of(f: Field) -> HiveObject[Any]:
    assert f.of is not None, f.theirs
    return f.of


def _load_member(union: HiveObject[Any], value: Any, get: Getter, strict: bool, path: str) -> Any:
    """The attributes of a union's one set member (non-``strict``: the first set, in field order)."""
    present = [] if value is None else [m for m in union.fields if get(value, m.theirs) is not None]
    if not present or (strict and len(present) != 1):
        raise TJSONError(f"{path}: a union needs exactly one known member")
    member = _of(present[0])
    return load(member, get(value, present[0].theirs), get, strict=strict, path=path)


def union_member(union: HiveObject[Any], kind: str) -> Field | None:
    """The member of ``union`` whose object's kind is ``kind`` (any case)."""
    return next((m for m in union.fields if _of(m).fixed["kind"] == kind.upper()), None)


def _load_value(f: Field, v: Any, get: Getter, strict: bool, path: str) -> Any:
    if f.of is not None:
        if f.read is not None:
            return None if v is None else f.read(load(f.of, v, get, strict=strict, path=path))
        if f.many:
            return [load(f.of, x, get, strict=strict, path=path) for x in v or []]
        return load(f.of, v, get, strict=strict, path=path)
    if isinstance(f.wire, ListOf):
        return list(v or [])
    if isinstance(f.wire, MapOf):
        return dict(v or {})
    if v is None:
        v = f.default
    return f.read(v) if f.read is not None else v


def dump(obj: HiveObject[Any], snapshot: Any, make: Maker | None = None) -> Any:
    """``snapshot`` as the struct: a dict keyed by Thrift name for TJSON (``make`` None), or what
    ``make`` builds of each struct's dict (Thrift objects; ``send_none_as`` then applies).
    A snapshot may also be a dict keyed by attribute."""
    thrift = make is not None
    out: dict[str, Any] = {}
    for f in obj.fields:
        if f.ours is None and not f.flat:
            continue
        write = f.thrift_write if thrift and f.thrift_write is not None else f.write
        if f.flat:
            out[f.theirs] = _dump_member(_of(f), snapshot, make)
            continue
        name = str(f.ours)
        v: Any = snapshot.get(name) if isinstance(snapshot, dict) else getattr(snapshot, name)
        if f.of is not None and write is not None:
            v = None if v is None else dump(f.of, write(v), make)
        elif f.of is not None:
            v = [dump(f.of, x, make) for x in v] if f.many else dump(f.of, v, make)
        elif isinstance(f.wire, ListOf):
            v = list(v)
        elif isinstance(f.wire, MapOf):
            v = dict(v) if v else {}
        elif v is not None and write is not None:
            v = write(v)
        if thrift and v is None:
            v = f.send_none_as
        if not thrift and f.unset_false and v is False:
            v = None
        out[f.theirs] = v
    return make(obj, out) if make is not None else out


def _dump_member(union: HiveObject[Any], snapshot: Any, make: Maker | None) -> Any:
    member = union_member(union, snapshot.kind)
    if member is None:
        raise ValueError(f"unknown {union.name} kind {snapshot.kind!r}")
    out = {member.theirs: dump(_of(member), snapshot, make)}
    return make(union, out) if make is not None else out


# --- conversions --------------------------------------------------------------------------------


def _or(default: Any) -> Callable[[Any], Any]:
    return lambda v: v or default


def resource_type_name(number: Any) -> str:
    return RESOURCE_TYPES.get(number, str(number))


def resource_type_id(name: str) -> int:
    for number, known in RESOURCE_TYPES.items():
        if known == name.upper():
            return number
    if name.isdigit():
        return int(name)
    raise ValueError(f"unknown function resource type {name!r} (expected JAR, FILE or ARCHIVE)")


# --- the table (hive_metastore.thrift field ids) -------------------------------------------------

PARAMS = MapOf(STR, STR)

FIELD_SCHEMA = HiveObject("FieldSchema", ev.Column, (
    Field(1, "name", STR, "name", required=True),
    Field(2, "type", STR, "type", read=_or("")),
    Field(3, "comment", STR, "comment"),
))
SERDE_INFO = HiveObject("SerDeInfo", ev.SerDe, (
    Field(1, "name", STR, "name"),
    Field(2, "serializationLib", STR, "serialization_lib"),
    Field(3, "parameters", PARAMS, "parameters"),
))
ORDER = HiveObject("Order", ev.SortColumn, (
    Field(1, "col", STR, "column", read=_or("")),
    Field(2, "order", I32, "order", default=1),
))
STORAGE_DESCRIPTOR = HiveObject("StorageDescriptor", ev.StorageDescriptor, (
    Field(1, "cols", ours="columns", of=FIELD_SCHEMA, many=True),
    Field(2, "location", STR, "location"),
    Field(3, "inputFormat", STR, "input_format"),
    Field(4, "outputFormat", STR, "output_format"),
    Field(5, "compressed", BOOL, "compressed", default=False),
    Field(6, "numBuckets", I32, "num_buckets", default=-1),
    Field(7, "serdeInfo", ours="serde", of=SERDE_INFO),
    Field(8, "bucketCols", ListOf(STR), "bucket_columns"),
    Field(9, "sortCols", ours="sort_columns", of=ORDER, many=True),
    Field(10, "parameters", PARAMS, "parameters"),
    Field(12, "storedAsSubDirectories", BOOL, "stored_as_subdirectories", default=False),
))
TABLE = HiveObject("Table", ev.TableSnapshot, (
    Field(1, "tableName", STR, "name", required=True),
    Field(2, "dbName", STR, "db", required=True),
    Field(3, "owner", STR, "owner"),
    Field(4, "createTime", I32, "create_time", send_none_as=0),
    Field(5, "lastAccessTime", I32, "last_access_time", send_none_as=0),
    Field(6, "retention", I32, "retention", send_none_as=0),
    Field(7, "sd", ours="sd", of=STORAGE_DESCRIPTOR),
    Field(8, "partitionKeys", ours="partition_keys", of=FIELD_SCHEMA, many=True),
    Field(9, "parameters", PARAMS, "parameters"),
    Field(10, "viewOriginalText", STR, "view_original_text"),
    Field(11, "viewExpandedText", STR, "view_expanded_text"),
    Field(12, "tableType", STR, "table_type", read=_or("MANAGED_TABLE")),
    Field(14, "temporary", BOOL, "temporary", default=False, unset_false=True),
    Field(15, "rewriteEnabled", BOOL, "rewrite_enabled", default=False),
    Field(17, "catName", STR, "catalog"),
    Field(18, "ownerType", I32, "owner_type"),
    Field(19, "writeId", I64, "write_id"),
))
PARTITION = HiveObject("Partition", ev.PartitionSnapshot, (
    Field(1, "values", ListOf(STR), "values", required=True),
    Field(2, "dbName", STR, "db"),
    Field(3, "tableName", STR, "table"),
    Field(4, "createTime", I32, "create_time", send_none_as=0),
    Field(5, "lastAccessTime", I32, "last_access_time", send_none_as=0),
    Field(6, "sd", ours="sd", of=STORAGE_DESCRIPTOR),
    Field(7, "parameters", PARAMS, "parameters"),
    Field(9, "catName", STR, "catalog"),
    Field(10, "writeId", I64, "write_id"),
))
DATABASE = HiveObject("Database", ev.DatabaseSnapshot, (
    Field(1, "name", STR, "name", required=True),
    Field(2, "description", STR, "description"),
    Field(3, "locationUri", STR, "location"),
    Field(4, "parameters", PARAMS, "parameters"),
    Field(6, "ownerName", STR, "owner_name"),
    Field(7, "ownerType", I32, "owner_type"),
    Field(8, "catalogName", STR, "catalog"),
    Field(9, "createTime", I32, "create_time"),
    Field(10, "managedLocationUri", STR, "managed_location"),
))
RESOURCE_URI = HiveObject("ResourceUri", ev.ResourceUri, (
    Field(1, "resourceType", I32, "resource_type", 1, read=resource_type_name, write=resource_type_id),
    Field(2, "uri", STR, "uri", read=_or("")),
))
FUNCTION = HiveObject("Function", ev.FunctionSnapshot, (
    Field(1, "functionName", STR, "name", required=True),
    Field(2, "dbName", STR, "db", required=True),
    Field(3, "className", STR, "class_name", required=True),
    Field(4, "ownerName", STR, "owner_name"),
    Field(5, "ownerType", I32, "owner_type", send_none_as=1),  # Hive 2.3 needs one: USER
    Field(6, "createTime", I32, "create_time", send_none_as=0),
    Field(7, "functionType", I32, "function_type", default=1),
    Field(8, "resourceUris", ours="resource_uris", of=RESOURCE_URI, many=True),
    Field(9, "catName", STR, "catalog"),
))


# --- constraints: one struct a kind, each flattened into ``Constraint`` --------------------------


def _flags(first: int) -> tuple[Field, ...]:
    return (
        Field(first, "enable_cstr", BOOL, "enabled", default=True),
        Field(first + 1, "validate_cstr", BOOL, "validated", default=False),
        Field(first + 2, "rely_cstr", BOOL, "rely", default=False),
    )


def _names(first: int) -> tuple[Field, ...]:
    return (
        Field(first, "table_db", STR, "db", required=True),
        Field(first + 1, "table_name", STR, "table", required=True),
        Field(first + 2, "column_name", STR, "column", required=True),
    )


_CAT = "catName"


def _key_seq(fid: int) -> Field:
    return Field(fid, "key_seq", I32, "position", default=1)



def _constraint(kind: str, name: str, fields: tuple[Field, ...]) -> HiveObject[ev.Constraint]:
    return HiveObject(name, ev.Constraint, fields, fixed={"kind": kind})


SQL_PRIMARY_KEY = _constraint("PRIMARY_KEY", "SQLPrimaryKey", (
    *_names(1), _key_seq(4), Field(5, "pk_name", STR, "name", required=True),
    *_flags(6), Field(9, _CAT, STR, "catalog"),
))
SQL_FOREIGN_KEY = _constraint("FOREIGN_KEY", "SQLForeignKey", (
    Field(1, "pktable_db", STR, "ref_db"),
    Field(2, "pktable_name", STR, "ref_table"),
    Field(3, "pkcolumn_name", STR, "ref_column"),
    Field(4, "fktable_db", STR, "db", required=True),
    Field(5, "fktable_name", STR, "table", required=True),
    Field(6, "fkcolumn_name", STR, "column", required=True),
    _key_seq(7),
    Field(8, "update_rule", I32, "update_rule", send_none_as=0),
    Field(9, "delete_rule", I32, "delete_rule", send_none_as=0),
    Field(10, "fk_name", STR, "name", required=True),
    Field(11, "pk_name", STR, "ref_name"),
    *_flags(12),
    Field(15, _CAT, STR, "catalog"),
))
SQL_UNIQUE = _constraint("UNIQUE", "SQLUniqueConstraint", (
    Field(1, _CAT, STR, "catalog"), *_names(2), _key_seq(5),
    Field(6, "uk_name", STR, "name", required=True), *_flags(7),
))
SQL_NOT_NULL = _constraint("NOT_NULL", "SQLNotNullConstraint", (
    Field(1, _CAT, STR, "catalog"), *_names(2), Field(5, "nn_name", STR, "name", required=True), *_flags(6),
))
SQL_DEFAULT = _constraint("DEFAULT", "SQLDefaultConstraint", (
    Field(1, _CAT, STR, "catalog"), *_names(2), Field(5, "default_value", STR, "value"),
    Field(6, "dc_name", STR, "name", required=True), *_flags(7),
))
SQL_CHECK = _constraint("CHECK", "SQLCheckConstraint", (
    Field(1, _CAT, STR, "catalog"), *_names(2), Field(5, "check_expression", STR, "value"),
    Field(6, "dc_name", STR, "name", required=True), *_flags(7),
))
CONSTRAINTS = {c.fixed["kind"]: c for c in (
    SQL_PRIMARY_KEY, SQL_FOREIGN_KEY, SQL_UNIQUE, SQL_NOT_NULL, SQL_DEFAULT, SQL_CHECK
)}
"""Constraint kind -> its struct."""


# --- column statistics: ColumnStatisticsData is a union of one struct a kind ------------------------
# Bounds are text in ``ColumnStatistic`` (every Hive type fits); the structs below carry them.


class Unscaled(NamedTuple):
    """Hive's ``Decimal``: the unscaled value's two's-complement big-endian bytes and its scale."""

    unscaled: bytes
    scale: int


class Count(NamedTuple):
    """Hive's ``Date`` (days) or ``Timestamp`` (seconds) since the epoch."""

    since: int


def decimal_text(d: Unscaled) -> str:
    return str(Decimal(int.from_bytes(d.unscaled, "big", signed=True)).scaleb(-d.scale))


def decimal_value(text: str) -> Unscaled:
    """As Hive 4 writes it: a positive exponent is a negative scale."""
    try:
        sign, digits, exponent = Decimal(text).as_tuple()
    except InvalidOperation as exc:
        raise ValueError(f"invalid decimal statistic {text!r}") from exc
    if not isinstance(exponent, int):
        raise ValueError(f"decimal statistic {text!r} is not finite")
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    return Unscaled(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True), -exponent)


def decimal_value_hive23(text: str) -> Unscaled:
    """Hive 2.3's Decimal has a non-negative scale: a positive exponent is folded into the digits."""
    d = decimal_value(text)
    if d.scale >= 0:
        return d
    unscaled = int.from_bytes(d.unscaled, "big", signed=True) * 10**-d.scale
    return Unscaled(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True), 0)


_EPOCH = dt.date(1970, 1, 1)


def count_text(c: Count) -> str:
    return str(c.since)


def count_value(text: str) -> Count:
    return Count(int(text))


def days_value(text: str) -> Count:
    """Days since the epoch, or an ISO date (what Spark's statistics carry)."""
    try:
        return Count(int(text))
    except ValueError:
        return Count((dt.date.fromisoformat(text.strip()) - _EPOCH).days)


def _text(v: Any) -> str | None:
    return None if v is None else str(v)  # a float's str is its repr


DECIMAL = HiveObject("Decimal", Unscaled, (
    Field(1, "unscaled", BIN, "unscaled", default=b""), Field(3, "scale", I16, "scale", default=0),
))
DATE = HiveObject("Date", Count, (Field(1, "daysSinceEpoch", I64, "since", default=0),))
TIMESTAMP = HiveObject("Timestamp", Count, (Field(1, "secondsSinceEpoch", I64, "since", default=0),))


def _bounds(wire: TType | None = None, of: HiveObject[Any] | None = None, **conv: Any) -> tuple[Field, Field]:
    """``lowValue`` and ``highValue``: a scalar (``wire``) or a value struct (``of``), text in ours."""
    return (Field(1, "lowValue", wire, "low_value", of=of, **conv),
            Field(2, "highValue", wire, "high_value", of=of, **conv))


def _counts(*names: str, first: int) -> tuple[Field, ...]:
    """Counters; Hive 2.3's server needs them set (0)."""
    ours = {"numNulls": "num_nulls", "numDVs": "num_distinct", "numTrues": "num_trues",
            "numFalses": "num_falses", "maxColLen": "max_length"}
    return tuple(Field(first + i, n, I64, ours[n], send_none_as=0) for i, n in enumerate(names))


def _bits(fid: int) -> Field:
    return Field(fid, "bitVectors", BIN, "bit_vectors")


_AVG_LENGTH = Field(2, "avgColLen", DBL, "avg_length", send_none_as=0.0, thrift_write=_or(0.0))  # -0.0 too


def _stats(kind: str, name: str, *fields: Field) -> HiveObject[dict[str, Any]]:
    return HiveObject(name, dict, fields, fixed={"kind": kind})


def _ranged(kind: str, name: str, *bounds: Field) -> HiveObject[dict[str, Any]]:
    return _stats(kind, name, *bounds, *_counts("numNulls", "numDVs", first=3), _bits(5))


COLUMN_STATISTICS_DATA = HiveObject("ColumnStatisticsData", dict, (
    Field(1, "booleanStats", of=_stats("BOOLEAN", "BooleanColumnStatsData",
                                       *_counts("numTrues", "numFalses", "numNulls", first=1), _bits(4))),
    Field(2, "longStats", of=_ranged("LONG", "LongColumnStatsData", *_bounds(I64, read=_text, write=int))),
    Field(3, "doubleStats", of=_ranged("DOUBLE", "DoubleColumnStatsData",
                                       *_bounds(DBL, read=_text, write=float))),
    Field(4, "stringStats", of=_stats("STRING", "StringColumnStatsData", *_counts("maxColLen", first=1),
                                      _AVG_LENGTH, *_counts("numNulls", "numDVs", first=3), _bits(5))),
    Field(5, "binaryStats", of=_stats("BINARY", "BinaryColumnStatsData", *_counts("maxColLen", first=1),
                                      _AVG_LENGTH, *_counts("numNulls", first=3), _bits(4))),
    Field(6, "decimalStats", of=_ranged("DECIMAL", "DecimalColumnStatsData", *_bounds(
        of=DECIMAL, read=decimal_text, write=decimal_value, thrift_write=decimal_value_hive23))),
    Field(7, "dateStats", of=_ranged("DATE", "DateColumnStatsData", *_bounds(
        of=DATE, read=count_text, write=days_value))),
    Field(8, "timestampStats", of=_ranged("TIMESTAMP", "TimestampColumnStatsData", *_bounds(
        of=TIMESTAMP, read=count_text, write=count_value))),
))
"""The union (its fields are the members); a member's ``fixed["kind"]`` is the ``ColumnStatistic.kind``."""

COLUMN_STATISTICS_OBJ = HiveObject("ColumnStatisticsObj", ev.ColumnStatistic, (
    Field(1, "colName", STR, "column", required=True),
    Field(2, "colType", STR, "type", read=_or("")),
    Field(3, "statsData", of=COLUMN_STATISTICS_DATA, flat=True, required=True),
))
COLUMN_STATISTICS_DESC = HiveObject("ColumnStatisticsDesc", dict, (  # attributes keep Thrift's names
    *(Field(fid, name, wire, name) for fid, name, wire in (
        (1, "isTblLevel", BOOL), (2, "dbName", STR), (3, "tableName", STR), (4, "partName", STR),
        (5, "lastAnalyzed", I64), (6, "catName", STR))),
))
COLUMN_STATISTICS = HiveObject("ColumnStatistics", dict, (
    Field(1, "statsDesc", ours="statsDesc", of=COLUMN_STATISTICS_DESC),
    Field(2, "statsObj", ours="statsObj", of=COLUMN_STATISTICS_OBJ, many=True),
    Field(4, "engine", STR, "engine"),
))
