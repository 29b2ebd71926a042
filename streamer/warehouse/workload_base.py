"""The shared part of the seeded workloads: the warehouse, the random generator, and how operations
draw a database, a table, rows or a partition."""

from __future__ import annotations

import random

import streamer.warehouse.acid as acid
from streamer.events.model import Column, TableSnapshot
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.warehouse import Warehouse

COLUMNS = [
    Column("id", "bigint"),
    Column("name", "string"),
    Column("amount", "double"),
    Column("ok", "boolean"),
]
PARTITION_KEY_SETS = [[Column("dt", "string")], [Column("dt", "string"), Column("region", "string")]]
REGIONS = ["eu", "us", "apac"]
MAX_DATABASES = 3
MAX_TABLES_PER_DB = 6  # views not counted: nothing drops them, they would fill a database for good
MAX_VIEWS_PER_DB = 2


class WorkloadBase:
    """The state of a :class:`streamer.warehouse.workload.Workload` and the draws its operations share."""

    def __init__(
        self,
        warehouse: Warehouse,
        seed: int,
        max_rows: int,
        txn_share: float,
        abort_ratio: float,
        constraint_kinds: tuple[str, ...],
    ) -> None:
        if not 0.0 <= txn_share < 1.0 or not 0.0 <= abort_ratio <= 1.0:
            raise WarehouseError(
                f"txn_share must be in [0, 1) and abort_ratio in [0, 1]; got {txn_share}, {abort_ratio}"
            )
        self.wh = warehouse
        self.rng = random.Random(seed)
        self.max_rows = max_rows
        self.txn_share = txn_share
        self.abort_ratio = abort_ratio
        self._cross_db = 0
        self._scanned: dict[str, list[TableSnapshot]] = {}  # db -> its tables, as of _scanned_at
        self._scanned_at = -1
        self.constraint_kinds = constraint_kinds

    def _name(self, prefix: str) -> str:
        """Unique across runs on the same warehouse: named by the event id about to be written."""
        return f"{prefix}{self.wh.current_event_id() + 1}"

    def _db(self) -> str | None:
        dbs = self.wh.databases()
        return self.rng.choice(dbs) if dbs else None

    def _table(
        self, *, partitioned: bool | None = None, managed: bool = False, transactional: bool | None = None
    ) -> tuple[str, str] | None:
        db = self._db()
        if db is None:
            return None
        candidates = []
        for tbl in self._snapshots(db):
            if tbl.table_type == "VIRTUAL_VIEW":
                continue
            if managed and tbl.table_type != "MANAGED_TABLE":
                continue
            if partitioned is not None and bool(tbl.partition_keys) != partitioned:
                continue
            if transactional is not None and (acid.table_kind(tbl) is not None) != transactional:
                continue
            candidates.append(tbl.name)
        return (db, self.rng.choice(candidates)) if candidates else None

    def _snapshots(self, db: str) -> list[TableSnapshot]:
        """``db``'s tables, read again only after an event: most operations draw a table that does not
        qualify and write nothing, so the same scan would otherwise repeat many times per event."""
        now = self.wh.current_event_id()
        if now != self._scanned_at:
            self._scanned.clear()
            self._scanned_at = now
        if db not in self._scanned:
            self._scanned[db] = self.wh.table_snapshots(db)
        return self._scanned[db]

    def _views(self, db: str) -> int:
        return sum(1 for t in self._snapshots(db) if t.table_type == "VIRTUAL_VIEW")

    def _rows(self, columns: list[Column], with_keys: list[Column] | None = None) -> list[dict[str, object]]:
        return [
            {c.name: self._value(c) for c in columns}
            | {k.name: self._key_value(k.name) for k in with_keys or []}
            for _ in range(self.rng.randint(1, self.max_rows))
        ]

    def _value(self, column: Column) -> object:
        t = column.type.lower()
        if column.name == "name" or t == "string":
            return self.rng.choice(["alice", "bob", "carol", "dave", None])
        if t in ("float", "double"):
            return round(self.rng.uniform(0, 1000), 2)
        if t == "boolean":
            return self.rng.random() < 0.5
        return self.rng.randrange({"tinyint": 100, "smallint": 30_000}.get(t, 1_000_000))

    def _key_value(self, key: str) -> str:
        if key == "region":
            return self.rng.choice(REGIONS)
        if key == "dt":
            return f"2024-01-{self.rng.randint(1, 12):02d}"
        return str(self.rng.randint(1, 12))

    def _spec(self, db: str, table: str, existing: bool) -> dict[str, object] | None:
        if existing:
            parts = self.wh.partitions(db, table)
            return dict(self.rng.choice(parts)) if parts else None
        keys = self.wh.table(db, table).partition_keys
        return {k.name: self._key_value(k.name) for k in keys}

    # --- operations (each returns whether it did something) -----------------------------------
