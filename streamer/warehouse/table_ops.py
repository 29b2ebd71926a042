"""Table and view DDL of the warehouse: create, alter properties, rename, drop."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import streamer.warehouse.acid as acid
import streamer.warehouse.catalog as catalog
import streamer.warehouse.objects as objects
import streamer.warehouse.tablemeta as tablemeta
import streamer.warehouse.txns as txns
from streamer.events.model import (
    AlterTablePayload,
    Column,
    CreateTablePayload,
    DropTablePayload,
    EventType,
    TableSnapshot,
)
from streamer.warehouse.change import Change
from streamer.warehouse.core import WarehouseCore
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.files import data_files, path_of, uri_of
from streamer.warehouse.layout import all_files, db_dir, dir_of, relocated


class TableOps(WarehouseCore):
    """Tables and views: one change (and one event) each."""

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
            directory = location.absolute() if location else db_dir(database) / name
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
            txns.require_no_open_writes(ch.ex, before, "rename")
            target_db = catalog.get_database(ch.ex, new_db)
            if catalog.find_table(ch.ex, new_db, new_name) is not None:
                raise WarehouseError(f"cannot rename {db}.{name}: table {new_db}.{new_name} already exists")
            parts = catalog.list_partitions(ch.ex, db, name)
            sd = before.sd
            if before.table_type == objects.MANAGED and before.sd.location:
                old_dir, new_dir = path_of(before.sd.location), db_dir(target_db) / new_name
                if new_dir.exists():
                    raise WarehouseError(f"cannot rename {db}.{name}: {new_dir} already exists")
                sd = dataclasses.replace(sd, location=uri_of(new_dir))
                parts = [relocated(p, before.sd.location, sd.location or "") for p in parts]
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
            drop_table_in(ch, catalog.get_table(ch.ex, db.lower(), name.lower()))


def drop_table_in(ch: Change, tbl: TableSnapshot) -> None:
    """Drop ``tbl`` within change ``ch`` (a DROP_TABLE event); a managed table's files go to cmroot."""
    txns.require_no_open_writes(ch.ex, tbl, "drop")
    if tbl.table_type == objects.MANAGED:
        dirs = [dir_of(tbl.sd.location)] + [
            dir_of(p.sd.location) for p in catalog.list_partitions(ch.ex, tbl.db, tbl.name)
        ]
        ch.retire(all_files(tbl, dirs))
        top = dirs[0]
        ch.after_commit.append(lambda: shutil.rmtree(top, ignore_errors=True))
    catalog.delete_table(ch.ex, tbl.db, tbl.name)
    txns.forget_table(ch.ex, tbl.db, tbl.name)
    tablemeta.forget_table(ch.ex, tbl.db, tbl.name)
    ch.emit(EventType.DROP_TABLE, DropTablePayload(tbl), tbl.db, tbl.name)


def _move(src: Path, dst: Path) -> None:
    src.rename(dst)
