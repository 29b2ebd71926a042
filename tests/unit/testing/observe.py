"""Observing a bundled warehouse the way a sampler observes a target: metadata plus files on disk."""

from __future__ import annotations

import posixpath

from streamer.testing import TableState, observe, table_key
from streamer.warehouse import Warehouse


def observe_warehouse(wh: Warehouse) -> dict[str, TableState]:
    """Every table's current state through the warehouse's read API (ACID: committed write ids only)."""
    out: dict[str, TableState] = {}
    for db in wh.databases():
        for name in wh.tables(db):
            table = wh.table(db, name)
            files: dict[str, list[tuple[str, str]]] = {}
            if table.partition_keys:
                files = {
                    "/".join(f"{k}={v}" for k, v in spec.items()): [] for spec in wh.partitions(db, name)
                }
            elif table.table_type != "VIRTUAL_VIEW":
                files[""] = []
            if table.table_type != "VIRTUAL_VIEW":
                for ref in wh.files(db, name):
                    path = posixpath.basename(ref.uri)
                    path = f"{ref.subdir}/{path}" if ref.subdir else path
                    files[ref.partition or ""].append((path, ref.checksum or ""))
            write_ids = wh.acid_committed_write_ids(db, name) if table.table_type != "VIRTUAL_VIEW" else []
            state = observe(table, files, write_ids)
            assert state is not None
            out[table_key(db, name)] = state
    return out
