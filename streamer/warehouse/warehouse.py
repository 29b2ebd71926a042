"""The bundled Hive-compatible source warehouse: :class:`Warehouse`, composed of its operation groups.

Each public change is one database transaction with its ``NOTIFICATION_LOG`` events; see
``docs/design/warehouse.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import streamer.warehouse.catalog as catalog
from streamer.warehouse.constraint_ops import ConstraintOps
from streamer.warehouse.core import DEFAULT_SOURCE_ID, GZIP_FORMAT, JSON_FORMAT, MESSAGE_FORMATS
from streamer.warehouse.data_ops import DataOps
from streamer.warehouse.database_ops import DatabaseOps
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.external_files import ExternalFileOps
from streamer.warehouse.log_reads import LogReads
from streamer.warehouse.partition_ops import PartitionOps
from streamer.warehouse.reads import CatalogReads
from streamer.warehouse.statistics_ops import StatisticsOps
from streamer.warehouse.store import Store
from streamer.warehouse.table_ops import TableOps

__all__ = ["DEFAULT_SOURCE_ID", "GZIP_FORMAT", "JSON_FORMAT", "MESSAGE_FORMATS", "Warehouse"]


class Warehouse(
    DatabaseOps,
    TableOps,
    PartitionOps,
    DataOps,
    ConstraintOps,
    StatisticsOps,
    ExternalFileOps,
    CatalogReads,
    LogReads,
):
    """A small Hive-compatible metastore plus data files (see :class:`.core.WarehouseCore` for the state
    its parts share and ``stats_autogather``)."""

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
