"""Seeded workloads for the bundled warehouse: random DDL/DML mixes and a scripted demo scenario.

The same seed on an empty warehouse gives the same sequence of operations (hence of events), so a
test or benchmark can be rerun exactly. Operations are drawn with weights that resemble a real
warehouse: mostly inserts into partitioned tables, some DDL, occasional destructive changes.
With ``txn_share`` > 0 some tables are transactional and that share of operations are explicit
ACID transactions (one or two tables, sometimes in two databases), ``abort_ratio`` of them aborted.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from streamer.events.model import Column, Constraint, ResourceUri, TableSnapshot
from streamer.warehouse import acid
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.warehouse import Warehouse

log = logging.getLogger(__name__)

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


class Workload:
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
        self.constraint_kinds = constraint_kinds
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

    # --- helpers ------------------------------------------------------------------------------

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

    def create_database(self) -> bool:
        if len(self.wh.databases()) >= MAX_DATABASES:
            return False
        self.wh.create_database(self._name("db"), {"owner.team": self.rng.choice(["fin", "ops"])})
        return True

    def alter_database(self) -> bool:
        db = self._db()
        if db is None:
            return False
        self.wh.alter_database(db, {"touched": str(self.rng.randrange(100))})
        return True

    def create_table(self) -> bool:
        db = self._db()
        if db is None or len(self.wh.tables(db)) - self._views(db) >= MAX_TABLES_PER_DB:
            return False
        keys = self.rng.choice([[], *PARTITION_KEY_SETS])
        external = self.rng.random() < 0.2
        name = self._name("t")
        location = self.wh.root / "external" / db / name if external else None
        kind: bool | str = False
        if self.txn_share > 0 and not external and self.rng.random() < 0.5:
            kind = self.rng.choice(acid.KINDS)
        self.wh.create_table(
            db, name, COLUMNS, keys, external=external, location=location, transactional=kind
        )
        return True

    def create_view(self) -> bool:
        found = self._table()
        if found is None:
            return False
        db, table = found
        if self._views(db) >= MAX_VIEWS_PER_DB:
            return False
        self.wh.create_view(db, self._name("v"), COLUMNS[:2], f"SELECT id, name FROM {db}.{table}")
        return True

    def insert(self, overwrite: bool = False) -> bool:
        found = self._table(transactional=False) if overwrite else self._table()
        if found is None:
            return False
        db, table = found
        tbl = self.wh.table(db, table)
        keys, columns = tbl.partition_keys, tbl.sd.columns
        n_files = self.rng.choice([1, 1, 2, 3])
        if not keys:
            self.wh.insert(db, table, self._rows(columns), overwrite=overwrite, n_files=n_files)
        elif self.rng.random() < 0.3:  # dynamic partitioning: rows name their partitions
            self.wh.insert(db, table, self._rows(columns, keys), overwrite=overwrite, n_files=n_files)
        else:
            spec = self._spec(db, table, existing=self.rng.random() < 0.6) or self._spec(db, table, False)
            self.wh.insert(db, table, self._rows(columns), spec, overwrite=overwrite, n_files=n_files)
        return True

    def overwrite(self) -> bool:
        return self.insert(overwrite=True)

    def transaction(self) -> bool:
        """One explicit transaction: 1-2 statements into each of 1-2 transactional tables, sometimes
        in two databases; committed, or aborted with probability ``abort_ratio``."""
        tables = self._acid_tables()
        if not tables:
            db = self._db()
            if db is None:
                return False
            keys = self.rng.choice([[], *PARTITION_KEY_SETS])
            self.wh.create_table(
                db, self._name("acid"), COLUMNS, keys, transactional=self.rng.choice(acid.KINDS)
            )
            return True
        chosen = [self.rng.choice(tables)]
        if self.rng.random() < 0.4:
            others = [t for t in tables if t[0] != chosen[0][0]] or [t for t in tables if t != chosen[0]]
            if others:
                chosen.append(self.rng.choice(others))
        txn = self.wh.open_txn()
        for db, table in chosen:
            for _ in range(self.rng.choice([1, 1, 2])):
                self._acid_statement(txn, db, table)
        if self.rng.random() < self.abort_ratio:
            self.wh.abort_txn(txn)
        else:
            self.wh.commit_txn(txn)
        if len({db for db, _ in chosen}) > 1:
            self._cross_db += 1
        return True

    def _acid_tables(self) -> list[tuple[str, str]]:
        return [
            (db, name)
            for db in self.wh.databases()
            for name in self.wh.tables(db)
            if acid.table_kind(self.wh.table(db, name)) is not None
        ]

    def _acid_statement(self, txn: int, db: str, table: str) -> None:
        tbl = self.wh.table(db, table)
        keys, columns = tbl.partition_keys, tbl.sd.columns
        n_files = self.rng.choice([1, 1, 2])
        if not keys:
            self.wh.acid_insert(txn, db, table, self._rows(columns), n_files=n_files)
        elif self.rng.random() < 0.3:
            self.wh.acid_insert(txn, db, table, self._rows(columns, keys), n_files=n_files)
        else:
            spec = self._spec(db, table, existing=self.rng.random() < 0.6) or self._spec(db, table, False)
            self.wh.acid_insert(txn, db, table, self._rows(columns), spec, n_files=n_files)

    def truncate(self) -> bool:
        found = self._table(managed=True, transactional=False)
        if found is None:
            return False
        db, table = found
        spec = None
        if self.wh.table(db, table).partition_keys:
            spec = self._spec(db, table, existing=True)
            if spec is None:
                return False
        self.wh.truncate(db, table, spec)
        return True

    def rename_table(self) -> bool:
        found = self._table()
        if found is None:
            return False
        db, table = found
        self.wh.rename_table(db, table, self._name("r"))
        return True

    def drop_table(self) -> bool:
        found = self._table()
        if found is None:
            return False
        db, table = found
        self.wh.drop_table(db, table)
        return True

    def add_partitions(self) -> bool:
        found = self._table(partitioned=True)
        if found is None:
            return False
        db, table = found
        existing = {tuple(p.items()) for p in self.wh.partitions(db, table)}
        specs: list[dict[str, object]] = []
        for _ in range(self.rng.randint(1, 3)):
            spec = self._spec(db, table, existing=False) or {}
            key = tuple((k, str(v)) for k, v in spec.items())
            if key not in existing:
                existing.add(key)
                specs.append(spec)
        if not specs:
            return False
        self.wh.add_partitions(db, table, specs)
        return True

    def drop_partition(self) -> bool:
        found = self._table(partitioned=True)
        if found is None:
            return False
        db, table = found
        spec = self._spec(db, table, existing=True)
        if spec is None:
            return False
        self.wh.drop_partitions(db, table, [spec])
        return True

    def alter_table(self) -> bool:
        found = self._table()
        if found is None:
            return False
        db, table = found
        self.wh.alter_table_properties(db, table, {"comment": f"rev {self.rng.randrange(1000)}"})
        return True

    def analyze(self) -> bool:
        """``ANALYZE ... FOR COLUMNS`` of a table or one of its partitions (sometimes deleting a column's)."""
        found = self._table()
        if found is None:
            return False
        db, table = found
        spec = self._spec(db, table, existing=True) if self.wh.table(db, table).partition_keys else None
        if self.wh.table(db, table).partition_keys and spec is None:
            return False
        if self.rng.random() < 0.2 and self.wh.column_statistics(db, table, spec):
            column = self.rng.choice(self.wh.column_statistics(db, table, spec)).column
            self.wh.delete_column_statistics(db, table, spec, column)
        else:
            self.wh.update_column_statistics(db, table, spec)
        return True

    def add_constraint(self) -> bool:
        """A primary key, or a foreign key onto a table that has one, or another allowed kind."""
        found = self._table()
        if found is None:
            return False
        db, table = found
        kind = self.rng.choice(self.constraint_kinds)
        has_pk = any(c.kind == "PRIMARY_KEY" for c in self.wh.constraints(db, table))
        name = self._name(f"{kind[:2].lower()}_{db}_")
        if kind == "PRIMARY_KEY":
            if has_pk:
                return False
            self.wh.add_primary_key(db, table, name, ["id"])
        elif kind == "FOREIGN_KEY":
            parents = [t for t in self.wh.tables(db) if t != table and self._has_pk(db, t)]
            if not parents:
                return False
            self.wh.add_foreign_key(db, table, name, ["id"], self.rng.choice(parents))
        elif kind == "UNIQUE":
            self.wh.add_unique(db, table, name, ["id", "name"])
        elif kind == "NOT_NULL":
            self.wh.add_not_null(db, table, name, "id")
        elif kind == "DEFAULT":
            self.wh.add_default(db, table, name, "ok", "FALSE")
        else:
            self.wh.add_check(db, table, name, "amount", "amount >= 0")
        return True

    def _has_pk(self, db: str, table: str) -> bool:
        return self.wh.table(db, table).table_type != "VIRTUAL_VIEW" and any(
            c.kind == "PRIMARY_KEY" for c in self.wh.constraints(db, table)
        )

    def drop_constraint(self) -> bool:
        found = self._table()
        if found is None:
            return False
        db, table = found
        names = sorted({c.name for c in self.wh.constraints(db, table)})
        referenced = {c.ref_name for t in self.wh.tables(db) if t != table for c in self._constraints(db, t)}
        names = [n for n in names if n not in referenced]
        if not names:
            return False
        self.wh.drop_constraint(db, table, self.rng.choice(names))
        return True

    def _constraints(self, db: str, table: str) -> list[Constraint]:
        if self.wh.table(db, table).table_type == "VIRTUAL_VIEW":
            return []
        return self.wh.constraints(db, table)

    def change_external_files(self) -> bool:
        """What other tools do to external tables, with no event: add, replace or delete a file."""
        db = self._db()
        if db is None:
            return False
        tables = [t for t in self.wh.tables(db) if self.wh.table(db, t).table_type == "EXTERNAL_TABLE"]
        if not tables:
            return False
        table = self.rng.choice(tables)
        tbl = self.wh.table(db, table)
        spec = self._spec(db, table, existing=True) if tbl.partition_keys else None
        if tbl.partition_keys and spec is None:
            return False
        directory = self.wh.external_dir(db, table, spec)
        existing = sorted(
            p.name for p in directory.iterdir() if p.is_file() and not p.name.startswith((".", "_"))
        )
        if existing and self.rng.random() < 0.3:
            self.wh.delete_external_file(db, table, self.rng.choice(existing), spec)
        else:
            replace = existing and self.rng.random() < 0.5
            name = self.rng.choice(existing) if replace else f"ext_{self.rng.randrange(10**9):09d}"
            self.wh.write_external_file(db, table, self._rows(tbl.sd.columns), spec, name=name)
        return True

    def create_function(self) -> bool:
        db = self._db()
        if db is None:
            return False
        jar_path = self.wh.root / "lib" / "udfs.jar"
        if not jar_path.exists():  # a real resource file: targets copy it
            jar_path.parent.mkdir(parents=True, exist_ok=True)
            jar_path.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip archive
        jar = ResourceUri("JAR", f"file:{jar_path}")
        self.wh.create_function(db, self._name("fn"), "com.example.udf.Upper", [jar])
        return True

    def drop_function(self) -> bool:
        db = self._db()
        if db is None or not self.wh.functions(db):
            return False
        self.wh.drop_function(db, self.rng.choice(self.wh.functions(db)))
        return True


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
