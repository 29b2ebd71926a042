"""A notification log in memory, read through the agent's reader protocol."""

from __future__ import annotations

from streamer.hive.notification import NotificationRow, TxnWriteNotificationRow


class MemoryLog:
    """The agent's reader over a list of rows; ``reads`` counts the reads, for tests of what is read again."""

    def __init__(self, rows: list[NotificationRow]) -> None:
        self.rows = rows
        self.reads = 0

    def read_after(self, last_id: int, limit: int) -> list[NotificationRow]:
        self.reads += 1
        return [r for r in self.rows if r.event_id > last_id][:limit]

    def head_event_id(self) -> int:
        return max((r.event_id for r in self.rows), default=0)

    def txn_writes(self, txn_id: int) -> list[TxnWriteNotificationRow]:
        return []

    def databases(self) -> set[str]:
        return set()

    def close(self) -> None:
        pass
