"""One declarative table of Hive's metastore objects <-> streamer's snapshots, for every wire form.

Each ``HiveObject`` lists its Thrift fields once: the field id and TJSON type (``hive_metastore.thrift``),
the Thrift name (the attribute of a generated class and the key of a TJSON struct alike), the
snapshot attribute it fills, and how a missing value reads or a ``None`` is sent. Both wire forms
are driven from it: TJSON text in Hive's messages (``streamer.hive.objects``) and the Thrift
objects of the metastore API (``streamer.metastore.thrift.convert``), so a field is added, renamed
or defaulted in one place. Pure: no I/O, no generated classes (``load``/``dump`` take the accessors).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from streamer.events import model as ev
from streamer.hive.tjson import BOOL, I32, I64, STR, ListOf, MapOf, Struct, TJSONError, TType

T = TypeVar("T")

RESOURCE_TYPES = {1: "JAR", 2: "FILE", 3: "ARCHIVE"}  # Hive's ResourceType


@dataclass(frozen=True)
class Field:
    """One Thrift field and the snapshot attribute it carries.

    ``default``: what a missing (``None``) value reads as. ``required``: a TJSON text without it is
    refused (the metastore's own answers are trusted). ``send_none_as``: what the Thrift client sends
    for ``None`` (a value Hive 2.3's server needs set). ``unset_false``: TJSON leaves ``False`` unset,
    as Hive does for this optional flag. ``read``/``write``: a value's conversion (wire -> snapshot,
    snapshot -> wire). ``of``: a nested object (``many``: a list of them).
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
    of: HiveObject[Any] | None = None
    many: bool = False

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
        if f.ours is None:
            continue
        v = None if value is None else get(value, f.theirs)
        if v is None and f.required and strict:
            raise TJSONError(f"{where}: required field {f.theirs!r} is missing")
        out[f.ours] = _load_value(f, v, get, strict, f"{where}.{f.theirs}")
    return obj.snapshot(**out)


def _load_value(f: Field, v: Any, get: Getter, strict: bool, path: str) -> Any:
    if f.of is not None:
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
    ``make`` builds of each struct's dict (Thrift objects; ``send_none_as`` then applies)."""
    thrift = make is not None
    out: dict[str, Any] = {}
    for f in obj.fields:
        if f.ours is None:
            continue
        v = getattr(snapshot, f.ours)
        if f.of is not None:
            v = [dump(f.of, x, make) for x in v] if f.many else dump(f.of, v, make)
        elif isinstance(f.wire, ListOf):
            v = list(v)
        elif isinstance(f.wire, MapOf):
            v = dict(v) if v else {}
        elif v is not None and f.write is not None:
            v = f.write(v)
        if thrift and v is None:
            v = f.send_none_as
        if not thrift and f.unset_false and v is False:
            v = None
        out[f.theirs] = v
    return make(obj, out) if make is not None else out


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
