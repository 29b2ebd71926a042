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
    AbortTxnPayload,
    AcidWrite,
    AddPartitionPayload,
    AllocWriteIdPayload,
    AlterDatabasePayload,
    AlterPartitionPayload,
    AlterTablePayload,
    Column,
    CommitTxnPayload,
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
    OpenTxnPayload,
    PartitionSnapshot,
    Payload,
    ResourceUri,
    Source,
    TableSnapshot,
    TxnWriteId,
)
from streamer.hive.encode import encode_event, encode_txn_write
from streamer.hive.files import parse_partition_name
from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow
from streamer.warehouse import acid, catalog, objects, tablemeta, txns
from streamer.warehouse.errors import NoSuchObjectError, OpenWritesError, WarehouseError
from streamer.warehouse.external_files import ExternalFileOps
from streamer.warehouse.files import (
    ChangeManager,
    data_files,
    path_of,
    read_parquet,
    remove_files,
    tree_files,
    uri_of,
    write_parquet,
)
from streamer.warehouse.metadata_ops import TableMetadataOps, basic_statistics_of, with_basic_statistics
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
        self,
        directory: Path,
        columns: Sequence[Column],
        rows: Sequence[Row],
        n_files: int,
        file_name: Callable[[int], str] | None = None,
    ) -> list[Path]:
        self.mkdir(directory)  # undone after the files: undo runs in reverse
        paths = write_parquet(directory, columns, rows, n_files, file_name=file_name) if rows else []
        self.undo.append(lambda: remove_files(paths))
        return paths

    def mkdir(self, directory: Path) -> None:
        if not directory.exists():
            directory.mkdir(parents=True)
            self.undo.append(lambda: _remove_empty_dirs(directory))


class Warehouse(TableMetadataOps, ExternalFileOps):
    """A small Hive-compatible metastore plus data files; see the module docstring.

    ``stats_autogather`` (Hive's ``hive.stats.autogather``) keeps basic statistics (numFiles,
    numRows, totalSize) current: loads into a table or existing partition are followed by an
    ALTER_TABLE / ALTER_PARTITION carrying them, new partitions carry them from the start.
    """

    def __init__(
        self,
        store: Store,
        root: Path,
        cmroot: Path,
        message_format: str,
        source_id: str = DEFAULT_SOURCE_ID,
        clock: Callable[[], float] = time.time,
        *,
        stats_autogather: bool = False,
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
        self.stats_autogather = stats_autogather

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
        stats_autogather: bool = False,
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
            return cls(
                store,
                Path(config["root"]),
                Path(config["cmroot"]),
                fmt,
                source_id,
                clock,
                stats_autogather=stats_autogather,
            )
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
        transactional: bool | str = False,
    ) -> TableSnapshot:
        """A managed or external Parquet table; an external one's existing files are in the event.

        ``transactional`` True (or ``"full"``) makes a full ACID table, ``"insert_only"`` an
        insert-only one: managed, with Hive's ``transactional`` properties; its data is written by
        transactions (:meth:`acid_insert`) into ``delta_W_W_S`` directories.
        """
        db, name = db.lower(), name.lower()
        objects.check_columns(columns, partition_keys)
        kind = acid.kind_of(transactional)
        if kind is not None:
            if external:
                raise WarehouseError(f"table {db}.{name}: an external table cannot be transactional")
            params = {**(params or {}), **acid.table_params(kind)}
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
            self._no_open_writes(ch, before, "rename")
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
                    # files leave their recorded paths: retain them so earlier events stay copyable
                    self.cm.retain(f for d in [old_dir, *old_dir.rglob("*")] for f in data_files(d))
                    old_dir.rename(new_dir)
                    ch.undo.append(lambda: _move(new_dir, old_dir))
            after = objects.altered_table(before, ch.now, name=new_name, db=new_db, sd=sd)
            catalog.delete_table(ch.ex, db, name)
            catalog.insert_table(ch.ex, after)
            txns.rename_table(ch.ex, db, name, new_db, new_name)
            tablemeta.rename_table(ch.ex, db, name, new_db, new_name)
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
        self._no_open_writes(ch, tbl, "drop")
        if tbl.table_type == objects.MANAGED:
            dirs = [_location(tbl.sd.location)] + [
                _location(p.sd.location) for p in catalog.list_partitions(ch.ex, tbl.db, tbl.name)
            ]
            ch.retire(_all_files(tbl, dirs))
            top = dirs[0]
            ch.after_commit.append(lambda: shutil.rmtree(top, ignore_errors=True))
        catalog.delete_table(ch.ex, tbl.db, tbl.name)
        txns.forget_table(ch.ex, tbl.db, tbl.name)
        tablemeta.forget_table(ch.ex, tbl.db, tbl.name)
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
                found = data_files(directory)
                files += [self.cm.file_ref(p, name) for p in found]
                if self.stats_autogather:
                    part = with_basic_statistics(part, found)
                    catalog.put_partition(ch.ex, tbl, part, new=False)
                parts.append(part)
            ch.emit(EventType.ADD_PARTITION, AddPartitionPayload(tbl, parts, files), db, table)
        return parts

    def drop_partitions(self, db: str, table: str, specs: Sequence[Mapping[str, object]]) -> None:
        """Drop partitions (one DROP_PARTITION event); a managed table's files go to cmroot."""
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            tbl = self._partitioned(ch, db, table)
            self._no_open_writes(ch, tbl, "drop partitions of")
            values = []
            for spec in specs:
                part = self._existing_partition(ch, tbl, objects.partition_values(tbl.partition_keys, spec))
                if tbl.table_type == objects.MANAGED:
                    directory = _location(part.sd.location)
                    ch.retire(_all_files(tbl, [directory]))
                    ch.after_commit.append(_rmtree_later(directory))
                catalog.delete_partition(ch.ex, tbl, part.values)
                name = objects.partition_name(tbl.partition_keys, part.values)
                tablemeta.forget_partition(ch.ex, db, table, name)
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

        Into a transactional table the insert is its own transaction, as Hive's auto-commit:
        OPEN_TXN, ALLOC_WRITE_ID_EVENT, (ADD_PARTITION,) COMMIT_TXN; see :meth:`acid_insert`.
        """
        db, table = db.lower(), table.lower()
        if acid.table_kind(self.table(db, table)) is not None:
            if overwrite:
                raise WarehouseError(
                    f"INSERT OVERWRITE into transactional table {db}.{table} is not supported"
                )
            txn, open_id = self._open_txn()
            try:
                ids = self.acid_insert(txn, db, table, rows, partition, n_files=n_files)
            except BaseException:
                self.abort_txn(txn)
                raise
            return [open_id, *ids, self.commit_txn(txn)]
        with self._change() as ch:
            tbl = catalog.get_table(ch.ex, db, table)
            if tbl.table_type == objects.VIEW:
                raise WarehouseError(f"cannot insert into view {tbl.qualified_name}")
            return [
                event_id
                for values, group in _groups(tbl, rows, partition)
                for event_id in self._insert_into(ch, tbl, values, group, overwrite, n_files)
            ]

    def _insert_into(
        self,
        ch: _Change,
        tbl: TableSnapshot,
        values: list[str],
        rows: Sequence[Row],
        overwrite: bool,
        n_files: int,
    ) -> list[int]:
        """INSERT (or ADD_PARTITION for a new partition), then basic statistics when autogathered."""
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
            # the event lists every file in the directory, as Hive's listener does: an external
            # partition dropped and added again still holds its old files, which readers see
            listed = data_files(directory)
            if self.stats_autogather:
                part = with_basic_statistics(part, listed)
                catalog.put_partition(ch.ex, tbl, part, new=False)
            added = [self.cm.file_ref(p, name) for p in listed]
            payload_add = AddPartitionPayload(tbl, [part], added)
            return [ch.emit(EventType.ADD_PARTITION, payload_add, tbl.db, tbl.name)]
        payload = InsertPayload(tbl, part, values, overwrite, files)
        ids = [ch.emit(EventType.INSERT, payload, tbl.db, tbl.name)]
        if self.stats_autogather:
            ids.append(self._emit_basic_stats(ch, tbl, part))
        return ids

    def truncate(self, db: str, table: str, partition: Mapping[str, object] | None = None) -> list[int]:
        """TRUNCATE: ALTER_TABLE (unpartitioned) or one ALTER_PARTITION per partition, isTruncateOp."""
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            tbl = catalog.get_table(ch.ex, db, table)
            if tbl.table_type != objects.MANAGED:
                raise WarehouseError(f"cannot truncate {tbl.qualified_name}: it is a {tbl.table_type}")
            if acid.table_kind(tbl) is not None:
                raise WarehouseError(f"TRUNCATE of transactional table {tbl.qualified_name} is not supported")
            if not tbl.partition_keys:
                if partition:
                    raise WarehouseError(f"table {tbl.qualified_name} is not partitioned")
                ch.retire(data_files(_location(tbl.sd.location)))
                after = objects.altered_table(tbl, ch.now, parameters=self._emptied_stats(tbl.parameters))
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
                params = {**old.parameters, "transient_lastDdlTime": str(ch.now)}
                new = dataclasses.replace(old, parameters={**params, **self._emptied_stats(params)})
                catalog.put_partition(ch.ex, tbl, new, new=False)
                payload = AlterPartitionPayload(tbl, old, new, is_truncate=True)
                ids.append(ch.emit(EventType.ALTER_PARTITION, payload, db, table))
            return ids

    def _emptied_stats(self, params: Mapping[str, str]) -> dict[str, str]:
        """Basic statistics of an emptied table or partition, when they are kept."""
        return basic_statistics_of([]) if self.stats_autogather else {}

    # --- transactions -------------------------------------------------------------------------

    def open_txn(self) -> int:
        """Open a transaction (an OPEN_TXN event); returns its id (dense, increasing)."""
        return self._open_txn()[0]

    def _open_txn(self) -> tuple[int, int]:
        with self._change() as ch:
            txn = txns.new_txn(ch.ex, ch.now)
            return txn, ch.emit(EventType.OPEN_TXN, OpenTxnPayload([txn]), None)

    @contextmanager
    def transaction(self) -> Iterator[int]:
        """``with wh.transaction() as txn:`` commits on success and aborts on an exception."""
        txn = self.open_txn()
        try:
            yield txn
        except BaseException:
            self.abort_txn(txn)
            raise
        self.commit_txn(txn)

    def acid_insert(
        self,
        txn: int,
        db: str,
        table: str,
        rows: Sequence[Row],
        partition: Mapping[str, object] | None = None,
        *,
        n_files: int = 1,
    ) -> list[int]:
        """Insert rows into a transactional table within open transaction ``txn``; returns the event ids.

        The txn's first write to the table allocates the table's next write id W (an
        ALLOC_WRITE_ID_EVENT); each call is a new statement S writing ``delta_W_W_S`` under the
        table or each partition (dynamic partitioning as :meth:`insert`; a new partition is an
        ADD_PARTITION without files). The files are recorded in ``TXN_WRITE_NOTIFICATION_LOG``,
        not in the log, as Hive 4 does; readers see them once the txn commits.
        """
        db, table = db.lower(), table.lower()
        with self._change() as ch:
            txns.require_open(ch.ex, txn, f"write to {db}.{table}")
            tbl = catalog.get_table(ch.ex, db, table)
            kind = acid.table_kind(tbl)
            if kind is None or tbl.table_type != objects.MANAGED:
                raise WarehouseError(f"{tbl.qualified_name} is not a transactional table: use insert()")
            groups = _groups(tbl, rows, partition)
            ids = []
            write = txns.table_write(ch.ex, txn, db, table)
            if write is None:
                write_id = txns.allocate_write_id(ch.ex, txn, db, table)
                payload = AllocWriteIdPayload(db, table, [TxnWriteId(txn, write_id)])
                ids.append(ch.emit(EventType.ALLOC_WRITE_ID, payload, db, table))
                write = txns.TableWrite(db, table, write_id, 0)
            subdir = acid.delta_dir(write.write_id, txns.take_statement_id(ch.ex, write))
            file_name = acid.bucket_file if kind == acid.FULL else None
            for values, group in groups:
                part = self._existing_or_none(ch, tbl, values)
                if values and part is None:
                    part = self._new_partition(ch, tbl, values)
                    ids.append(
                        ch.emit(EventType.ADD_PARTITION, AddPartitionPayload(tbl, [part], []), db, table)
                    )
                if not group:
                    continue
                name = objects.partition_name(tbl.partition_keys, values) if values else None
                location = _location(part.sd.location if part else tbl.sd.location)
                ch.mkdir(location)  # so that a failure removes a new partition's directory too
                paths = ch.write(location / subdir, tbl.sd.columns, group, n_files, file_name)
                refs = [dataclasses.replace(self.cm.file_ref(p, name), subdir=subdir) for p in paths]
                written = AcidWrite(db, table, write.write_id, refs, name, tbl, part)
                ch.tx.merge_txn_write(encode_txn_write(txn, written, ch.now))
            return ids

    def commit_txn(self, txn: int) -> int:
        """Commit (a COMMIT_TXN event naming only the txn, as in Hive 4's log); returns its event id."""
        with self._change() as ch:
            txns.require_open(ch.ex, txn, "commit")
            txns.finish(ch.ex, txn, txns.COMMITTED, ch.now)
            return ch.emit(EventType.COMMIT_TXN, CommitTxnPayload(txn), None)

    def abort_txn(self, txn: int) -> int:
        """Abort (an ABORT_TXN event with the databases written); its deltas stay on disk, unread."""
        with self._change() as ch:
            txns.require_open(ch.ex, txn, "abort")
            dbs = sorted({w.db for w in txns.writes_of(ch.ex, txn)})
            txns.finish(ch.ex, txn, txns.ABORTED, ch.now)
            return ch.emit(EventType.ABORT_TXN, AbortTxnPayload(txn, dbs), None)

    def _no_open_writes(self, ch: _Change, tbl: TableSnapshot, action: str) -> None:
        writers = txns.open_writers(ch.ex, tbl.db, tbl.name)
        if writers:
            raise OpenWritesError(tbl.qualified_name, writers, action)

    def _existing_or_none(
        self, ch: _Change, tbl: TableSnapshot, values: list[str]
    ) -> PartitionSnapshot | None:
        return catalog.find_partition(ch.ex, tbl, values) if values else None

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

    def table_snapshots(self, db: str) -> list[TableSnapshot]:
        """Every table of ``db``, ordered by name, in one read."""
        catalog.get_database(self._query, db.lower())
        return catalog.list_tables(self._query, db.lower())

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
        """Every current data file of the table (all partitions) with checksum and size.

        For a transactional table: the files a reader reads, i.e. of committed write ids only
        (with their ACID directory as ``subdir``); aborted deltas stay on disk but are not listed.
        """
        tbl = self.table(db, table)
        if acid.table_kind(tbl) is not None:
            committed = set(self.acid_committed_write_ids(db, table))
            return [
                dataclasses.replace(self.cm.file_ref(f, name), subdir=subdir)
                for name, directory in self._data_dirs(tbl)
                for subdir, f in _acid_files(directory, committed)
            ]
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
        if acid.table_kind(tbl) is not None:
            committed = set(self.acid_committed_write_ids(db, table))
            acid_rows: list[dict[str, object]] = []
            for name, directory in self._data_dirs(tbl):
                extra = _typed_spec(tbl, name)
                files = [f for _, f in _acid_files(directory, committed)]
                acid_rows += [{**row, **extra} for row in read_parquet(files)]
            return acid_rows
        if not tbl.partition_keys:
            return read_parquet(data_files(_location(tbl.sd.location)))
        out: list[dict[str, object]] = []
        for part in self.partition_snapshots(db, table):
            extra = {k.name: _typed(k.type, v) for k, v in zip(tbl.partition_keys, part.values, strict=True)}
            out += [{**row, **extra} for row in read_parquet(data_files(_location(part.sd.location)))]
        return out

    def _data_dirs(self, tbl: TableSnapshot) -> list[tuple[str | None, Path]]:
        """(partition name or None, directory) of each place the table keeps data."""
        if not tbl.partition_keys:
            return [(None, _location(tbl.sd.location))]
        return [
            (objects.partition_name(tbl.partition_keys, p.values), _location(p.sd.location))
            for p in self.partition_snapshots(tbl.db, tbl.name)
        ]

    def acid_committed_write_ids(self, db: str, table: str) -> list[int]:
        """The transactional table's write ids whose transactions committed (a valid write-id list)."""
        return txns.write_ids(self._query, db.lower(), table.lower(), txns.COMMITTED)

    def txn_state(self, txn: int) -> str:
        """``"open"``, ``"committed"``, ``"aborted"``, or ``"unknown"``."""
        return txns.STATE_NAMES.get(txns.state(self._query, txn) or "", "unknown")

    def txns(self, state: str | None = None) -> list[int]:
        """Transaction ids, all or those in ``state`` (``"open"``, ``"committed"``, ``"aborted"``)."""
        codes = {v: k for k, v in txns.STATE_NAMES.items()}
        if state is not None and state not in codes:
            raise WarehouseError(f"unknown transaction state {state!r}; use one of {sorted(codes)}")
        return txns.txn_ids(self._query, codes[state] if state else None)

    def txn_write_rows(self, txn: int) -> list[TxnWriteNotificationRow]:
        """The ``TXN_WRITE_NOTIFICATION_LOG`` rows of ``txn`` (ordered as the SQL reader orders them)."""
        rows = self._query(
            'SELECT "WNL_TXNID", "WNL_WRITEID", "WNL_DATABASE", "WNL_TABLE", "WNL_PARTITION",'
            ' "WNL_TABLE_OBJ", "WNL_PARTITION_OBJ", "WNL_FILES", "WNL_EVENT_TIME"'
            ' FROM "TXN_WRITE_NOTIFICATION_LOG"'
            ' WHERE "WNL_TXNID" = ? ORDER BY "WNL_WRITEID", "WNL_DATABASE", "WNL_TABLE", "WNL_PARTITION"',
            (txn,),
        )
        return [
            TxnWriteNotificationRow(
                txn_id=int(r[0]),
                write_id=int(r[1]),
                db=r[2],
                table=r[3],
                partition=r[4],
                table_obj=r[5],
                partition_obj=r[6],
                files=r[7] or "",
                event_time=int(r[8]),
            )
            for r in rows
        ]

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


def _groups(
    tbl: TableSnapshot, rows: Sequence[Row], partition: Mapping[str, object] | None
) -> list[tuple[list[str], Sequence[Row]]]:
    """(partition values, rows) per target: [] values for an unpartitioned table; rows grouped by
    their partition keys (which are removed) when a partitioned table gets no ``partition``."""
    if not tbl.partition_keys:
        if partition:
            raise WarehouseError(f"table {tbl.qualified_name} is not partitioned")
        return [([], rows)]
    if partition is not None:
        return [(objects.partition_values(tbl.partition_keys, partition), rows)]
    keys = [k.name for k in tbl.partition_keys]
    groups: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        if any(k not in row for k in keys):
            raise WarehouseError(f"row {dict(row)} lacks partition keys {keys} of {tbl.qualified_name}")
        groups.setdefault(tuple(str(row[k]) for k in keys), []).append(
            {c: v for c, v in row.items() if c not in keys}
        )
    return [(list(values), group) for values, group in sorted(groups.items())]


def _all_files(tbl: TableSnapshot, dirs: Sequence[Path]) -> list[Path]:
    """What dropping these directories deletes: top-level files, or every file of an ACID layout."""
    if acid.table_kind(tbl) is not None:
        return tree_files(dirs)
    return [f for d in dirs for f in data_files(d)]


def _acid_files(directory: Path, committed: set[int]) -> list[tuple[str, Path]]:
    """(ACID subdir, file) of the directory's visible deltas and base, in write-id order."""
    if not directory.is_dir():
        return []
    names = [p.name for p in directory.iterdir() if p.is_dir()]
    return [(sub, f) for sub in acid.visible_dirs(names, committed) for f in data_files(directory / sub)]


def _typed_spec(tbl: TableSnapshot, name: str | None) -> dict[str, object]:
    if name is None:
        return {}
    spec = parse_partition_name(name)
    return {k.name: _typed(k.type, spec[k.name.lower()]) for k in tbl.partition_keys}


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
