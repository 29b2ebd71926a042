"""What every part of the warehouse shares: its store, directories, event format and clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Self

from streamer.warehouse.change import Change, open_change
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.files import ChangeManager
from streamer.warehouse.store import Store

JSON_FORMAT = "json-0.2"
GZIP_FORMAT = "gzip(json-2.0)"
MESSAGE_FORMATS = (JSON_FORMAT, GZIP_FORMAT)
DEFAULT_SOURCE_ID = "warehouse"


class WarehouseCore:
    """The state the warehouse's operation groups (its base classes) share, and how they change it.

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

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _change(self) -> AbstractContextManager[Change]:
        """One public operation: a change committed with its events, or nothing (see :mod:`.change`)."""
        return open_change(self.store, self.cm, self.source_id, self.message_format, self._clock)

    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """A read of committed state."""
        return self.store.query(sql, params)
