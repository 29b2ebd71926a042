"""``SourceCatalog`` over a real Hive Metastore: what a bootstrap dump of a Hive source reads.

Metadata through the metastore's Thrift API, data files by listing each location with fsspec (no
checksums: enrichment computes them). Objects dropped while being read raise ``Vanished``.
Transactional tables: Hive 2.x's write ids are its transaction ids, so their committed set comes from
the metastore's open and aborted transactions (one snapshot per dump, taken once the transactions
open at its start have ended: ``streamer.source.open_txns``), and only the base/delta directories
Hive's reader would choose are dumped (``streamer.source.acid_dirs``). A Hive 3.0+ source names those
directories by per-table write ids instead: the first transactional table's read asks the metastore
which it is (``streamer.source.hive_version``) and refuses every transactional table of a Hive 3+
source with ``UnsupportedSourceObjectError`` naming it, rather than judge write ids as transaction ids.
"""

from __future__ import annotations

import logging
import posixpath
from typing import TypeVar
from urllib.parse import urlsplit

from streamer.events.model import (
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    TableSnapshot,
)
from streamer.hive.files import partition_name
from streamer.metastore.thrift import HmsCatalog, ThriftTxns, TxnSnapshot
from streamer.metastore.transport import HmsAuth
from streamer.source.acid_dirs import choose
from streamer.source.bootstrap import VIEW_TYPES, BootstrapError, Vanished
from streamer.source.hive_version import MetastoreApi, ask, refusal
from streamer.source.listing import filesystem_of
from streamer.source.listing import list_files as list_files  # re-exported
from streamer.source.open_txns import OpenTxnPolicy, TxnSource, settled_snapshot

log = logging.getLogger(__name__)

T = TypeVar("T")


class UnsupportedSourceObjectError(BootstrapError):
    """The object cannot be dumped faithfully from this source."""


def _present(found: T | None, what: str) -> T:
    """``found``, or ``Vanished`` naming ``what`` when the metastore no longer has it."""
    if found is None:
        raise Vanished(what)
    return found


class HmsSourceCatalog:
    """Reads of a Hive Metastore (through ``HmsCatalog``) and of its tables' filesystems.

    ``open_txns`` says how the first transactional table's read waits for the transactions open
    then (``txns``: the metastore's transaction calls, by default through the same connection)."""

    def __init__(self, catalog: HmsCatalog, *, open_txns: OpenTxnPolicy | None = None,
                 txns: TxnSource | None = None, api: MetastoreApi | None = None) -> None:
        self.hms = catalog
        self.api = api  # the source's ACID API (Hive 2.x or 3+): probed on the first transactional table
        self.open_txns = open_txns or OpenTxnPolicy()
        self.txns: TxnSource = txns or ThriftTxns(catalog.conn)
        self._snapshot: TxnSnapshot | None = None
        self._acid: dict[tuple[str, str], tuple[list[FileRef], list[int]]] = {}

    @classmethod
    def connect(cls, uri: str, *, timeout_s: float = 60.0, auth: HmsAuth | None = None,
                open_txns: OpenTxnPolicy | None = None) -> HmsSourceCatalog:
        return cls(HmsCatalog(uri, timeout_s=timeout_s, auth=auth), open_txns=open_txns)

    def txn_snapshot(self) -> TxnSnapshot:
        """The dump's one view of the source's transactions (waited for on first use)."""
        if self._snapshot is None:
            self._snapshot = settled_snapshot(self.txns, self.open_txns)
            log.info("bootstrap: transactional tables as of transaction high water mark %d (%d open, %d "
                     "aborted left out)", self._snapshot.high_water_mark, len(self._snapshot.open),
                     len(self._snapshot.aborted))
        return self._snapshot

    def metastore_api(self) -> MetastoreApi:
        """Whether the source names ACID directories by write ids (Hive 3+), asked once."""
        self.api = self.api or ask(self.hms.conn)
        return self.api

    def close(self) -> None:
        self.hms.close()

    def current_event_id(self) -> int:
        return self.hms.current_notification_event_id()

    def databases(self) -> list[str]:
        return self.hms.list_databases()

    def database(self, name: str) -> DatabaseSnapshot:
        return _present(self.hms.get_database(name), f"database {name}")

    def tables(self, db: str) -> list[str]:
        self.database(db)
        return self.hms.list_tables(db)

    def table(self, db: str, name: str) -> TableSnapshot:
        return _present(self.hms.get_table(db, name), f"table {db}.{name}")

    def partitions(self, db: str, table: str) -> list[PartitionSnapshot]:
        parts = self.hms.list_partitions(db, table)
        if not parts:
            self.table(db, table)  # none, or no table any more?
        return parts

    def files(self, db: str, table: str) -> list[FileRef]:
        t = self.table(db, table)
        if t.table_type in VIEW_TYPES:
            return []
        if t.is_transactional:
            files, ids = self._acid_read(t)
            self._acid[(db.lower(), table.lower())] = (files, ids)
            return files
        if not t.partition_keys:
            found = list_files(t.sd.location)
        else:
            keys = [k.name for k in t.partition_keys]
            found = []
            for part in self.partitions(db, table):
                found += list_files(part.sd.location or None, partition_name(keys, list(part.values)))
        if not found:
            self.table(db, table)  # an empty listing of a table dropped meanwhile is no table at all
        return found

    def write_ids(self, db: str, table: str) -> list[int]:
        """The transaction ids the dumped directories stand for (those of the last ``files`` read)."""
        kept = self._acid.pop((db.lower(), table.lower()), None)
        if kept is None:
            kept = self._acid_read(self.table(db, table))
        return kept[1]

    def _acid_read(self, t: TableSnapshot) -> tuple[list[FileRef], list[int]]:
        """Files of the directories Hive's reader would read at the dump's snapshot, and their ids."""
        api = self.metastore_api()
        if api.write_ids:
            raise UnsupportedSourceObjectError(refusal(f"{t.db}.{t.name}", api))
        snap = self.txn_snapshot()
        places: list[tuple[str | None, str | None]] = [(t.sd.location, None)]
        if t.partition_keys:
            keys = [k.name for k in t.partition_keys]
            places = [(p.sd.location, partition_name(keys, list(p.values)))
                      for p in self.partitions(t.db, t.name)]
        files: list[FileRef] = []
        ids: set[int] = set()
        for location, part in places:
            if not location:
                continue
            names = _first_level_dirs(location)
            choice = choose(names, snap)
            what = f"{t.db}.{t.name}" + (f" partition {part}" if part else "")
            for warning in choice.warnings:
                log.warning("bootstrap: transactional table %s: %s", what, warning)
            deletes = [n for n in choice.chosen if n.startswith("delete_delta_")]
            if deletes:
                raise UnsupportedSourceObjectError(
                    f"transactional table {what}: {deletes[0]} holds deleted rows (an UPDATE/DELETE), which "
                    "targets cannot apply; run a major compaction on the source (ALTER TABLE ... COMPACT "
                    "'major') and bootstrap again, or exclude the table from the policy"
                )
            chosen = set(choice.chosen)
            ids |= choice.write_ids
            for ref in list_files(location, part):
                top = _top_dir(location, ref.uri)
                if top in chosen:
                    files.append(ref)
        return sorted(files, key=lambda f: f.uri), sorted(ids)

    def functions(self, db: str) -> list[str]:
        self.database(db)
        return self.hms.list_functions(db)

    def function(self, db: str, name: str) -> FunctionSnapshot:
        return _present(self.hms.get_function(db, name), f"function {db}.{name}")

    def constraints(self, db: str, table: str) -> list[Constraint]:
        """Primary and foreign keys (the kinds Hive 2.x's API serves)."""
        return self.hms.get_constraints(db, table)

    def statistics(self, db: str, table: str) -> list[ColumnStatistic]:
        """Table-level column statistics of every column that has some."""
        t = self.table(db, table)
        columns = [c.name for c in t.sd.columns]
        if not columns:
            return []
        return self.hms.get_column_statistics(db, table, None, columns)

    def partition_statistics(self, db: str, table: str, partition_names: list[str]
                             ) -> dict[str, list[ColumnStatistic]]:
        """Column statistics of the named partitions (by Hive partition name), 100 partitions a call."""
        t = self.table(db, table)
        columns = [c.name for c in t.sd.columns]
        out: dict[str, list[ColumnStatistic]] = {}
        for start in range(0, len(partition_names), 100):
            chunk = partition_names[start : start + 100]
            out.update(self.hms.get_partitions_column_statistics(db, table, chunk, columns))
        return {k: v for k, v in out.items() if v}


def _first_level_dirs(location: str) -> list[str]:
    """Names of the directories right under ``location`` (none when it does not exist)."""
    fs, root = filesystem_of(location)
    try:
        entries = fs.ls(root.rstrip("/") or "/", detail=True)
    except FileNotFoundError:
        return []
    return [posixpath.basename(str(e["name"]).rstrip("/")) for e in entries if e.get("type") == "directory"]


def _top_dir(location: str, uri: str) -> str | None:
    """The first directory of ``uri`` below ``location`` (None for a file right in it)."""
    base = urlsplit(location).path.rstrip("/") + "/"
    path = urlsplit(uri).path
    if not path.startswith(base):
        return None
    rest = path[len(base):]
    return rest.split("/", 1)[0] if "/" in rest else None
