"""Pure builders of the metastore objects Hive would create for the warehouse's Parquet tables.

Hive fills a table's storage descriptor, parameters and partition locations in a fixed way; the
warehouse builds its snapshots here (no I/O) so that the events it writes carry what a real
metastore's events carry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from streamer.events.model import (
    Column,
    DatabaseSnapshot,
    FunctionSnapshot,
    PartitionSnapshot,
    ResourceUri,
    SerDe,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.hive import files as hive_files
from streamer.warehouse.errors import WarehouseError

CATALOG = "hive"
OWNER = "hive"
OWNER_TYPE_USER = 1

PARQUET_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
VIEW_INPUT_FORMAT = "org.apache.hadoop.mapred.SequenceFileInputFormat"
VIEW_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat"

MANAGED = "MANAGED_TABLE"
EXTERNAL = "EXTERNAL_TABLE"
VIEW = "VIRTUAL_VIEW"

# Hive column types the warehouse can store in Parquet files.
SUPPORTED_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "boolean", "string")


def partition_name(keys: Sequence[Column], values: Sequence[str]) -> str:
    """Hive's partition name ``k=v/k2=v2`` (also the partition's directory below the table)."""
    if len(keys) != len(values):
        raise WarehouseError(f"partition needs {len(keys)} values ({_names(keys)}), got {list(values)}")
    return hive_files.partition_name(_names(keys), list(values))


def partition_values(keys: Sequence[Column], spec: Mapping[str, object]) -> list[str]:
    """Values of a partition spec ``{key: value}`` in the order of the table's partition keys."""
    missing = [k.name for k in keys if k.name not in spec]
    extra = sorted(set(spec) - {k.name for k in keys})
    if missing or extra:
        raise WarehouseError(
            f"partition spec {dict(spec)} does not match partition keys {_names(keys)}"
            f" (missing {missing}, unknown {extra})"
        )
    return [str(spec[k.name]) for k in keys]


def check_columns(columns: Sequence[Column], partition_keys: Sequence[Column] = ()) -> None:
    """Refuse empty, duplicate or unsupported columns before anything is written."""
    if not columns:
        raise WarehouseError("a table needs at least one column")
    names = [c.name.lower() for c in [*columns, *partition_keys]]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise WarehouseError(f"duplicate column names: {dupes}")
    for col in [*columns, *partition_keys]:
        if col.type.lower() not in SUPPORTED_TYPES:
            raise WarehouseError(
                f"column {col.name}: type {col.type!r} not supported; use one of {SUPPORTED_TYPES}"
            )


def database(
    name: str,
    location: str,
    now: int,
    params: Mapping[str, str] | None = None,
    description: str | None = None,
) -> DatabaseSnapshot:
    return DatabaseSnapshot(
        name=name,
        description=description,
        location=location,
        parameters=dict(params or {}),
        owner_name=OWNER,
        owner_type=OWNER_TYPE_USER,
        catalog=CATALOG,
        create_time=now,
    )


def parquet_sd(location: str | None, columns: Sequence[Column]) -> StorageDescriptor:
    return StorageDescriptor(
        location=location,
        columns=list(columns),
        input_format=PARQUET_INPUT_FORMAT,
        output_format=PARQUET_OUTPUT_FORMAT,
        serde=SerDe(serialization_lib=PARQUET_SERDE, parameters={"serialization.format": "1"}),
    )


def table(
    db: str,
    name: str,
    location: str,
    columns: Sequence[Column],
    partition_keys: Sequence[Column],
    now: int,
    *,
    external: bool = False,
    params: Mapping[str, str] | None = None,
) -> TableSnapshot:
    """A Parquet table as Hive's ``CREATE [EXTERNAL] TABLE ... STORED AS PARQUET`` creates it."""
    parameters = {"bucketing_version": "2", "transient_lastDdlTime": str(now)}
    if external:
        parameters["EXTERNAL"] = "TRUE"
    parameters.update(params or {})
    return TableSnapshot(
        name=name,
        db=db,
        table_type=EXTERNAL if external else MANAGED,
        sd=parquet_sd(location, columns),
        partition_keys=list(partition_keys),
        parameters=parameters,
        owner=OWNER,
        owner_type=OWNER_TYPE_USER,
        create_time=now,
        last_access_time=0,
        retention=0,
        catalog=CATALOG,
    )


def view(db: str, name: str, columns: Sequence[Column], text: str, now: int) -> TableSnapshot:
    """A virtual view: no location, the query text kept original and expanded."""
    return TableSnapshot(
        name=name,
        db=db,
        table_type=VIEW,
        sd=StorageDescriptor(
            location=None,
            columns=list(columns),
            input_format=VIEW_INPUT_FORMAT,
            output_format=VIEW_OUTPUT_FORMAT,
            serde=SerDe(),
        ),
        parameters={"transient_lastDdlTime": str(now)},
        owner=OWNER,
        owner_type=OWNER_TYPE_USER,
        create_time=now,
        last_access_time=0,
        retention=0,
        view_original_text=text,
        view_expanded_text=text,
        catalog=CATALOG,
    )


def partition(tbl: TableSnapshot, values: Sequence[str], location: str, now: int) -> PartitionSnapshot:
    """A partition inheriting the table's storage descriptor with its own location."""
    return PartitionSnapshot(
        values=list(values),
        db=tbl.db,
        table=tbl.name,
        sd=dataclasses.replace(tbl.sd, location=location),
        parameters={"transient_lastDdlTime": str(now)},
        create_time=now,
        last_access_time=0,
        catalog=CATALOG,
    )


def altered_table(tbl: TableSnapshot, now: int, **changes: object) -> TableSnapshot:
    """``tbl`` after an ALTER: Hive stamps who and when."""
    params = {
        **tbl.parameters,
        "last_modified_by": OWNER,
        "last_modified_time": str(now),
        "transient_lastDdlTime": str(now),
    }
    new_params = changes.pop("parameters", None)
    if isinstance(new_params, Mapping):
        params.update(new_params)
    return dataclasses.replace(tbl, parameters=params, **changes)  # type: ignore[arg-type]


def function(
    db: str, name: str, class_name: str, resources: Sequence[ResourceUri], now: int
) -> FunctionSnapshot:
    return FunctionSnapshot(
        name=name,
        db=db,
        class_name=class_name,
        owner_name=OWNER,
        owner_type=OWNER_TYPE_USER,
        create_time=now,
        resource_uris=list(resources),
        catalog=CATALOG,
    )


def _names(keys: Sequence[Column]) -> list[str]:
    return [k.name for k in keys]
