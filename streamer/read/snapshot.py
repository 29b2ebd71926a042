"""The consistent multi-table read: :func:`snapshot` and the :class:`Snapshot` it returns."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamer.metastore.catalog import Catalog
from streamer.metastore.transport import HmsAuth
from streamer.read.decision import Decision, Verdict, decide, decide_marks
from streamer.read.errors import (
    SnapshotError,
    SnapshotReleased,
    SnapshotTimeout,
    TableNotFound,
    UnknownDatabase,
)
from streamer.read.frames import drop, mark_released, materialize
from streamer.read.model import Marks, PinnedTable, table_key
from streamer.read.resolve import Raced, read_marks, resolve

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True, repr=False)
class Snapshot:
    """Tables of one source state: ``frames[name]`` (materialized DataFrames) as of ``event_id``.

    ``tables`` say exactly what was read (metastore snapshot, files); ``last_ids`` the
    ``repl.last.id`` of each involved database that exists; ``attempts`` how many reads it took
    (races with apply steps, waits).
    """

    event_id: int
    frames: Mapping[str, DataFrame]
    tables: Mapping[str, PinnedTable]
    last_ids: Mapping[str, int]
    attempts: int
    _released: list[bool] = field(default_factory=list, compare=False)

    @property
    def released(self) -> bool:
        return bool(self._released)

    def __getitem__(self, name: str) -> DataFrame:
        key = table_key(name)
        if self._released:
            raise SnapshotReleased(f"{key}: {self._gone()}")
        frame = self.frames.get(key)
        if frame is None:
            raise TableNotFound(
                f"{key} is not in this snapshot (at source event {self.event_id}); "
                f"it holds {sorted(self.frames)}"
            )
        return frame

    def release(self) -> None:
        """Free the materialized blocks now rather than when the JVM collects the DataFrames. The
        frames it returned fail afterwards with :class:`SnapshotReleased` (frames derived from them
        earlier fail in Spark): they never re-read the replica."""
        if self._released:
            return
        drop(self.frames)
        self._released.append(True)
        for name, frame in self.frames.items():
            mark_released(frame, f"{name}: {self._gone()}")

    def _gone(self) -> str:
        return f"the snapshot at source event {self.event_id} was released; take a new snapshot"

    def __repr__(self) -> str:
        state = ", released" if self._released else ""
        tables = sorted(self.tables)
        return f"Snapshot(event_id={self.event_id}, tables={tables}, attempts={self.attempts}{state})"


def snapshot(
    spark: SparkSession,
    hms_uri: str,
    tables: Sequence[str],
    *,
    min_event_id: int | None = None,
    timeout: float = 60.0,
    poll_seconds: float = 0.2,
    where: Mapping[str, str] | None = None,
    watermark_db: str | None = None,
    warehouse_root: str | None = None,
    hms_auth: HmsAuth | None = None,
) -> Snapshot:
    """Read ``tables`` (``db.table`` names on the target) as one source state (docs/design/consistency.md).

    ``min_event_id`` waits until the state is at least that source event's; ``timeout`` bounds the
    whole call (waiting and retries) and raises :class:`SnapshotTimeout` naming the databases and
    ids. ``where`` maps a table to a SQL filter applied before materializing (less to hold).
    ``watermark_db`` is the target's ``--watermark-db`` (default: derived from the databases'
    source id); ``warehouse_root`` locates ACID replicas' visibility (default: two levels above the
    table's location). Raises :class:`TableNotFound` for a table absent in that state and
    :class:`SnapshotError` when no single source state covers the databases (one of them halted).
    """
    from streamer.metastore.thrift_catalog import HmsCatalog

    with HmsCatalog(hms_uri, auth=hms_auth) as catalog:
        return snapshot_from(
            spark, catalog, tables, min_event_id=min_event_id, timeout=timeout, poll_seconds=poll_seconds,
            where=where, watermark_db=watermark_db, warehouse_root=warehouse_root,
        )


def snapshot_from(
    spark: SparkSession,
    catalog: Catalog,
    tables: Sequence[str],
    *,
    min_event_id: int | None = None,
    timeout: float = 60.0,
    poll_seconds: float = 0.2,
    where: Mapping[str, str] | None = None,
    watermark_db: str | None = None,
    warehouse_root: str | None = None,
) -> Snapshot:
    """:func:`snapshot` through a catalog client the caller holds (not shared with other threads)."""
    names = list(dict.fromkeys(table_key(t) for t in tables))
    if not names:
        raise SnapshotError("snapshot needs at least one table")
    dbs = sorted({n.split(".", 1)[0] for n in names})
    filters = {table_key(k): v for k, v in (where or {}).items()}
    unknown = sorted(set(filters) - set(names))
    if unknown:
        raise SnapshotError(f"where names tables that are not read: {unknown}")
    deadline = time.monotonic() + timeout
    attempts = 0
    while True:
        attempts += 1
        last, pinned, before = _attempt(catalog, names, dbs, min_event_id, watermark_db, warehouse_root)
        if last.verdict is Verdict.FAIL:
            raise SnapshotError(f"cannot read {names} consistently: {last.reason}")
        if last.verdict is Verdict.MISSING:
            raise UnknownDatabase(f"cannot read {names}: {last.reason}")
        if last.verdict is Verdict.READ and pinned is not None:
            assert last.event_id is not None
            frames = materialize(spark, pinned, filters, last.event_id)
            if frames is not None:
                ids = {db: m.last_id for db, m in before.databases.items() if m.last_id is not None}
                return Snapshot(last.event_id, frames, {p.name: p for p in pinned}, ids, attempts)
            last = Decision(Verdict.RETRY, "a file read changed while it was materialized")
        log.debug("snapshot attempt %d of %s: %s", attempts, names, last.reason)
        if time.monotonic() >= deadline:
            raise SnapshotTimeout(
                f"no consistent read of {names} within {timeout:g} s ({attempts} attempts): {last.reason}"
            )
        pause = poll_seconds if last.verdict is Verdict.WAIT else poll_seconds / 4
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))


def _attempt(
    catalog: Catalog,
    names: Sequence[str],
    dbs: Sequence[str],
    min_event_id: int | None,
    watermark_db: str | None,
    warehouse_root: str | None,
) -> tuple[Decision, list[PinnedTable] | None, Marks]:
    before = read_marks(catalog, dbs, watermark_db)
    early = decide_marks(before, dbs, min_event_id)
    if early.verdict is not Verdict.READ:
        return early, None, before
    try:
        first = [resolve(catalog, name, warehouse_root) for name in names]
        second = [resolve(catalog, name, warehouse_root) for name in names]
    except Raced as exc:
        return Decision(Verdict.RETRY, str(exc)), None, before
    after = read_marks(catalog, dbs, watermark_db)
    decision = decide(before, after, first, second, dbs, min_event_id)
    if decision.verdict is Verdict.READ:
        for table in first:
            if table.table is not None:
                continue
            db = table.name.split(".", 1)[0]
            if not before.databases[db].exists:
                raise UnknownDatabase(
                    f"database {db} (of {table.name}) does not exist on the target at source event "
                    f"{decision.event_id}: no replica of it (check the name and the source's --policy)"
                )
            raise TableNotFound(f"table {table.name} does not exist at source event {decision.event_id}")
    return decision, first, before

