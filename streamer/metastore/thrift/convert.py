"""Conversion between streamer's snapshots and the Hive 2.3 metastore's Thrift objects.

Pure code, no I/O, so every field's mapping can be checked without a server. Fields Hive 2.3's API
lacks are not sent and come back as ``None``; column statistics keep bounds as text, as
``streamer.hive.objects`` writes them. See docs/design/metastore.md.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from hmsclient.genthrift.hive_metastore import ttypes as tt

from streamer.errors import StreamerError
from streamer.events import model as ev

# Hive's FileUtils.escapePathName: characters written as %XX in partition names and paths.
_EPOCH = dt.date(1970, 1, 1)


class UnsupportedStatisticError(StreamerError, ValueError):
    """A statistic kind that Hive 2.3's Thrift API cannot carry."""


# --- names ----------------------------------------------------------------------------------


# --- small pieces ---------------------------------------------------------------------------


def _dict(d: dict[str, str] | None) -> dict[str, str]:
    return dict(d) if d else {}


def to_field(col: ev.Column) -> tt.FieldSchema:
    return tt.FieldSchema(name=col.name, type=col.type, comment=col.comment)


def from_field(fs: tt.FieldSchema) -> ev.Column:
    return ev.Column(name=fs.name, type=fs.type, comment=fs.comment)


def to_sd(sd: ev.StorageDescriptor) -> tt.StorageDescriptor:
    return tt.StorageDescriptor(
        cols=[to_field(c) for c in sd.columns],
        location=sd.location,
        inputFormat=sd.input_format,
        outputFormat=sd.output_format,
        compressed=sd.compressed,
        numBuckets=sd.num_buckets,
        serdeInfo=tt.SerDeInfo(
            name=sd.serde.name,
            serializationLib=sd.serde.serialization_lib,
            parameters=_dict(sd.serde.parameters),
        ),
        bucketCols=list(sd.bucket_columns),
        sortCols=[tt.Order(col=s.column, order=s.order) for s in sd.sort_columns],
        parameters=_dict(sd.parameters),
        skewedInfo=tt.SkewedInfo(skewedColNames=[], skewedColValues=[], skewedColValueLocationMaps={}),
        storedAsSubDirectories=sd.stored_as_subdirectories,
    )


def from_sd(sd: tt.StorageDescriptor | None) -> ev.StorageDescriptor:
    if sd is None:
        return ev.StorageDescriptor()
    serde = sd.serdeInfo or tt.SerDeInfo()
    return ev.StorageDescriptor(
        location=sd.location,
        columns=[from_field(c) for c in sd.cols or []],
        input_format=sd.inputFormat,
        output_format=sd.outputFormat,
        compressed=bool(sd.compressed),
        num_buckets=sd.numBuckets if sd.numBuckets is not None else -1,
        serde=ev.SerDe(
            name=serde.name, serialization_lib=serde.serializationLib, parameters=_dict(serde.parameters)
        ),
        bucket_columns=list(sd.bucketCols or []),
        sort_columns=[ev.SortColumn(column=o.col, order=o.order) for o in sd.sortCols or []],
        parameters=_dict(sd.parameters),
        stored_as_subdirectories=bool(sd.storedAsSubDirectories),
    )


# --- databases, tables, partitions ----------------------------------------------------------


def to_database(db: ev.DatabaseSnapshot) -> tt.Database:
    return tt.Database(
        name=db.name,
        description=db.description,
        locationUri=db.location,
        parameters=_dict(db.parameters),
        ownerName=db.owner_name,
        ownerType=db.owner_type,
    )


def from_database(db: tt.Database) -> ev.DatabaseSnapshot:
    return ev.DatabaseSnapshot(
        name=db.name,
        description=db.description,
        location=db.locationUri,
        parameters=_dict(db.parameters),
        owner_name=db.ownerName,
        owner_type=db.ownerType,
    )


def to_table(t: ev.TableSnapshot) -> tt.Table:
    return tt.Table(
        tableName=t.name,
        dbName=t.db,
        owner=t.owner,
        createTime=t.create_time or 0,
        lastAccessTime=t.last_access_time or 0,
        retention=t.retention or 0,
        sd=to_sd(t.sd),
        partitionKeys=[to_field(c) for c in t.partition_keys],
        parameters=_dict(t.parameters),
        viewOriginalText=t.view_original_text,
        viewExpandedText=t.view_expanded_text,
        tableType=t.table_type,
        temporary=t.temporary,
        rewriteEnabled=t.rewrite_enabled,
    )


def from_table(t: tt.Table) -> ev.TableSnapshot:
    return ev.TableSnapshot(
        name=t.tableName,
        db=t.dbName,
        table_type=t.tableType or "MANAGED_TABLE",
        sd=from_sd(t.sd),
        partition_keys=[from_field(c) for c in t.partitionKeys or []],
        parameters=_dict(t.parameters),
        owner=t.owner,
        owner_type=None,  # Hive 2.3's Table has no owner type
        create_time=t.createTime,
        last_access_time=t.lastAccessTime,
        retention=t.retention,
        view_original_text=t.viewOriginalText,
        view_expanded_text=t.viewExpandedText,
        temporary=bool(t.temporary),
        rewrite_enabled=bool(t.rewriteEnabled),
    )


def to_partition(p: ev.PartitionSnapshot, db: str, table: str) -> tt.Partition:
    return tt.Partition(
        values=list(p.values),
        dbName=db,
        tableName=table,
        createTime=p.create_time or 0,
        lastAccessTime=p.last_access_time or 0,
        sd=to_sd(p.sd),
        parameters=_dict(p.parameters),
    )


def from_partition(p: tt.Partition) -> ev.PartitionSnapshot:
    return ev.PartitionSnapshot(
        values=list(p.values or []),
        db=p.dbName,
        table=p.tableName,
        sd=from_sd(p.sd),
        parameters=_dict(p.parameters),
        create_time=p.createTime,
        last_access_time=p.lastAccessTime,
    )


# --- functions ------------------------------------------------------------------------------


def to_function(f: ev.FunctionSnapshot) -> tt.Function:
    resources = []
    for r in f.resource_uris:
        kind = tt.ResourceType._NAMES_TO_VALUES.get(r.resource_type.upper())
        if kind is None:
            raise ValueError(f"unknown resource type {r.resource_type!r} (JAR, FILE or ARCHIVE)")
        resources.append(tt.ResourceUri(resourceType=kind, uri=r.uri))
    return tt.Function(
        functionName=f.name,
        dbName=f.db,
        className=f.class_name,
        ownerName=f.owner_name,
        ownerType=f.owner_type if f.owner_type is not None else tt.PrincipalType.USER,
        createTime=f.create_time or 0,
        functionType=f.function_type,
        resourceUris=resources,
    )


def from_function(f: tt.Function) -> ev.FunctionSnapshot:
    return ev.FunctionSnapshot(
        name=f.functionName,
        db=f.dbName,
        class_name=f.className,
        owner_name=f.ownerName,
        owner_type=f.ownerType,
        create_time=f.createTime,
        function_type=f.functionType if f.functionType is not None else 1,
        resource_uris=[
            ev.ResourceUri(resource_type=tt.ResourceType._VALUES_TO_NAMES[r.resourceType], uri=r.uri)
            for r in f.resourceUris or []
        ],
    )


# --- constraints ----------------------------------------------------------------------------


def to_primary_key(c: ev.Constraint) -> tt.SQLPrimaryKey:
    return tt.SQLPrimaryKey(
        table_db=c.db,
        table_name=c.table,
        column_name=c.column,
        key_seq=c.position,
        pk_name=c.name,
        enable_cstr=c.enabled,
        validate_cstr=c.validated,
        rely_cstr=c.rely,
    )


def from_primary_key(k: tt.SQLPrimaryKey) -> ev.Constraint:
    return ev.Constraint(
        kind="PRIMARY_KEY",
        name=k.pk_name,
        db=k.table_db,
        table=k.table_name,
        column=k.column_name,
        position=k.key_seq,
        enabled=bool(k.enable_cstr),
        validated=bool(k.validate_cstr),
        rely=bool(k.rely_cstr),
    )


def to_foreign_key(c: ev.Constraint) -> tt.SQLForeignKey:
    if not (c.ref_db and c.ref_table and c.ref_column):
        raise ValueError(f"foreign key {c.name} on {c.db}.{c.table} names no referenced column")
    return tt.SQLForeignKey(
        pktable_db=c.ref_db,
        pktable_name=c.ref_table,
        pkcolumn_name=c.ref_column,
        fktable_db=c.db,
        fktable_name=c.table,
        fkcolumn_name=c.column,
        key_seq=c.position,
        update_rule=c.update_rule if c.update_rule is not None else 0,
        delete_rule=c.delete_rule if c.delete_rule is not None else 0,
        fk_name=c.name,
        pk_name=c.ref_name,
        enable_cstr=c.enabled,
        validate_cstr=c.validated,
        rely_cstr=c.rely,
    )


def from_foreign_key(k: tt.SQLForeignKey) -> ev.Constraint:
    return ev.Constraint(
        kind="FOREIGN_KEY",
        name=k.fk_name,
        db=k.fktable_db,
        table=k.fktable_name,
        column=k.fkcolumn_name,
        position=k.key_seq,
        ref_db=k.pktable_db,
        ref_table=k.pktable_name,
        ref_column=k.pkcolumn_name,
        ref_name=k.pk_name,
        update_rule=k.update_rule,
        delete_rule=k.delete_rule,
        enabled=bool(k.enable_cstr),
        validated=bool(k.validate_cstr),
        rely=bool(k.rely_cstr),
    )


# --- column statistics ----------------------------------------------------------------------


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)


def _float(text: str | None) -> float | None:
    return None if text is None else float(text)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def to_thrift_decimal(text: str | None) -> tt.Decimal | None:
    if text is None:
        return None
    sign, digits, exponent = Decimal(text).as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"decimal statistic {text!r} is not finite")
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -exponent
    if scale < 0:  # Hive's Decimal has a non-negative scale
        unscaled, scale = unscaled * 10**-scale, 0
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return tt.Decimal(unscaled=unscaled.to_bytes(length, "big", signed=True), scale=scale)


def from_thrift_decimal(d: tt.Decimal | None) -> str | None:
    if d is None:
        return None
    unscaled = int.from_bytes(d.unscaled, "big", signed=True)
    return str(Decimal(unscaled).scaleb(-d.scale))


def to_thrift_date(text: str | None) -> tt.Date | None:
    if text is None:
        return None
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return tt.Date(daysSinceEpoch=int(stripped))
    return tt.Date(daysSinceEpoch=(dt.date.fromisoformat(stripped) - _EPOCH).days)


def from_thrift_date(d: tt.Date | None) -> str | None:
    return None if d is None else str(d.daysSinceEpoch)


# One field of a Thrift statistics struct: its name, ours, and the conversions to and from Thrift.
_StatField = tuple[str, str, Callable[[Any], Any], Callable[[Any], Any]]


def _same(value: Any) -> Any:
    return value


def _or_zero(value: Any) -> Any:
    return value or 0


def _or_zero_float(value: Any) -> Any:
    return value or 0.0


def _bounds(to: Callable[[Any], Any], back: Callable[[Any], Any]) -> tuple[_StatField, ...]:
    return ("lowValue", "low_value", to, back), ("highValue", "high_value", to, back)


_NULLS: _StatField = ("numNulls", "num_nulls", _or_zero, _same)
_DISTINCT: _StatField = ("numDVs", "num_distinct", _or_zero, _same)
_BITS: _StatField = ("bitVectors", "bit_vectors", _same, _same)
_LENGTHS: tuple[_StatField, ...] = (
    ("maxColLen", "max_length", _or_zero, _same), ("avgColLen", "avg_length", _or_zero_float, _same)
)
_TRUES_FALSES: tuple[_StatField, ...] = (
    ("numTrues", "num_trues", _or_zero, _same), ("numFalses", "num_falses", _or_zero, _same)
)

# kind -> the ColumnStatisticsData union member, its Thrift struct and fields (checked in this order)
_STAT_KINDS: dict[str, tuple[str, type, tuple[_StatField, ...]]] = {
    "BOOLEAN": ("booleanStats", tt.BooleanColumnStatsData, (*_TRUES_FALSES, _NULLS, _BITS)),
    "LONG": ("longStats", tt.LongColumnStatsData, (*_bounds(_int, _text), _NULLS, _DISTINCT, _BITS)),
    "DOUBLE": ("doubleStats", tt.DoubleColumnStatsData, (*_bounds(_float, _text), _NULLS, _DISTINCT, _BITS)),
    "STRING": ("stringStats", tt.StringColumnStatsData, (*_LENGTHS, _NULLS, _DISTINCT, _BITS)),
    "BINARY": ("binaryStats", tt.BinaryColumnStatsData, (*_LENGTHS, _NULLS, _BITS)),
    "DECIMAL": (
        "decimalStats",
        tt.DecimalColumnStatsData,
        (*_bounds(to_thrift_decimal, from_thrift_decimal), _NULLS, _DISTINCT, _BITS),
    ),
    "DATE": (
        "dateStats",
        tt.DateColumnStatsData,
        (*_bounds(to_thrift_date, from_thrift_date), _NULLS, _DISTINCT, _BITS),
    ),
}


def to_stats_data(s: ev.ColumnStatistic) -> tt.ColumnStatisticsData:
    """One column's statistics in the Thrift union member matching ``s.kind``."""
    kind = _STAT_KINDS.get(s.kind.upper())
    if kind is None:
        raise UnsupportedStatisticError(
            f"column {s.column}: statistics of kind {s.kind} are not supported by this metastore (Hive 2.3)"
        )
    member, struct, fields = kind
    data = struct(**{theirs: to(getattr(s, ours)) for theirs, ours, to, _ in fields})
    return tt.ColumnStatisticsData(**{member: data})


def to_stats_obj(s: ev.ColumnStatistic) -> tt.ColumnStatisticsObj:
    return tt.ColumnStatisticsObj(colName=s.column, colType=s.type, statsData=to_stats_data(s))


def from_stats_obj(o: tt.ColumnStatisticsObj) -> ev.ColumnStatistic:
    for kind, (member, _, fields) in _STAT_KINDS.items():
        data = getattr(o.statsData, member)
        if data is not None:
            values = {ours: back(getattr(data, theirs)) for theirs, ours, _, back in fields}
            return ev.ColumnStatistic(column=o.colName, type=o.colType, kind=kind, **values)
    raise UnsupportedStatisticError(f"column {o.colName}: statistics of an unknown kind")


def to_column_statistics(
    db: str, table: str, part_name: str | None, stats: Iterable[ev.ColumnStatistic]
) -> tt.ColumnStatistics:
    desc = tt.ColumnStatisticsDesc(
        isTblLevel=part_name is None, dbName=db, tableName=table, partName=part_name
    )
    return tt.ColumnStatistics(statsDesc=desc, statsObj=[to_stats_obj(s) for s in stats])
