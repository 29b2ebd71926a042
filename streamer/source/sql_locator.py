"""``Locator`` over a metastore's own database: where an INSERT's object is, read with SQL.

An agent on ``--notification-db`` reads the log from the metastore's database and has no Thrift
metastore to ask where a Hive 2.3 INSERT without files wrote (``streamer.source.insert_files``). The
same database holds the answer: Hive's schema (``DBS``, ``TBLS``, ``SDS``, ``SERDES``,
``COLUMNS_V2``, ``TABLE_PARAMS``, ``PARTITION_KEYS``, ``PARTITIONS``, ``PARTITION_KEY_VALS`` and
their parameter tables) on PostgreSQL (upper-case identifiers, quoted) or MySQL/MariaDB, or the
bundled warehouse's ``WH_TABLES``/``WH_PARTITIONS`` (its snapshots as JSON). The connection is the
reader's kind: read-only at the database (``streamer.source.source_db``), so nothing here can
change the source. Only what a listing needs is read: the table's type, location, parameters
(``transactional``), partition keys, columns and storage format, create time; a partition's
location, parameters and create time.

Each answer is a few queries in autocommit: a concurrent DDL may land between them, as between a
Thrift ``get_table`` and ``get_partition``; ``insert_files`` checks what it found (create times, the
directory) before it lists.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from streamer.events.model import (
    Column,
    PartitionSnapshot,
    SerDe,
    SortColumn,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.hive.files import partition_name
from streamer.source.source_db import Dialect, SourceDatabaseError, connect, shown

log = logging.getLogger(__name__)

HIVE = "hive"
WAREHOUSE = "warehouse"


class SqlLocator:
    """``Locator`` over a Hive metastore database (or the bundled warehouse's), connected on first use."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._d: Dialect | None = None
        self._kind: str | None = None
        self._catalog_column = False

    # --- Locator ---

    def table(self, db: str, name: str) -> TableSnapshot | None:
        if self._schema() == WAREHOUSE:
            return self._wh_table(db, name)
        found = self._hive_table(db, name)
        return found[1] if found else None

    def partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None:
        if self._schema() == WAREHOUSE:
            return self._wh_partition(db, table, values)
        found = self._hive_table(db, table)
        if found is None:
            return None
        tbl_id, snap = found
        return self._hive_partition(tbl_id, snap, values)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    # --- Hive's schema ---

    def _hive_table(self, db: str, name: str) -> tuple[Any, TableSnapshot] | None:
        d = self._dialect()
        i = d.ident
        where = f"d.{i('NAME')} = {d.param} AND t.{i('TBL_NAME')} = {d.param}"
        args: list[object] = [db.lower(), name.lower()]
        if self._catalog_column:  # Hive 3+: databases live in catalogs; the log's are Hive's own
            where += f" AND d.{i('CTLG_NAME')} = {d.param}"
            args.append(HIVE)
        rows = self._query(
            f"SELECT t.{i('TBL_ID')}, t.{i('TBL_TYPE')}, t.{i('SD_ID')}, t.{i('OWNER')}, "
            f"t.{i('CREATE_TIME')}, t.{i('LAST_ACCESS_TIME')}, t.{i('RETENTION')}, d.{i('NAME')}, "
            f"t.{i('TBL_NAME')} FROM {i('TBLS')} t JOIN {i('DBS')} d ON d.{i('DB_ID')} = t.{i('DB_ID')} "
            f"WHERE {where}", args)
        if not rows:
            return None
        tbl_id, tbl_type, sd_id, owner, created, accessed, retention, db_name, tbl_name = rows[0]
        key_rows = self._query(
            f"SELECT {i('PKEY_NAME')}, {i('PKEY_TYPE')}, {i('PKEY_COMMENT')}, {i('INTEGER_IDX')} "
            f"FROM {i('PARTITION_KEYS')} WHERE {i('TBL_ID')} = {d.param}", [tbl_id])
        keys = [Column(_text(k) or "", _text(t) or "", _text(c))
                for k, t, c, _ in sorted(key_rows, key=lambda r: int(r[3]))]
        snap = TableSnapshot(
            name=_text(tbl_name) or name, db=_text(db_name) or db,
            table_type=_text(tbl_type) or "MANAGED_TABLE", sd=self._sd(sd_id), partition_keys=keys,
            parameters=self._params("TABLE_PARAMS", "TBL_ID", tbl_id), owner=_text(owner),
            create_time=_int(created), last_access_time=_int(accessed),
            retention=_int(retention),
        )
        return tbl_id, snap

    def _hive_partition(self, tbl_id: Any, table: TableSnapshot, values: list[str]
                        ) -> PartitionSnapshot | None:
        """The partition with ``values``: looked up by its name (Hive's unique index on ``PART_NAME``
        and ``TBL_ID``), its values checked against ``PARTITION_KEY_VALS``; by its values when the
        name is spelled otherwise."""
        d = self._dialect()
        i = d.ident
        keys = [k.name for k in table.partition_keys]
        if len(keys) != len(values) or not values:
            return None
        select = (f"SELECT p.{i('PART_ID')}, p.{i('SD_ID')}, p.{i('CREATE_TIME')}, "
                  f"p.{i('LAST_ACCESS_TIME')} FROM {i('PARTITIONS')} p WHERE p.{i('TBL_ID')} = {d.param}")
        rows = self._query(f"{select} AND p.{i('PART_NAME')} = {d.param}",
                           [tbl_id, partition_name(keys, values)])
        match = [r for r in rows if self._values(r[0]) == values]
        if not match:
            rows = self._query(
                f"{select} AND p.{i('PART_ID')} IN (SELECT v.{i('PART_ID')} FROM {i('PARTITION_KEY_VALS')} v "
                f"WHERE v.{i('INTEGER_IDX')} = 0 AND v.{i('PART_KEY_VAL')} = {d.param})", [tbl_id, values[0]])
            match = [r for r in rows if self._values(r[0]) == values]
        if not match:
            return None
        part_id, sd_id, created, accessed = match[0]
        return PartitionSnapshot(
            values=list(values), db=table.db, table=table.name, sd=self._sd(sd_id),
            parameters=self._params("PARTITION_PARAMS", "PART_ID", part_id), create_time=_int(created),
            last_access_time=_int(accessed),
        )

    def _values(self, part_id: Any) -> list[str]:
        d = self._dialect()
        i = d.ident
        rows = self._query(f"SELECT {i('PART_KEY_VAL')}, {i('INTEGER_IDX')} FROM {i('PARTITION_KEY_VALS')} "
                           f"WHERE {i('PART_ID')} = {d.param}", [part_id])
        return [_text(v) or "" for v, _ in sorted(rows, key=lambda r: int(r[1]))]

    def _sd(self, sd_id: Any) -> StorageDescriptor:
        """A storage descriptor (``SDS``) with its serde, columns, bucketing and parameters."""
        if sd_id is None:
            return StorageDescriptor()
        d = self._dialect()
        i = d.ident
        rows = self._query(
            f"SELECT {i('LOCATION')}, {i('INPUT_FORMAT')}, {i('OUTPUT_FORMAT')}, {i('IS_COMPRESSED')}, "
            f"{i('NUM_BUCKETS')}, {i('CD_ID')}, {i('SERDE_ID')}, {i('IS_STOREDASSUBDIRECTORIES')} "
            f"FROM {i('SDS')} WHERE {i('SD_ID')} = {d.param}", [sd_id])
        if not rows:
            return StorageDescriptor()
        location, input_format, output_format, compressed, buckets, cd_id, serde_id, subdirs = rows[0]
        serde = SerDe()
        if serde_id is not None:
            found = self._query(f"SELECT {i('NAME')}, {i('SLIB')} FROM {i('SERDES')} "
                                f"WHERE {i('SERDE_ID')} = {d.param}", [serde_id])
            if found:
                serde = SerDe(_text(found[0][0]), _text(found[0][1]),
                              self._params("SERDE_PARAMS", "SERDE_ID", serde_id))
        columns: list[Column] = []
        if cd_id is not None:
            columns = [Column(_text(n) or "", _text(t) or "", _text(c)) for n, t, c, _ in sorted(self._query(
                f"SELECT {i('COLUMN_NAME')}, {i('TYPE_NAME')}, {i('COMMENT')}, {i('INTEGER_IDX')} "
                f"FROM {i('COLUMNS_V2')} WHERE {i('CD_ID')} = {d.param}", [cd_id]), key=lambda r: int(r[3]))]
        bucket_columns = [_text(n) or "" for n, _ in sorted(self._query(
            f"SELECT {i('BUCKET_COL_NAME')}, {i('INTEGER_IDX')} FROM {i('BUCKETING_COLS')} "
            f"WHERE {i('SD_ID')} = {d.param}", [sd_id]), key=lambda r: int(r[1]))]
        sort_columns = [SortColumn(_text(n) or "", int(o)) for n, o, _ in sorted(self._query(
            f"SELECT {i('COLUMN_NAME')}, {i('ORDER')}, {i('INTEGER_IDX')} FROM {i('SORT_COLS')} "
            f"WHERE {i('SD_ID')} = {d.param}", [sd_id]), key=lambda r: int(r[2]))]
        return StorageDescriptor(
            location=_text(location), columns=columns, input_format=_text(input_format),
            output_format=_text(output_format), compressed=_bool(compressed),
            num_buckets=-1 if buckets is None else int(buckets), serde=serde, bucket_columns=bucket_columns,
            sort_columns=sort_columns, parameters=self._params("SD_PARAMS", "SD_ID", sd_id),
            stored_as_subdirectories=_bool(subdirs),
        )

    def _params(self, table: str, id_column: str, row_id: Any) -> dict[str, str]:
        d = self._dialect()
        i = d.ident
        rows = self._query(f"SELECT {i('PARAM_KEY')}, {i('PARAM_VALUE')} FROM {i(table)} "
                           f"WHERE {i(id_column)} = {d.param}", [row_id])
        return {_text(k) or "": _text(v) or "" for k, v in rows}

    # --- the bundled warehouse ---

    def _wh_table(self, db: str, name: str) -> TableSnapshot | None:
        from streamer.warehouse.snapshots import from_json

        d = self._dialect()
        i = d.ident
        rows = self._query(f"SELECT {i('SNAPSHOT')} FROM {i('WH_TABLES')} WHERE {i('DB_NAME')} = {d.param} "
                           f"AND {i('TBL_NAME')} = {d.param}", [db.lower(), name.lower()])
        return from_json(TableSnapshot, _text(rows[0][0]) or "{}") if rows else None

    def _wh_partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None:
        from streamer.warehouse.snapshots import from_json

        snap = self._wh_table(db, table)
        if snap is None or len(snap.partition_keys) != len(values) or not values:
            return None
        d = self._dialect()
        i = d.ident
        rows = self._query(
            f"SELECT {i('SNAPSHOT')} FROM {i('WH_PARTITIONS')} WHERE {i('DB_NAME')} = {d.param} "
            f"AND {i('TBL_NAME')} = {d.param} AND {i('PART_NAME')} = {d.param}",
            [db.lower(), table.lower(), partition_name([k.name for k in snap.partition_keys], values)])
        return from_json(PartitionSnapshot, _text(rows[0][0]) or "{}") if rows else None

    # --- plumbing ---

    def _dialect(self) -> Dialect:
        if self._conn is None or self._d is None:
            self._conn, self._d = connect(self.url)
        return self._d

    def _schema(self) -> str:
        """Which schema the database holds: Hive's (``TBLS``) or the bundled warehouse's (``WH_TABLES``);
        neither is an error, never "no such table" (which would read as a dropped table)."""
        if self._kind is None:
            hive = self._columns("TBLS")
            if hive is not None and self._columns("DBS") is not None:
                self._kind = HIVE
                self._catalog_column = "CTLG_NAME" in (self._columns("DBS") or set())
            elif self._columns("WH_TABLES") is not None:
                self._kind = WAREHOUSE
            else:
                raise SourceDatabaseError(
                    f"notification database {shown(self.url)!r} holds neither Hive's TBLS/DBS tables nor "
                    "the bundled warehouse's WH_TABLES: the agent cannot locate an INSERT's object there; "
                    "give the metastore's own database, or read through --hms-uri")
        return self._kind

    def _columns(self, table: str) -> set[str] | None:
        d = self._dialect()
        cur = self._conn.cursor()
        try:
            cur.execute(f"SELECT * FROM {d.ident(table)} WHERE 1 = 0")
            return {str(c[0]).upper() for c in cur.description or ()}
        except Exception as exc:  # the driver's "no such table" differs per backend
            log.debug("table %s not readable: %s", table, exc)
            self.close()  # PostgreSQL's connection is unusable after an error until it is reopened
            return None
        finally:
            with contextlib.suppress(Exception):  # the connection closed above
                cur.close()

    def _query(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        self._dialect()
        try:
            cur = self._conn.cursor()
            try:
                cur.execute(sql, tuple(params))
                return list(cur.fetchall())
            finally:
                cur.close()
        except Exception:
            self.close()  # reopened on the next call; the error still reaches the caller
            raise


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8")
    return str(value)


def _int(value: object) -> int | None:
    return None if value is None else int(str(value))


def _bool(value: object) -> bool:
    """Hive's booleans as each backend stores them: PostgreSQL ``boolean``, MySQL ``bit(1)`` (bytes),
    Derby/Oracle ``'Y'``/``'N'``."""
    if isinstance(value, bytes | bytearray | memoryview):
        return any(bytes(value))
    if isinstance(value, str):
        return value.strip().upper() in ("Y", "1", "TRUE", "T")
    return bool(value)
