"""Errors of the bundled source warehouse, under streamer's root exception."""

from __future__ import annotations

from streamer.errors import StreamerError


class WarehouseError(StreamerError):
    """A warehouse operation was refused or failed; nothing of it was committed."""


class NoSuchObjectError(WarehouseError):
    """The database, table, partition or function named does not exist."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name} does not exist")


class AlreadyExistsError(WarehouseError):
    """The database, table, partition or function named exists already."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name} already exists")
