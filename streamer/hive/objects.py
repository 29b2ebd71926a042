"""Metastore Thrift objects (as TJSON text) <-> the snapshots of :mod:`streamer.events.model`.

Readers accept what any Hive version writes (missing optional fields become defaults); writers
produce what a Hive 4 metastore writes for the same object, so both directions round-trip.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from streamer.events import model as ev
from streamer.hive import tjson
from streamer.hive.tjson import TJSONError

_RESOURCE_TYPES = {1: "JAR", 2: "FILE", 3: "ARCHIVE"}


def _required(d: dict[str, Any], key: str, what: str) -> Any:
    if d.get(key) is None:
        raise TJSONError(f"{what}: required field {key!r} is missing")
    return d[key]


# --- storage, tables, partitions --------------------------------------------------------------


def _columns(items: list[dict[str, Any]] | None, what: str) -> list[ev.Column]:
    return [ev.Column(_required(c, "name", what), c.get("type") or "", c.get("comment")) for c in items or []]


def _sd_from(d: dict[str, Any] | None) -> ev.StorageDescriptor:
    if d is None:
        return ev.StorageDescriptor()
    serde = d.get("serdeInfo") or {}
    return ev.StorageDescriptor(
        location=d.get("location"),
        columns=_columns(d.get("cols"), "StorageDescriptor.cols"),
        input_format=d.get("inputFormat"),
        output_format=d.get("outputFormat"),
        compressed=bool(d.get("compressed", False)),
        num_buckets=d.get("numBuckets", -1),
        serde=ev.SerDe(serde.get("name"), serde.get("serializationLib"), dict(serde.get("parameters") or {})),
        bucket_columns=list(d.get("bucketCols") or []),
        sort_columns=[ev.SortColumn(o.get("col") or "", o.get("order", 1)) for o in d.get("sortCols") or []],
        parameters=dict(d.get("parameters") or {}),
        stored_as_subdirectories=bool(d.get("storedAsSubDirectories", False)),
    )


def _sd_to(sd: ev.StorageDescriptor) -> dict[str, Any]:
    return {
        "cols": [_column_to(c) for c in sd.columns],
        "location": sd.location,
        "inputFormat": sd.input_format,
        "outputFormat": sd.output_format,
        "compressed": sd.compressed,
        "numBuckets": sd.num_buckets,
        "serdeInfo": {
            "name": sd.serde.name,
            "serializationLib": sd.serde.serialization_lib,
            "parameters": sd.serde.parameters,
        },
        "bucketCols": sd.bucket_columns,
        "sortCols": [{"col": s.column, "order": s.order} for s in sd.sort_columns],
        "parameters": sd.parameters,
        "storedAsSubDirectories": sd.stored_as_subdirectories,
    }


def _column_to(c: ev.Column) -> dict[str, Any]:
    return {"name": c.name, "type": c.type, "comment": c.comment}


def table_from_tjson(text: str) -> ev.TableSnapshot:
    d = tjson.loads(tjson.TABLE, text)
    return ev.TableSnapshot(
        name=_required(d, "tableName", "Table"),
        db=_required(d, "dbName", "Table"),
        table_type=d.get("tableType") or "MANAGED_TABLE",
        sd=_sd_from(d.get("sd")),
        partition_keys=_columns(d.get("partitionKeys"), "Table.partitionKeys"),
        parameters=dict(d.get("parameters") or {}),
        owner=d.get("owner"),
        owner_type=d.get("ownerType"),
        create_time=d.get("createTime"),
        last_access_time=d.get("lastAccessTime"),
        retention=d.get("retention"),
        view_original_text=d.get("viewOriginalText"),
        view_expanded_text=d.get("viewExpandedText"),
        temporary=bool(d.get("temporary", False)),
        rewrite_enabled=bool(d.get("rewriteEnabled", False)),
        catalog=d.get("catName"),
        write_id=d.get("writeId"),
    )


def table_to_tjson(t: ev.TableSnapshot) -> str:
    return tjson.dumps(
        tjson.TABLE,
        {
            "tableName": t.name,
            "dbName": t.db,
            "owner": t.owner,
            "createTime": t.create_time,
            "lastAccessTime": t.last_access_time,
            "retention": t.retention,
            "sd": _sd_to(t.sd),
            "partitionKeys": [_column_to(c) for c in t.partition_keys],
            "parameters": t.parameters,
            "viewOriginalText": t.view_original_text,
            "viewExpandedText": t.view_expanded_text,
            "tableType": t.table_type,
            "temporary": t.temporary or None,  # optional in Thrift: Hive leaves it unset
            "rewriteEnabled": t.rewrite_enabled,
            "catName": t.catalog,
            "ownerType": t.owner_type,
            "writeId": t.write_id,
        },
    )


def partition_from_tjson(text: str) -> ev.PartitionSnapshot:
    d = tjson.loads(tjson.PARTITION, text)
    return ev.PartitionSnapshot(
        values=list(_required(d, "values", "Partition")),
        db=d.get("dbName"),
        table=d.get("tableName"),
        sd=_sd_from(d.get("sd")),
        parameters=dict(d.get("parameters") or {}),
        create_time=d.get("createTime"),
        last_access_time=d.get("lastAccessTime"),
        catalog=d.get("catName"),
        write_id=d.get("writeId"),
    )


def partition_to_tjson(p: ev.PartitionSnapshot) -> str:
    return tjson.dumps(
        tjson.PARTITION,
        {
            "values": p.values,
            "dbName": p.db,
            "tableName": p.table,
            "createTime": p.create_time,
            "lastAccessTime": p.last_access_time,
            "sd": _sd_to(p.sd),
            "parameters": p.parameters,
            "catName": p.catalog,
            "writeId": p.write_id,
        },
    )


# --- databases, functions ---------------------------------------------------------------------


def database_from_tjson(text: str) -> ev.DatabaseSnapshot:
    d = tjson.loads(tjson.DATABASE, text)
    return ev.DatabaseSnapshot(
        name=_required(d, "name", "Database"),
        description=d.get("description"),
        location=d.get("locationUri"),
        managed_location=d.get("managedLocationUri"),
        parameters=dict(d.get("parameters") or {}),
        owner_name=d.get("ownerName"),
        owner_type=d.get("ownerType"),
        catalog=d.get("catalogName"),
        create_time=d.get("createTime"),
    )


def database_to_tjson(db: ev.DatabaseSnapshot) -> str:
    return tjson.dumps(
        tjson.DATABASE,
        {
            "name": db.name,
            "description": db.description,
            "locationUri": db.location,
            "parameters": db.parameters,
            "ownerName": db.owner_name,
            "ownerType": db.owner_type,
            "catalogName": db.catalog,
            "createTime": db.create_time,
            "managedLocationUri": db.managed_location,
        },
    )


def function_from_tjson(text: str) -> ev.FunctionSnapshot:
    d = tjson.loads(tjson.FUNCTION, text)
    uris = [
        ev.ResourceUri(
            _RESOURCE_TYPES.get(r.get("resourceType", 1), str(r.get("resourceType"))), r.get("uri") or ""
        )
        for r in d.get("resourceUris") or []
    ]
    return ev.FunctionSnapshot(
        name=_required(d, "functionName", "Function"),
        db=_required(d, "dbName", "Function"),
        class_name=_required(d, "className", "Function"),
        owner_name=d.get("ownerName"),
        owner_type=d.get("ownerType"),
        create_time=d.get("createTime"),
        function_type=d.get("functionType", 1),
        resource_uris=uris,
        catalog=d.get("catName"),
    )


def _resource_type_id(name: str) -> int:
    for number, known in _RESOURCE_TYPES.items():
        if known == name:
            return number
    if name.isdigit():
        return int(name)
    raise ValueError(f"unknown function resource type {name!r} (expected JAR, FILE or ARCHIVE)")


def function_to_tjson(f: ev.FunctionSnapshot) -> str:
    return tjson.dumps(
        tjson.FUNCTION,
        {
            "functionName": f.name,
            "dbName": f.db,
            "className": f.class_name,
            "ownerName": f.owner_name,
            "ownerType": f.owner_type,
            "createTime": f.create_time,
            "functionType": f.function_type,
            "resourceUris": [
                {"resourceType": _resource_type_id(r.resource_type), "uri": r.uri} for r in f.resource_uris
            ],
            "catName": f.catalog,
        },
    )


# --- constraints ------------------------------------------------------------------------------

# kind -> (message key, struct, name field)
CONSTRAINT_KINDS: dict[str, tuple[str, tjson.Struct, str]] = {
    "PRIMARY_KEY": ("primaryKeyListJson", tjson.SQL_PRIMARY_KEY, "pk_name"),
    "FOREIGN_KEY": ("foreignKeyListJson", tjson.SQL_FOREIGN_KEY, "fk_name"),
    "UNIQUE": ("uniqueConstraintListJson", tjson.SQL_UNIQUE, "uk_name"),
    "NOT_NULL": ("notNullConstraintListJson", tjson.SQL_NOT_NULL, "nn_name"),
    "DEFAULT": ("defaultConstraintListJson", tjson.SQL_DEFAULT, "dc_name"),
    "CHECK": ("checkConstraintListJson", tjson.SQL_CHECK, "dc_name"),
}


def constraint_from_tjson(kind: str, text: str) -> ev.Constraint:
    _, spec, name_key = CONSTRAINT_KINDS[kind]
    d = tjson.loads(spec, text)
    flags: dict[str, Any] = {
        "enabled": bool(d.get("enable_cstr", True)),
        "validated": bool(d.get("validate_cstr", False)),
        "rely": bool(d.get("rely_cstr", False)),
        "catalog": d.get("catName"),
    }
    if kind == "FOREIGN_KEY":
        return ev.Constraint(
            kind=kind,
            name=_required(d, "fk_name", spec.name),
            db=_required(d, "fktable_db", spec.name),
            table=_required(d, "fktable_name", spec.name),
            column=_required(d, "fkcolumn_name", spec.name),
            position=d.get("key_seq", 1),
            ref_db=d.get("pktable_db"),
            ref_table=d.get("pktable_name"),
            ref_column=d.get("pkcolumn_name"),
            ref_name=d.get("pk_name"),
            update_rule=d.get("update_rule"),
            delete_rule=d.get("delete_rule"),
            **flags,
        )
    return ev.Constraint(
        kind=kind,
        name=_required(d, name_key, spec.name),
        db=_required(d, "table_db", spec.name),
        table=_required(d, "table_name", spec.name),
        column=_required(d, "column_name", spec.name),
        position=d.get("key_seq", 1),
        value=d.get("default_value", d.get("check_expression")),
        **flags,
    )


def constraint_to_tjson(c: ev.Constraint) -> str:
    _, spec, name_key = CONSTRAINT_KINDS[c.kind]
    flags = {
        "enable_cstr": c.enabled,
        "validate_cstr": c.validated,
        "rely_cstr": c.rely,
        "catName": c.catalog,
    }
    if c.kind == "FOREIGN_KEY":
        value: dict[str, Any] = {
            "pktable_db": c.ref_db,
            "pktable_name": c.ref_table,
            "pkcolumn_name": c.ref_column,
            "fktable_db": c.db,
            "fktable_name": c.table,
            "fkcolumn_name": c.column,
            "key_seq": c.position,
            "update_rule": c.update_rule,
            "delete_rule": c.delete_rule,
            "fk_name": c.name,
            "pk_name": c.ref_name,
        }
    else:
        value = {"table_db": c.db, "table_name": c.table, "column_name": c.column, name_key: c.name}
        if c.kind in ("PRIMARY_KEY", "UNIQUE"):
            value["key_seq"] = c.position
        value["default_value" if c.kind == "DEFAULT" else "check_expression"] = c.value
    return tjson.dumps(spec, value | flags)


# --- column statistics ------------------------------------------------------------------------

_STATS_KINDS = {
    "BOOLEAN": "booleanStats",
    "LONG": "longStats",
    "DOUBLE": "doubleStats",
    "STRING": "stringStats",
    "BINARY": "binaryStats",
    "DECIMAL": "decimalStats",
    "DATE": "dateStats",
    "TIMESTAMP": "timestampStats",
}
_BOUND_KEYS = {"DATE": "daysSinceEpoch", "TIMESTAMP": "secondsSinceEpoch"}


def _bound_from(kind: str, v: Any) -> str | None:
    if v is None:
        return None
    if kind == "DECIMAL":
        unscaled = int.from_bytes(v["unscaled"], "big", signed=True) if v.get("unscaled") else 0
        return str(Decimal(unscaled).scaleb(-v.get("scale", 0)))
    if kind in _BOUND_KEYS:
        return str(v.get(_BOUND_KEYS[kind], 0))
    return repr(v) if kind == "DOUBLE" else str(v)


def _bound_to(kind: str, text: str | None) -> Any:
    if text is None:
        return None
    if kind == "DECIMAL":
        try:
            sign, digits, exponent = Decimal(text).as_tuple()
        except InvalidOperation as exc:
            raise ValueError(f"invalid decimal statistic {text!r}") from exc
        if not isinstance(exponent, int):
            raise ValueError(f"decimal statistic {text!r} is not finite")
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        size = unscaled.bit_length() // 8 + 1
        return {"unscaled": unscaled.to_bytes(size, "big", signed=True), "scale": -exponent}
    if kind in _BOUND_KEYS:
        return {_BOUND_KEYS[kind]: int(text)}
    return float(text) if kind == "DOUBLE" else int(text)


def column_stats_from_tjson(text: str) -> tuple[dict[str, Any], list[ev.ColumnStatistic]]:
    """The ColumnStatisticsDesc (as a dict) and one ``ColumnStatistic`` per column."""
    d = tjson.loads(tjson.COLUMN_STATISTICS, text)
    stats = []
    for obj in d.get("statsObj") or []:
        data = _required(obj, "statsData", "ColumnStatisticsObj")
        if len(data) != 1:
            raise TJSONError("ColumnStatisticsData: a union needs exactly one known member")
        ((member, s),) = data.items()
        kind = next(k for k, m in _STATS_KINDS.items() if m == member)
        stats.append(
            ev.ColumnStatistic(
                column=_required(obj, "colName", "ColumnStatisticsObj"),
                type=obj.get("colType") or "",
                kind=kind,
                num_nulls=s.get("numNulls"),
                num_distinct=s.get("numDVs"),
                low_value=_bound_from(kind, s.get("lowValue")),
                high_value=_bound_from(kind, s.get("highValue")),
                avg_length=s.get("avgColLen"),
                max_length=s.get("maxColLen"),
                num_trues=s.get("numTrues"),
                num_falses=s.get("numFalses"),
                bit_vectors=s.get("bitVectors"),
            )
        )
    return d.get("statsDesc") or {}, stats


def column_stats_to_tjson(desc: dict[str, Any], stats: list[ev.ColumnStatistic]) -> str:
    objs = []
    for s in stats:
        data = {
            "numNulls": s.num_nulls,
            "numDVs": s.num_distinct,
            "lowValue": _bound_to(s.kind, s.low_value),
            "highValue": _bound_to(s.kind, s.high_value),
            "avgColLen": s.avg_length,
            "maxColLen": s.max_length,
            "numTrues": s.num_trues,
            "numFalses": s.num_falses,
            "bitVectors": s.bit_vectors,
        }
        if s.kind not in _STATS_KINDS:
            raise ValueError(f"unknown column statistics kind {s.kind!r}")
        objs.append({"colName": s.column, "colType": s.type, "statsData": {_STATS_KINDS[s.kind]: data}})
    return tjson.dumps(tjson.COLUMN_STATISTICS, {"statsDesc": desc, "statsObj": objs})
