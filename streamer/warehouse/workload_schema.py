"""Workload operations on the warehouse's schema: databases, tables, views, partitions, functions."""

from __future__ import annotations

import streamer.warehouse.acid as acid
from streamer.events.model import ResourceUri
from streamer.warehouse.workload_base import (
    COLUMNS,
    MAX_DATABASES,
    MAX_TABLES_PER_DB,
    MAX_VIEWS_PER_DB,
    PARTITION_KEY_SETS,
    WorkloadBase,
)


class SchemaOps(WorkloadBase):
    """DDL operations; each returns whether it did something."""

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
