"""The bundled Hive-compatible source warehouse: metadata, Parquet data, change management, and a
``NOTIFICATION_LOG`` written exactly as a Hive metastore with DbNotificationListener writes it.

Each public operation is one database transaction (see :mod:`streamer.warehouse.store`): it reads
the current snapshots, writes new data files, updates the metadata, and appends the operation's
events (encoded by :func:`streamer.hive.encode.encode_event`) before committing. If anything fails,
nothing is committed, the new files are removed, and no event id is used. Files the change deletes
are retained in cmroot before the commit and removed after it.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamer.events.model import (
    AddPartitionPayload,
    AlterDatabasePayload,
    AlterPartitionPayload,
    AlterTablePayload,
    Column,
    CreateFunctionPayload,
    CreateTablePayload,
    DatabasePayload,
    DatabaseSnapshot,
    DropFunctionPayload,
    DropPartitionPayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    InsertPayload,
    PartitionSnapshot,
    Payload,
    ResourceUri,
    Source,
    TableSnapshot,
)
from streamer.hive.encode import encode_event
from streamer.hive.notification import NotificationRow
from streamer.warehouse import catalog, objects
from streamer.warehouse.errors import NoSuchObjectError, WarehouseError
from streamer.warehouse.files import (
    ChangeManager,
    data_files,
    path_of,
    read_parquet,
    remove_files,
    uri_of,
    write_parquet,
)
from streamer.warehouse.store import Store, Tx

log = logging.getLogger(__name__)

JSON_FORMAT = "json-0.2"
GZIP_FORMAT = "gzip(json-2.0)"
MESSAGE_FORMATS = (JSON_FORMAT, GZIP_FORMAT)
DEFAULT_SOURCE_ID = "warehouse"

Row = Mapping[str, object]


@dataclass
class _Change:
    """An open change: its SQL transaction, its clock reading, and file work to undo or finish."""

    wh: Warehouse
    tx: Tx
    now: int
    undo: list[Callable[[], None]] = field(default_factory=list)
    after_commit: list[Callable[[], None]] = field(default_factory=list)

    def ex(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self.tx.execute(sql, params)

    def emit(self, event_type: EventType, payload: Payload, db: str | None, table: str | None = None) -> int:
        """Encode one event and append its ``NOTIFICATION_LOG`` row inside this transaction."""
        event_id = self.tx.take_event_id()
        source = Source(self.wh.source_id, event_id, self.now, self.wh.message_format, objects.CATALOG)
        event = Event(source=source, event_type=event_type, payload=payload, db=db, table=table)
        self.tx.append_notification(encode_event(event, self.wh.message_format), event_id)
        return event_id

    def retire(self, paths: Sequence[Path]) -> None:
        """Files this change deletes: retained in cmroot now, removed once the change committed."""
        self.wh.cm.retain(paths)
        self.after_commit.append(lambda: remove_files(paths))

    def write(
        self, directory: Path, columns: Sequence[Column], rows: Sequence[Row], n_files: int
    ) -> list[Path]:
        self.mkdir(directory)  # undone after the files: undo runs in reverse
        paths = write_parquet(directory, columns, rows, n_files) if rows else []
        self.undo.append(lambda: remove_files(paths))
        return paths

    def mkdir(self, directory: Path) -> None:
        if not directory.exists():
            directory.mkdir(parents=True)
            self.undo.append(lambda: _remove_empty_dirs(directory))


class Warehouse:
    """A small Hive-compatible metastore plus data files; see the module docstring."""

    def __init__(
        self,
        store: Store,
        root: Path,
        cmroot: Path,
        message_format: str,
        source_id: str = DEFAULT_SOURCE_ID,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if message_format not in MESSAGE_FORMATS:
            raise WarehouseError(
                f"message format {message_format!r} not supported; use one of {MESSAGE_FORMATS}"
            )
        self.store = store
        self.root = root.absolute()
        self.cm = ChangeManager(cmroot)
        self.message_format = message_format
        self.source_id = source_id
        self._clock = clock

    @classmethod
    def open(
        cls,
        url: str,
        root: Path | None = None,
        cmroot: Path | None = None,
        message_format: str | None = None,
        *,
        source_id: str = DEFAULT_SOURCE_ID,
        clock: Callable[[], float] = time.time,
    ) -> Warehouse:
        """Open (creating if needed) the warehouse at ``url`` (a sqlite path or ``postgresql://`` URL).

        ``root`` and ``cmroot`` are recorded on first open; later opens may omit them and must not
        contradict them.
        """
        store = Store(url)
        try:
            store.create_schema()
            with store.change() as tx:
                ex = tx.execute
                config = catalog.get_config(ex)
                given = {"root": root, "cmroot": cmroot}
                for key, value in given.items():
                    if value is None:
                        if key not in config:
                            raise WarehouseError(
                                f"warehouse {url} has no {key} yet: pass --{key} on first use"
                            )
                    elif key not in config:
                        catalog.set_config(ex, key, str(value.absolute()))
                        config[key] = str(value.absolute())
                    elif Path(config[key]) != value.absolute():
                        raise WarehouseError(
                            f"warehouse {url} has {key} {config[key]}, not {value.absolute()}"
                        )
                if message_format is not None and "message_format" not in config:
                    catalog.set_config(ex, "message_format", message_format)
                fmt = message_format or config.get("message_format", JSON_FORMAT)
            Path(config["root"]).mkdir(parents=True, exist_ok=True)
            return cls(store, Path(config["root"]), Path(config["cmroot"]), fmt, source_id, clock)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _change(self) -> Iterator[_Change]:
        change: _Change | None = None
        try:
            with self.store.change() as tx:
                change = _Change(self, tx, int(self._clock()))
                yield change
        except BaseException:
            for fn in reversed(change.undo if change else []):
                try:
                    fn()
                except OSError:
                    log.warning("could not undo a file change after a failed operation", exc_info=True)
            raise
        for fn in change.after_commit:
            fn()

    # --- databases ----------------------------------------------------------------------------

    def create_database(
        self, name: str, params: Mapping[str, str] | None = None, description: str | None = None
    ) -> DatabaseSnapshot:
        name = name.lower()
        with self._change() as ch:
            location = self.root / f"{name}.db"
            db = objects.database(name, uri_of(location), ch.now, params, description)
            catalog.insert_database(ch.ex, db)
            ch.mkdir(location)
            ch.emit(EventType.CREATE_DATABASE, DatabasePayload(db), name)
        return db

    def alter_database(self, name: str, params: Mapping[str, str]) -> DatabaseSnapshot:
        name = name.lower()
        with self._change() as ch:
            before = catalog.get_database(ch.ex, name)
            after = dataclasses.replace(before, parameters={**before.parameters, **params})
            catalog.update_database(ch.ex, after)
            ch.emit(EventType.ALTER_DATABASE, AlterDatabasePayload(before, after), name)
        return after

    def drop_database(self, name: str, cascade: bool = False) -> None:
        """Drop a database; with ``cascade`` its functions and tables first (one event each, as Hive)."""
        name = name.lower()
        with self._change() as ch:
            db = catalog.get_database(ch.ex, name)
            tables = catalog.table_names(ch.ex, name)
            functions = catalog.function_names(ch.ex, name)
            if (tables or functions) and not cascade:
                raise WarehouseError(
                    f"database {name} is not empty ({len(tables)} tables, "
                    f"{len(functions)} functions): drop with cascade"
                )
            for fn in functions:
                self._drop_function(ch, name, fn)
            for tbl in tables:
                self._drop_table(ch, catalog.get_table(ch.ex, name, tbl))
            catalog.delete_database(ch.ex, name)
            ch.emit(EventType.DROP_DATABASE, DatabasePayload(db), name)
            if db.location:
                location = path_of(db.location)
                ch.after_commit.append(lambda: _remove_empty_dirs(location, up_to=self.root))

    # --- tables -------------------------------------------------------------------------------

    def create_table(
        self,
        db: str,
        name: str,
        columns: Sequence[Column],
        partition_keys: Sequence[Column] = (),
        *,
        external: bool = False,
        location: Path | None = None,
        params: Mapping[str, str] | None = None,
    ) -> TableSnapshot:
        """A managed or external Parquet table; an external one's existing files are in the event."""
        db, name = db.lower(), name.lower()
        objects.check_columns(columns, partition_keys)
        with self._change() as ch:
            database = catalog.get_database(ch.ex, db)
            directory = location.absolute() if location else _db_dir(database) / name
            tbl = objects.table(
                db, name, uri_of(directory), columns, partition_keys, ch.now, external=external, params=params
            )
            catalog.insert_table(ch.ex, tbl)
            ch.mkdir(directory)
            files = [] if partition_keys else [self.cm.file_ref(p) for p in data_files(directory)]
            ch.emit(EventType.CREATE_TABLE, CreateTablePayload(tbl, files), db, name)
        return tbl

    def create_view(self, db: str, name: str, columns: Sequence[Column], text: str) -> TableSnapshot:
        db, name = db.lower(), name.lower()
        with self._change() as ch:
            catalog.get_database(ch.ex, db)
            tbl = objects.view(db, name, columns, text, ch.now)
            catalog.insert_table(ch.ex, tbl)
            ch.emit(EventType.CREATE_TABLE, CreateTablePayload(tbl), db, name)
        return tbl

    def alter_table_properties(self, db: str, name: str, params: Mapping[str, str]) -> TableSnapshot:
        db, name = db.lower(), name.lower()
        with self._change() as ch:
            before = catalog.get_table(ch.ex, db, name)
            after = objects.altered_table(before, ch.now, parameters=dict(params))
            catalog.update_table(ch.ex, after)
            ch.emit(EventType.ALTER_TABLE, AlterTablePayload(before, after), db, name)
        return after

    def rename_table(self, db: str, name: str, new_name: str, new_db: str | None = None) -> TableSnapshot:
        """Rename (or move to another database); a managed table's directory moves, as in Hive."""
        db, name = db.lower(), name.lower()
        new_db, new_name = (new_db or db).lower(), new_name.lower()
        with self._change() as ch:
            before = catalog.get_table(ch.ex, db, name)
            target_db = catalog.get_database(ch.ex, new_db)
            if catalog.find_table(ch.ex, new_db, new_name) is not None:
                raise WarehouseError(f"cannot rename {db}.{name}: table {new_db}.{new_name} already exists")
            parts = catalog.list_partitions(ch.ex, db, name)
            sd = before.sd
            if before.table_type == objects.MANAGED and before.sd.location:
                old_dir, new_dir = path_of(before.sd.location), _db_dir(target_db) / new_name
                if new_dir.exists():
                    raise WarehouseError(f"cannot rename {db}.{name}: {new_dir} already exists")
                sd = dataclasses.replace(sd, location=uri_of(new_dir))
                parts = [_relocated(p, before.sd.location, sd.location or "") for p in parts]
                new_dir.parent.mkdir(parents=True, exist_ok=True)
                if old_dir.exists():
                    old_dir.rename(new_dir)
                    ch.undo.append(lambda: _move(new_dir, old_dir))
            after = objects.altered_table(before, ch.now, name=new_name, db=new_db, sd=sd)
            catalog.delete_table(ch.ex, db, name)
            catalog.insert_table(ch.ex, after)
            for part in parts:
                catalog.put_partition(
                    ch.ex, after, dataclasses.replace(part, db=new_db, table=new_name), new=True
                )
            ch.emit(EventType.ALTER_TABLE, AlterTablePayload(before, after), new_db, new_name)
        return after

    def drop_table(self, db: str, name: str) -> None:
        with self._change() as ch:
            self._drop_table(ch, catalog.get_table(ch.ex, db.lower(), name.lower()))

    def _drop_table(self, ch: _Change, tbl: TableSnapshot) -> None:
        if tbl.table_type == objects.MANAGED:
            dirs = [_location(tbl.sd.location)] + [
                _location(p.sd.location) for p in catalog.list_partitions(ch.ex, tbl.db, tbl.name)
            ]
            ch.retire([f for d in dirs for f in data_files(d)])
            top = dirs[0]
            ch.after_commit.append(lambda: shutil.rmtree(top, ignore_errors=True))
        catalog.delete_table(ch.ex, tbl.db, tbl.name)
        ch.emit(EventType.DROP_TABLE, DropTablePayload(tbl), tbl.db, tbl.name)

    # --- partitions ---------------------------------------------------------------------------

    def add_partitions(
        self, db: str, table: str, specs: Sequence[Mapping[str, object]]
    ) -> list[PartitionSnapshot]:
        """Add partitions (one ADD_PARTITION event listing files already in their directories)."""
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            tbl = self._partitioned(ch, db, table)
            parts, files = [], []
            for spec in specs:
                part = self._new_partition(ch, tbl, objects.partition_values(tbl.partition_keys, spec))
                directory = _location(part.sd.location)
                ch.mkdir(directory)
                name = objects.partition_name(tbl.partition_keys, part.values)
                files += [self.cm.file_ref(p, name) for p in data_files(directory)]
                parts.append(part)
            ch.emit(EventType.ADD_PARTITION, AddPartitionPayload(tbl, parts, files), db, table)
        return parts

    def drop_partitions(self, db: str, table: str, specs: Sequence[Mapping[str, object]]) -> None:
        """Drop partitions (one DROP_PARTITION event); a managed table's files go to cmroot."""
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            tbl = self._partitioned(ch, db, table)
            values = []
            for spec in specs:
                part = self._existing_partition(ch, tbl, objects.partition_values(tbl.partition_keys, spec))
                if tbl.table_type == objects.MANAGED:
                    directory = _location(part.sd.location)
                    ch.retire(data_files(directory))
                    ch.after_commit.append(_rmtree_later(directory))
                catalog.delete_partition(ch.ex, tbl, part.values)
                values.append(part.values)
            ch.emit(EventType.DROP_PARTITION, DropPartitionPayload(tbl, values), db, table)

    def _partitioned(self, ch: _Change, db: str, table: str) -> TableSnapshot:
        tbl = catalog.get_table(ch.ex, db, table)
        if not tbl.partition_keys:
            raise WarehouseError(f"table {tbl.qualified_name} is not partitioned")
        return tbl

    def _new_partition(self, ch: _Change, tbl: TableSnapshot, values: list[str]) -> PartitionSnapshot:
        name = objects.partition_name(tbl.partition_keys, values)
        location = uri_of(_location(tbl.sd.location) / name)
        part = objects.partition(tbl, values, location, ch.now)
        catalog.put_partition(ch.ex, tbl, part, new=True)
        return part

    def _existing_partition(self, ch: _Change, tbl: TableSnapshot, values: list[str]) -> PartitionSnapshot:
        part = catalog.find_partition(ch.ex, tbl, values)
        if part is None:
            raise NoSuchObjectError(
                "partition", f"{tbl.qualified_name}/{objects.partition_name(tbl.partition_keys, values)}"
            )
        return part

    # --- data ---------------------------------------------------------------------------------

    def insert(
        self,
        db: str,
        table: str,
        rows: Sequence[Row],
        partition: Mapping[str, object] | None = None,
        *,
        overwrite: bool = False,
        n_files: int = 1,
    ) -> list[int]:
        """INSERT [OVERWRITE] rows; returns the event ids written.

        Into a partitioned table without ``partition``, rows carry the partition keys and are
        grouped by them (Hive's dynamic partitioning): one event per partition. A new partition
        is announced by ADD_PARTITION listing the files (no INSERT), as Hive does.
        """
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            tbl = catalog.get_table(ch.ex, db, table)
            if tbl.table_type == objects.VIEW:
                raise WarehouseError(f"cannot insert into view {tbl.qualified_name}")
            if not tbl.partition_keys:
                if partition:
                    raise WarehouseError(f"table {tbl.qualified_name} is not partitioned")
                return [self._insert_into(ch, tbl, [], rows, overwrite, n_files)]
            if partition is not None:
                values = objects.partition_values(tbl.partition_keys, partition)
                return [self._insert_into(ch, tbl, values, rows, overwrite, n_files)]
            keys = [k.name for k in tbl.partition_keys]
            groups: dict[tuple[str, ...], list[Row]] = {}
            for row in rows:
                if any(k not in row for k in keys):
                    raise WarehouseError(
                        f"row {dict(row)} lacks partition keys {keys} of {tbl.qualified_name}"
                    )
                groups.setdefault(tuple(str(row[k]) for k in keys), []).append(
                    {c: v for c, v in row.items() if c not in keys}
                )
            return [
                self._insert_into(ch, tbl, list(vals), group, overwrite, n_files)
                for vals, group in sorted(groups.items())
            ]

    def _insert_into(
        self,
        ch: _Change,
        tbl: TableSnapshot,
        values: list[str],
        rows: Sequence[Row],
        overwrite: bool,
        n_files: int,
    ) -> int:
        name = objects.partition_name(tbl.partition_keys, values) if values else None
        part = catalog.find_partition(ch.ex, tbl, values) if values else None
        is_new = bool(values) and part is None
        if is_new:
            part = self._new_partition(ch, tbl, values)
        directory = _location(part.sd.location if part else tbl.sd.location)
        old = data_files(directory) if overwrite else []
        paths = ch.write(directory, tbl.sd.columns, rows, n_files)
        files = [self.cm.file_ref(p, name) for p in paths]
        if old:
            ch.retire(old)
        if is_new:
            assert part is not None
            return ch.emit(EventType.ADD_PARTITION, AddPartitionPayload(tbl, [part], files), tbl.db, tbl.name)
        payload = InsertPayload(tbl, part, values, overwrite, files)
        return ch.emit(EventType.INSERT, payload, tbl.db, tbl.name)

    def truncate(self, db: str, table: str, partition: Mapping[str, object] | None = None) -> list[int]:
        """TRUNCATE: ALTER_TABLE (unpartitioned) or one ALTER_PARTITION per partition, isTruncateOp."""
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            tbl = catalog.get_table(ch.ex, db, table)
            if tbl.table_type != objects.MANAGED:
                raise WarehouseError(f"cannot truncate {tbl.qualified_name}: it is a {tbl.table_type}")
            if not tbl.partition_keys:
                if partition:
                    raise WarehouseError(f"table {tbl.qualified_name} is not partitioned")
                ch.retire(data_files(_location(tbl.sd.location)))
                after = objects.altered_table(tbl, ch.now)
                catalog.update_table(ch.ex, after)
                return [
                    ch.emit(EventType.ALTER_TABLE, AlterTablePayload(tbl, after, is_truncate=True), db, table)
                ]
            if partition is not None:
                parts = [
                    self._existing_partition(ch, tbl, objects.partition_values(tbl.partition_keys, partition))
                ]
            else:
                parts = catalog.list_partitions(ch.ex, db, table)
            ids = []
            for old in parts:
                ch.retire(data_files(_location(old.sd.location)))
                new = dataclasses.replace(
                    old, parameters={**old.parameters, "transient_lastDdlTime": str(ch.now)}
                )
                catalog.put_partition(ch.ex, tbl, new, new=False)
                payload = AlterPartitionPayload(tbl, old, new, is_truncate=True)
                ids.append(ch.emit(EventType.ALTER_PARTITION, payload, db, table))
            return ids

    # --- functions ----------------------------------------------------------------------------

    def create_function(
        self, db: str, name: str, class_name: str, resources: Sequence[ResourceUri] = ()
    ) -> FunctionSnapshot:
        db, name = db.lower(), name.lower()
        with self._change() as ch:
            catalog.get_database(ch.ex, db)
            fn = objects.function(db, name, class_name, resources, ch.now)
            catalog.insert_function(ch.ex, fn)
            ch.emit(EventType.CREATE_FUNCTION, CreateFunctionPayload(fn), db)
        return fn

    def drop_function(self, db: str, name: str) -> None:
        with self._change() as ch:
            self._drop_function(ch, db.lower(), name.lower())

    def _drop_function(self, ch: _Change, db: str, name: str) -> None:
        if catalog.find_function(ch.ex, db, name) is None:
            raise NoSuchObjectError("function", f"{db}.{name}")
        catalog.delete_function(ch.ex, db, name)
        ch.emit(EventType.DROP_FUNCTION, DropFunctionPayload(name), db)

    # --- change management --------------------------------------------------------------------

    def clean_cmroot(self, retain_seconds: float) -> int:
        """Delete cmroot copies older than ``retain_seconds`` (Hive's ``hive.repl.cm.retain``)."""
        return self.cm.clean(retain_seconds, now=self._clock())

    # --- reads (committed state; for verification and operators) -------------------------------

    def databases(self) -> list[str]:
        return catalog.database_names(self._query)

    def database(self, name: str) -> DatabaseSnapshot:
        return catalog.get_database(self._query, name.lower())

    def tables(self, db: str) -> list[str]:
        catalog.get_database(self._query, db.lower())
        return catalog.table_names(self._query, db.lower())

    def table(self, db: str, name: str) -> TableSnapshot:
        return catalog.get_table(self._query, db.lower(), name.lower())

    def partition_snapshots(self, db: str, table: str) -> list[PartitionSnapshot]:
        return catalog.list_partitions(self._query, db.lower(), table.lower())

    def partitions(self, db: str, table: str) -> list[dict[str, str]]:
        """The table's partitions as ``{key: value}`` specs, ordered by partition name."""
        tbl = self.table(db, table)
        keys = [k.name for k in tbl.partition_keys]
        return [dict(zip(keys, p.values, strict=True)) for p in self.partition_snapshots(db, table)]

    def functions(self, db: str) -> list[str]:
        return catalog.function_names(self._query, db.lower())

    def files(self, db: str, table: str) -> list[FileRef]:
        """Every current data file of the table (all partitions) with checksum and size."""
        tbl = self.table(db, table)
        if not tbl.partition_keys:
            return [self.cm.file_ref(p) for p in data_files(_location(tbl.sd.location))]
        return [
            self.cm.file_ref(f, objects.partition_name(tbl.partition_keys, p.values))
            for p in self.partition_snapshots(db, table)
            for f in data_files(_location(p.sd.location))
        ]

    def rows(self, db: str, table: str) -> list[dict[str, object]]:
        """All current rows, read from the Parquet files; partition keys appended, typed by key type."""
        tbl = self.table(db, table)
        if tbl.table_type == objects.VIEW:
            raise WarehouseError(f"{tbl.qualified_name} is a view: it has no rows of its own")
        if not tbl.partition_keys:
            return read_parquet(data_files(_location(tbl.sd.location)))
        out: list[dict[str, object]] = []
        for part in self.partition_snapshots(db, table):
            extra = {k.name: _typed(k.type, v) for k, v in zip(tbl.partition_keys, part.values, strict=True)}
            out += [{**row, **extra} for row in read_parquet(data_files(_location(part.sd.location)))]
        return out

    def current_event_id(self) -> int:
        """The id of the last event written (0 when none), as Hive's ``get_current_notificationEventId``."""
        rows = self._query('SELECT "NEXT_EVENT_ID" FROM "NOTIFICATION_SEQUENCE" WHERE "NNI_ID" = 1', ())
        return int(rows[0][0]) - 1

    def notifications(self, after: int = 0, limit: int | None = None) -> list[NotificationRow]:
        """``NOTIFICATION_LOG`` rows with id > ``after`` in id order."""
        sql = (
            'SELECT "EVENT_ID", "EVENT_TIME", "EVENT_TYPE", "MESSAGE", "MESSAGE_FORMAT", "DB_NAME",'
            ' "TBL_NAME", "CAT_NAME" FROM "NOTIFICATION_LOG" WHERE "EVENT_ID" > ? ORDER BY "EVENT_ID"'
        )
        params: list[int] = [after]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [
            NotificationRow(
                event_id=int(r[0]),
                event_time=int(r[1]),
                event_type=r[2],
                message=r[3],
                message_format=r[4],
                db_name=r[5],
                table_name=r[6],
                cat_name=r[7],
            )
            for r in self._query(sql, params)
        ]

    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self.store.query(sql, params)


def _db_dir(db: DatabaseSnapshot) -> Path:
    if not db.location:
        raise WarehouseError(f"database {db.name} has no location")
    return path_of(db.location)


def _location(uri: str | None) -> Path:
    if not uri:
        raise WarehouseError("object has no location")
    return path_of(uri)


def _relocated(part: PartitionSnapshot, old_prefix: str, new_prefix: str) -> PartitionSnapshot:
    location = part.sd.location or ""
    if not location.startswith(old_prefix + "/"):
        return part
    return dataclasses.replace(
        part, sd=dataclasses.replace(part.sd, location=new_prefix + location[len(old_prefix) :])
    )


def _move(src: Path, dst: Path) -> None:
    src.rename(dst)


def _rmtree_later(directory: Path) -> Callable[[], None]:
    return lambda: shutil.rmtree(directory, ignore_errors=True)


def _typed(hive_type: str, value: str) -> object:
    t = hive_type.lower()
    if t in ("tinyint", "smallint", "int", "bigint"):
        return int(value)
    if t in ("float", "double"):
        return float(value)
    if t == "boolean":
        return value.lower() == "true"
    return value


def _remove_empty_dirs(directory: Path, up_to: Path | None = None) -> None:
    """Remove ``directory`` and its subdirectories if they hold no files (bottom-up)."""
    if not directory.is_dir():
        return
    for sub in sorted((p for p in directory.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(sub.iterdir()):
            sub.rmdir()
    if not any(directory.iterdir()) and directory != up_to:
        directory.rmdir()
