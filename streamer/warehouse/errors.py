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


class TxnStateError(WarehouseError):
    """A transaction operation named a transaction that is not open (unknown, committed, aborted)."""

    def __init__(self, txn_id: int, state: str, action: str) -> None:
        self.txn_id = txn_id
        self.state = state
        super().__init__(f"cannot {action}: transaction {txn_id} is {state}")


class OpenWritesError(WarehouseError):
    """A change to a table was refused because an open transaction has written to it (Hive would wait
    for that transaction's lock)."""

    def __init__(self, name: str, txn_ids: list[int], action: str) -> None:
        self.name = name
        self.txn_ids = txn_ids
        super().__init__(f"cannot {action} {name}: open transactions {txn_ids} wrote to it")
