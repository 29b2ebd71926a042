"""Object snapshots the events carry: databases, tables, partitions, functions, files, constraints.

Frozen dataclasses mirroring Hive's metastore objects, so a target never has to ask the source
(which would show it a later state than the event's). Re-exported by ``streamer.events.model``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "AcidWrite", "Column", "ColumnStatistic", "Constraint", "DatabaseSnapshot", "FileRef",
    "FunctionSnapshot", "PartitionSnapshot", "PartitionStatistics", "ResourceUri", "SerDe", "SortColumn",
    "StorageDescriptor", "TableSnapshot", "TxnWriteId",
]


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    comment: str | None = None


@dataclass(frozen=True)
class SerDe:
    name: str | None = None
    serialization_lib: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SortColumn:
    column: str
    order: int  # Hive: 1 ascending, 0 descending


@dataclass(frozen=True)
class StorageDescriptor:
    """Where and how data is stored; shared by tables and partitions."""

    location: str | None = None
    columns: list[Column] = field(default_factory=list)
    input_format: str | None = None
    output_format: str | None = None
    compressed: bool = False
    num_buckets: int = -1
    serde: SerDe = field(default_factory=SerDe)
    bucket_columns: list[str] = field(default_factory=list)
    sort_columns: list[SortColumn] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)
    stored_as_subdirectories: bool = False


@dataclass(frozen=True)
class DatabaseSnapshot:
    name: str
    description: str | None = None
    location: str | None = None
    managed_location: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    owner_name: str | None = None
    owner_type: int | None = None  # Hive PrincipalType: 1 USER, 2 ROLE, 3 GROUP
    catalog: str | None = None
    create_time: int | None = None


@dataclass(frozen=True)
class TableSnapshot:
    name: str
    db: str
    table_type: str = "MANAGED_TABLE"  # MANAGED_TABLE, EXTERNAL_TABLE, VIRTUAL_VIEW, MATERIALIZED_VIEW
    sd: StorageDescriptor = field(default_factory=StorageDescriptor)
    partition_keys: list[Column] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)
    owner: str | None = None
    owner_type: int | None = None
    create_time: int | None = None
    last_access_time: int | None = None
    retention: int | None = None
    view_original_text: str | None = None
    view_expanded_text: str | None = None
    temporary: bool = False
    rewrite_enabled: bool = False
    catalog: str | None = None
    write_id: int | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def is_transactional(self) -> bool:
        return self.parameters.get("transactional", "").lower() == "true"


@dataclass(frozen=True)
class PartitionSnapshot:
    values: list[str]
    db: str | None = None
    table: str | None = None
    sd: StorageDescriptor = field(default_factory=StorageDescriptor)
    parameters: dict[str, str] = field(default_factory=dict)
    create_time: int | None = None
    last_access_time: int | None = None
    catalog: str | None = None
    write_id: int | None = None


@dataclass(frozen=True)
class ResourceUri:
    resource_type: str  # JAR, FILE, ARCHIVE
    uri: str


@dataclass(frozen=True)
class FunctionSnapshot:
    name: str
    db: str
    class_name: str
    owner_name: str | None = None
    owner_type: int | None = None
    create_time: int | None = None
    function_type: int = 1  # Hive FunctionType: 1 JAVA
    resource_uris: list[ResourceUri] = field(default_factory=list)
    catalog: str | None = None


@dataclass(frozen=True)
class FileRef:
    """A data file named by an event, with what a target needs to copy it point-in-time.

    ``checksum`` is computed by ``checksum_algorithm`` on the source filesystem; ``cm_uri`` is the
    change manager's retained copy, used when the file at ``uri`` changed or vanished.
    ``partition`` is the Hive partition name (``k=v/k2=v2``) the file belongs to, if any.
    """

    uri: str
    checksum: str | None = None
    checksum_algorithm: str | None = None
    cm_uri: str | None = None
    subdir: str | None = None
    size: int | None = None
    partition: str | None = None


@dataclass(frozen=True)
class Constraint:
    """One column of a table constraint (Hive's SQLPrimaryKey, SQLForeignKey, ... flattened)."""

    kind: str  # PRIMARY_KEY, FOREIGN_KEY, UNIQUE, NOT_NULL, DEFAULT, CHECK
    name: str
    db: str
    table: str
    column: str
    position: int = 1
    ref_db: str | None = None  # foreign keys: the primary-key side
    ref_table: str | None = None
    ref_column: str | None = None
    ref_name: str | None = None
    update_rule: int | None = None
    delete_rule: int | None = None
    value: str | None = None  # DEFAULT value or CHECK expression
    enabled: bool = True
    validated: bool = False
    rely: bool = False
    catalog: str | None = None


@dataclass(frozen=True)
class ColumnStatistic:
    """Statistics of one column; numeric bounds are kept as text so every Hive type fits."""

    column: str
    type: str
    kind: str  # BOOLEAN, LONG, DOUBLE, STRING, BINARY, DECIMAL, DATE, TIMESTAMP
    num_nulls: int | None = None
    num_distinct: int | None = None
    low_value: str | None = None
    high_value: str | None = None
    avg_length: float | None = None
    max_length: int | None = None
    num_trues: int | None = None
    num_falses: int | None = None
    bit_vectors: bytes | None = None


@dataclass(frozen=True)
class PartitionStatistics:
    """Column statistics of one partition (values in the order of the table's partition keys)."""

    values: list[str]
    statistics: list[ColumnStatistic] = field(default_factory=list)


@dataclass(frozen=True)
class TxnWriteId:
    txn_id: int
    write_id: int


@dataclass(frozen=True)
class AcidWrite:
    """The files one transaction wrote into one table (or partition) under one write id."""

    db: str
    table: str
    write_id: int
    files: list[FileRef] = field(default_factory=list)
    partition: str | None = None  # Hive partition name, None for unpartitioned tables
    table_snapshot: TableSnapshot | None = None
    partition_snapshot: PartitionSnapshot | None = None
