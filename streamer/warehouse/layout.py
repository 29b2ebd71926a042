"""Where the warehouse keeps things on disk: object locations and the data files a reader sees."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import streamer.warehouse.acid as acid
from streamer.events.model import DatabaseSnapshot, PartitionSnapshot, TableSnapshot
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.files import data_files, path_of, tree_files


def db_dir(db: DatabaseSnapshot) -> Path:
    if not db.location:
        raise WarehouseError(f"database {db.name} has no location")
    return path_of(db.location)


def dir_of(uri: str | None) -> Path:
    """The local directory at an object's location."""
    if not uri:
        raise WarehouseError("object has no location")
    return path_of(uri)


def relocated(part: PartitionSnapshot, old_prefix: str, new_prefix: str) -> PartitionSnapshot:
    """The partition with its location moved from under ``old_prefix`` to under ``new_prefix``."""
    uri = part.sd.location or ""
    if not uri.startswith(old_prefix + "/"):
        return part
    return dataclasses.replace(
        part, sd=dataclasses.replace(part.sd, location=new_prefix + uri[len(old_prefix) :])
    )


def all_files(tbl: TableSnapshot, dirs: Sequence[Path]) -> list[Path]:
    """What dropping these directories deletes: top-level files, or every file of an ACID layout."""
    if acid.table_kind(tbl) is not None:
        return tree_files(dirs)
    return [f for d in dirs for f in data_files(d)]


def acid_files(directory: Path, committed: set[int]) -> list[tuple[str, Path]]:
    """(ACID subdir, file) of the directory's visible deltas and base, in write-id order."""
    if not directory.is_dir():
        return []
    names = [p.name for p in directory.iterdir() if p.is_dir()]
    return [(sub, f) for sub in acid.visible_dirs(names, committed) for f in data_files(directory / sub)]


def remove_empty_dirs(directory: Path, up_to: Path | None = None) -> None:
    """Remove ``directory`` and its subdirectories if they hold no files (bottom-up)."""
    if not directory.is_dir():
        return
    for sub in sorted((p for p in directory.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(sub.iterdir()):
            sub.rmdir()
    if not any(directory.iterdir()) and directory != up_to:
        directory.rmdir()
