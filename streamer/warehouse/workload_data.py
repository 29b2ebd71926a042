"""Workload operations on the warehouse's data: inserts, overwrites, truncates, ACID transactions."""

from __future__ import annotations

import streamer.warehouse.acid as acid
from streamer.warehouse.workload_base import COLUMNS, PARTITION_KEY_SETS, WorkloadBase


class DataOps(WorkloadBase):
    """DML operations; each returns whether it did something."""

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
