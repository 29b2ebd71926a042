"""The consistent multi-table read: :func:`snapshot` and the :class:`Snapshot` it returns."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from streamer.metastore.catalog import Catalog
from streamer.metastore.transport import HmsAuth
from streamer.read.decision import Decision, Verdict, decide, decide_marks
from streamer.read.errors import (
    SnapshotError,
    SnapshotExpired,
    SnapshotReleased,
    SnapshotTimeout,
    TableNotFound,
    UnknownDatabase,
)
from streamer.read.frames import drop, mark_released
from streamer.read.frames import materialize as read_frames
from streamer.read.model import Marks, PinnedFile, PinnedTable, table_key
from streamer.read.races import refuse_lazy
from streamer.read.resolve import Raced, first_changed, read_marks, resolve

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class _State:
    """What changes over a snapshot's life: why it is refused (released or expired), its temp views."""

    refused: str | None = None
    error: type[SnapshotReleased] = SnapshotReleased
    views: list[tuple[SparkSession, str]] = field(default_factory=list)


@dataclass(frozen=True, repr=False, eq=False)
class Snapshot(Mapping[str, "DataFrame"]):
    """Tables of one source state as of ``event_id``: a read-only mapping of ``db.table`` to DataFrame.

    ``frames`` are materialized (held in Spark's block store, valid however long they are kept) or,
    with ``materialized`` False (``snapshot(..., materialize=False)``), plans over exactly the pinned
    files, valid while the target leaves those files in place: read them through :meth:`read`.
    ``tables`` say exactly what was read (metastore snapshot, files); ``last_ids`` the
    ``repl.last.id`` of each involved database that exists; ``attempts`` how many reads it took
    (races with apply steps, waits). A context manager: leaving it releases the snapshot.
    """

    event_id: int
    frames: Mapping[str, DataFrame]
    tables: Mapping[str, PinnedTable]
    last_ids: Mapping[str, int]
    attempts: int
    materialized: bool = True
    _state: _State = field(default_factory=_State)

    @property
    def released(self) -> bool:
        """Released or expired: its frames and views are gone."""
        return self._state.refused is not None

    @property
    def expired(self) -> bool:
        """A snapshot of ``materialize=False`` whose pinned file the target replaced or removed."""
        return self._state.error is SnapshotExpired

    def __getitem__(self, name: str) -> DataFrame:
        key = table_key(name)
        self._refuse(key)
        frame = self.frames.get(key)
        if frame is None:
            raise TableNotFound(
                f"{key} is not in this snapshot (at source event {self.event_id}); "
                f"it holds {sorted(self.frames)}"
            )
        return frame

    def __iter__(self) -> Iterator[str]:
        return iter(self.frames)

    def __len__(self) -> int:
        return len(self.frames)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            return table_key(name) in self.frames
        except SnapshotError:  # not a db.table name
            return False

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def register_temp_views(
        self, *, prefix: str = "", names: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Make each table queryable from Spark SQL as a temporary view of the snapshot's session,
        named ``<prefix><db>__<table>`` unless ``names`` maps it (``{"sales.orders": "orders"}``);
        returns table -> view. The views are dropped when the snapshot is released or expires. SQL
        over a ``materialize=False`` snapshot's views is checked only through :meth:`read`."""
        chosen = {table_key(k): v for k, v in (names or {}).items()}
        unknown = sorted(set(chosen) - set(self.frames))
        if unknown:
            raise TableNotFound(f"names maps tables this snapshot does not hold: {unknown}; it holds "
                                f"{sorted(self.frames)}")
        out: dict[str, str] = {}
        for key in self.frames:
            self._refuse(key)
            frame = self.frames[key]
            db, table = key.split(".", 1)
            view = chosen.get(key, f"{prefix}{db}__{table}")
            frame.createOrReplaceTempView(view)
            self._state.views.append((frame.sparkSession, view))
            out[key] = view
        return out

    def read(self, query: Callable[[], T]) -> T:
        """Run ``query`` over the snapshot's frames or views and return its result.

        For a ``materialize=False`` snapshot this is what makes the result the snapshot's state: the
        result must be data (a lazy DataFrame is refused with ``TypeError``), and afterwards every
        pinned file must still be the one pinned (then Spark read exactly those); if the target
        replaced or removed one, or a pinned file vanished under the query, the snapshot expires and
        :class:`SnapshotExpired` is raised (take a new one). A materialized snapshot just runs it."""
        self._refuse("read")
        if self.materialized:
            return query()
        try:
            result = query()
        except Exception as exc:
            changed = self._changed()
            if changed is not None:
                raise self._expire(*changed) from exc
            raise  # not a race: every pinned file is as pinned
        refuse_lazy(result, "Snapshot.read")
        self.check()
        return result

    def check(self) -> None:
        """Raise :class:`SnapshotExpired` when a ``materialize=False`` snapshot lost a pinned file
        (the target replaced or removed it); after that every use of it is refused. A materialized
        snapshot has nothing to check."""
        self._refuse("check")
        if self.materialized:
            return
        changed = self._changed()
        if changed is not None:
            raise self._expire(*changed)

    def release(self) -> None:
        """Free the materialized blocks now rather than when the JVM collects the DataFrames, and drop
        the temporary views. The frames it returned fail afterwards with :class:`SnapshotReleased`
        (frames derived from them earlier fail in Spark): they never re-read the replica."""
        if self._state.refused is not None:
            return
        self._close(self._gone(), SnapshotReleased)

    def _close(self, message: str, error: type[SnapshotReleased]) -> None:
        drop(self.frames)
        self._state.refused, self._state.error = message, error
        for session, view in self._state.views:
            session.catalog.dropTempView(view)
        self._state.views.clear()
        for name, frame in self.frames.items():
            mark_released(frame, f"{name}: {message}", error)

    def _changed(self) -> tuple[str, PinnedFile] | None:
        for name, table in self.tables.items():
            gone = first_changed(table.files())
            if gone is not None:
                return name, gone
        return None

    def _expire(self, name: str, gone: PinnedFile) -> SnapshotExpired:
        message = (f"the target replaced or removed {gone.url} ({name}) since the snapshot at source event "
                   f"{self.event_id} (materialize=False): it no longer reads that state; take a new snapshot")
        self._close(message, SnapshotExpired)
        return SnapshotExpired(message)

    def _refuse(self, what: str) -> None:
        if self._state.refused is not None:
            raise self._state.error(f"{what}: {self._state.refused}")

    def _gone(self) -> str:
        return f"the snapshot at source event {self.event_id} was released; take a new snapshot"

    def __repr__(self) -> str:
        lazy = "" if self.materialized else ", materialize=False"
        state = ""
        if self._state.refused is not None:
            state = ", expired" if self.expired else ", released"
        tables = sorted(self.tables)
        return f"Snapshot(event_id={self.event_id}, tables={tables}, attempts={self.attempts}{lazy}{state})"


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
    materialize: bool = True,
) -> Snapshot:
    """Read ``tables`` (``db.table`` names on the target) as one source state (docs/design/consistency.md).

    ``min_event_id`` waits until the state is at least that source event's; ``timeout`` bounds the
    whole call (waiting and retries) and raises :class:`SnapshotTimeout` naming the databases and
    ids. ``where`` maps a table to a SQL filter applied before materializing (less to hold).
    ``watermark_db`` is the target's ``--watermark-db`` (default: derived from the databases'
    source id); ``warehouse_root`` locates ACID replicas' visibility (default: two levels above the
    table's location). Raises :class:`TableNotFound` for a table absent in that state and
    :class:`SnapshotError` when no single source state covers the databases (one of them halted).

    ``materialize`` False skips reading the tables into Spark's block store: the frames read exactly
    the pinned files at each action, which is consistent only while the target leaves those files in
    place; use :meth:`Snapshot.read`, which checks that and raises :class:`SnapshotExpired` when not.
    """
    from streamer.metastore.thrift import HmsCatalog

    with HmsCatalog(hms_uri, auth=hms_auth) as catalog:
        return snapshot_from(
            spark, catalog, tables, min_event_id=min_event_id, timeout=timeout, poll_seconds=poll_seconds,
            where=where, watermark_db=watermark_db, warehouse_root=warehouse_root, materialize=materialize,
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
    materialize: bool = True,
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
            frames = read_frames(spark, pinned, filters, last.event_id, hold=materialize)
            if frames is not None:
                ids = {db: m.last_id for db, m in before.databases.items() if m.last_id is not None}
                held = {p.name: p for p in pinned}
                return Snapshot(last.event_id, frames, held, ids, attempts, materialize)
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

