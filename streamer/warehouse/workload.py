"""Seeded workloads for the bundled warehouse: random DDL/DML mixes and a scripted demo scenario.

The same seed on an empty warehouse gives the same sequence of operations (hence of events), so a
test or benchmark can be rerun exactly. Operations are drawn with weights that resemble a real
warehouse: mostly inserts into partitioned tables, some DDL, occasional destructive changes.
With ``txn_share`` > 0 some tables are transactional and that share of operations are explicit
ACID transactions (one or two tables, sometimes in two databases), ``abort_ratio`` of them aborted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from streamer.events.model import Column
from streamer.warehouse.warehouse import Warehouse
from streamer.warehouse.workload_base import COLUMNS, PARTITION_KEY_SETS
from streamer.warehouse.workload_data import DataOps
from streamer.warehouse.workload_metadata import MetadataOps
from streamer.warehouse.workload_schema import SchemaOps

__all__ = ["COLUMNS", "PARTITION_KEY_SETS", "Workload", "WorkloadStats", "scripted_scenario"]

log = logging.getLogger(__name__)


@dataclass
class WorkloadStats:
    """What a run did: operations by name and the event-id range it produced."""

    first_event_id: int
    last_event_id: int = 0
    operations: dict[str, int] = field(default_factory=dict)
    txns_committed: int = 0  # every transaction of the run, auto-commit inserts included
    txns_aborted: int = 0
    txns_cross_db: int = 0  # explicit transactions that wrote tables in two databases

    @property
    def events(self) -> int:
        return self.last_event_id - self.first_event_id + 1 if self.last_event_id else 0


class Workload(SchemaOps, DataOps, MetadataOps):
    """Random operations on a warehouse, reproducible from ``seed``."""

    def __init__(
        self,
        warehouse: Warehouse,
        seed: int = 0,
        max_rows: int = 20,
        *,
        txn_share: float = 0.0,
        abort_ratio: float = 0.3,
        stats_share: float = 0.0,
        constraint_share: float = 0.0,
        constraint_kinds: tuple[str, ...] = ("PRIMARY_KEY", "FOREIGN_KEY"),
        external_file_share: float = 0.0,
    ) -> None:
        super().__init__(warehouse, seed, max_rows, txn_share, abort_ratio, constraint_kinds)
        self._ops: list[tuple[float, Callable[[], bool]]] = [
            (2, self.create_database),
            (1, self.alter_database),
            (5, self.create_table),
            (30, self.insert),
            (4, self.overwrite),
            (3, self.truncate),
            (3, self.rename_table),
            (2, self.drop_table),
            (5, self.add_partitions),
            (4, self.drop_partition),
            (5, self.alter_table),
            (1, self.create_function),
            (1, self.drop_function),
            (1, self.create_view),
        ]
        # each share is of all operations; 0 leaves the operation out (and the seeded sequence as it was)
        extra = [
            (stats_share, self.analyze),
            (constraint_share, self.add_constraint),
            (constraint_share / 3, self.drop_constraint),
            (external_file_share, self.change_external_files),
        ]
        for share, op in extra:
            if share > 0:
                base = sum(w for w, _ in self._ops)
                self._ops.append((base * share / max(1e-9, 1 - share), op))
        if txn_share > 0:
            others = sum(w for w, _ in self._ops)
            self._ops.append((others * txn_share / (1 - txn_share), self.transaction))

    def run(self, n_events: int) -> WorkloadStats:
        """Apply random operations until at least ``n_events`` events were written."""
        start = self.wh.current_event_id()
        last_txn = max(self.wh.txns(), default=0)
        cross_db = self._cross_db
        stats = WorkloadStats(first_event_id=start + 1)
        if not self.wh.databases():
            self.create_database()
        weights = [w for w, _ in self._ops]
        while self.wh.current_event_id() - start < n_events:
            _, op = self.rng.choices(self._ops, weights=weights)[0]
            if op():
                stats.operations[op.__name__] = stats.operations.get(op.__name__, 0) + 1
        stats.last_event_id = self.wh.current_event_id()
        stats.txns_committed = sum(1 for t in self.wh.txns("committed") if t > last_txn)
        stats.txns_aborted = sum(1 for t in self.wh.txns("aborted") if t > last_txn)
        stats.txns_cross_db = self._cross_db - cross_db
        log.info(
            "workload wrote events %s..%s: %s", stats.first_event_id, stats.last_event_id, stats.operations
        )
        return stats


def scripted_scenario(wh: Warehouse, db: str = "sales") -> int:
    """A short, readable story for the demo; returns the last event id it wrote.

    Every kind of change appears once: database and tables (partitioned, external, a view), inserts
    into new and existing partitions, an overwrite, property changes, a rename, a truncate,
    partition add/drop, a function, and a drop; then two transactional tables (full ACID and
    insert-only), one committed transaction writing both and one aborted transaction.
    """
    wh.create_database(db, {"owner.team": "finance"}, description="demo sales data")
    wh.create_table(db, "orders", COLUMNS, [Column("dt", "string")], params={"comment": "orders by day"})
    wh.create_table(db, "customers", [Column("id", "bigint"), Column("name", "string")])
    wh.create_table(db, "clicks", COLUMNS[:2], external=True, location=wh.root / "external" / db / "clicks")
    day1 = [{"id": i, "name": f"order-{i}", "amount": 10.0 * i, "ok": True} for i in range(1, 6)]
    day2 = [{"id": i, "name": f"order-{i}", "amount": 5.5 * i, "ok": i % 2 == 0} for i in range(6, 10)]
    wh.insert(db, "orders", day1, {"dt": "2024-01-01"}, n_files=2)  # new partition: ADD_PARTITION
    wh.insert(db, "orders", day2, {"dt": "2024-01-02"})
    wh.insert(db, "orders", [{"id": 10, "name": "late", "amount": 1.0, "ok": False}], {"dt": "2024-01-01"})
    wh.insert(db, "customers", [{"id": 1, "name": "alice"}, {"id": 2, "name": "bob"}])
    wh.insert(db, "customers", [{"id": 1, "name": "alice"}, {"id": 3, "name": "carol"}], overwrite=True)
    wh.insert(db, "clicks", [{"id": 1, "name": "home"}, {"id": 2, "name": "cart"}])
    wh.alter_table_properties(db, "orders", {"retention.days": "30"})
    wh.create_view(db, "big_orders", COLUMNS[:2], f"SELECT id, name FROM {db}.orders WHERE amount > 20")
    wh.add_partitions(db, "orders", [{"dt": "2024-01-03"}])
    wh.rename_table(db, "customers", "clients")
    wh.truncate(db, "orders", {"dt": "2024-01-02"})
    wh.drop_partitions(db, "orders", [{"dt": "2024-01-03"}])
    wh.create_function(db, "to_upper", "com.example.udf.Upper")
    wh.alter_database(db, {"reviewed": "yes"})
    wh.drop_table(db, "big_orders")
    payment_cols = [Column("id", "bigint"), Column("amount", "double")]
    wh.create_table(db, "payments", payment_cols, [Column("dt", "string")], transactional=True)
    wh.create_table(
        db, "audit", [Column("id", "bigint"), Column("name", "string")], transactional="insert_only"
    )
    txn = wh.open_txn()  # committed: both tables become visible together
    day = {"dt": "2024-01-01"}
    wh.acid_insert(txn, db, "payments", [{"id": 1, "amount": 9.5}, {"id": 2, "amount": 20.0}], day)
    wh.acid_insert(txn, db, "audit", [{"id": 1, "name": "payments loaded"}])
    wh.commit_txn(txn)
    txn = wh.open_txn()  # aborted: its delta stays on the source, and no reader ever sees it
    wh.acid_insert(txn, db, "payments", [{"id": 3, "amount": -1.0}], day)
    wh.acid_insert(txn, db, "audit", [{"id": 2, "name": "bad batch"}])
    wh.abort_txn(txn)
    return wh.current_event_id()
