"""Database and function DDL of the warehouse."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import streamer.warehouse.catalog as catalog
import streamer.warehouse.objects as objects
from streamer.events.model import (
    AlterDatabasePayload,
    CreateFunctionPayload,
    DatabasePayload,
    DatabaseSnapshot,
    DropFunctionPayload,
    EventType,
    FunctionSnapshot,
    ResourceUri,
)
from streamer.warehouse.change import Change
from streamer.warehouse.core import WarehouseCore
from streamer.warehouse.errors import NoSuchObjectError, WarehouseError
from streamer.warehouse.files import path_of, uri_of
from streamer.warehouse.layout import remove_empty_dirs
from streamer.warehouse.table_ops import drop_table_in


class DatabaseOps(WarehouseCore):
    """Databases and their functions: one change each."""

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
                _drop_function_in(ch, name, fn)
            for tbl in tables:
                drop_table_in(ch, catalog.get_table(ch.ex, name, tbl))
            catalog.delete_database(ch.ex, name)
            ch.emit(EventType.DROP_DATABASE, DatabasePayload(db), name)
            if db.location:
                location = path_of(db.location)
                ch.after_commit.append(lambda: remove_empty_dirs(location, up_to=self.root))

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
            _drop_function_in(ch, db.lower(), name.lower())


def _drop_function_in(ch: Change, db: str, name: str) -> None:
    if catalog.find_function(ch.ex, db, name) is None:
        raise NoSuchObjectError("function", f"{db}.{name}")
    catalog.delete_function(ch.ex, db, name)
    ch.emit(EventType.DROP_FUNCTION, DropFunctionPayload(name), db)
