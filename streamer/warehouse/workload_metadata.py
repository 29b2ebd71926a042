"""Workload operations on what hangs off tables: statistics, constraints, external files."""

from __future__ import annotations

from streamer.events.model import Constraint
from streamer.warehouse.workload_base import WorkloadBase


class MetadataOps(WorkloadBase):
    """Statistics, constraint and external-file operations; each returns whether it did something."""

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
