"""Reading a replica consistently: several tables as of one source event id, as Spark DataFrames.

:func:`snapshot` reads the published watermark and the databases' ``repl.last.id``, resolves every
table (metadata, partitions, exact data files) twice and reads the ids again, retrying until both
readings agree: one source prefix. It then materializes exactly the resolved files and checks that
they did not change meanwhile. Protocol, cost and what ``event_id`` promises: docs/design/consistency.md.
"""

from __future__ import annotations

import enum
import logging
import posixpath
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fsspec import AbstractFileSystem

from streamer.errors import StreamerError
from streamer.events.model import TableSnapshot
from streamer.filesystems import url_to_fs
from streamer.hive.files import is_hidden, parse_partition_name, partition_name
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM, Catalog
from streamer.metastore.transport import HmsAuth
from streamer.target.job.watermark import Watermark, default_watermark_db, from_parameters
from streamer.target.state.visibility import is_acid_replica, load_visibility
from streamer.target.state.visibility import table_key as acid_key
from streamer.target.table_reader import visible_dirs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

__all__ = [
    "PinnedFile",
    "PinnedTable",
    "Snapshot",
    "SnapshotError",
    "SnapshotTimeout",
    "TableNotFound",
    "snapshot",
    "snapshot_from",
]

UNPARTITIONED = ""  # the partition name of an unpartitioned table's files
_FORMATS = {"parquet": "parquet", "orc": "orc"}


class SnapshotError(StreamerError):
    """The tables cannot be read as one source state; the message says which database and why."""


class SnapshotTimeout(SnapshotError):
    """No consistent read (or not the wanted ``min_event_id``) within the timeout."""


class TableNotFound(SnapshotError):
    """A requested table does not exist in the snapshot's source state."""


# --- what a reader resolves ----------------------------------------------------------------------


@dataclass(frozen=True)
class DbMark:
    """One target database as a reader sees it: present, its ``repl.last.id`` and source."""

    exists: bool
    last_id: int | None = None
    source_id: str | None = None


@dataclass(frozen=True)
class Marks:
    """The watermark record and the involved databases' marks, read together."""

    watermark: Watermark | None
    databases: Mapping[str, DbMark]


@dataclass(frozen=True)
class PinnedFile:
    """One data file a snapshot read: where, and the identity that proves it is the same file."""

    relative: str  # path below its partition (or table) directory, ACID directory included
    url: str
    size: int
    identity: tuple[Any, ...]  # (size, modification time, inode) as the filesystem reports them


@dataclass(frozen=True)
class PinnedTable:
    """A table resolved at the snapshot's cut: its metastore snapshot and exact files per partition.

    ``partitions`` maps the Hive partition name (``""`` for an unpartitioned table) to its files;
    ``locations`` to its directory. ``write_ids`` are the committed write ids of an ACID replica
    (None for other tables). ``table`` None: the table does not exist at the cut.
    """

    name: str
    table: TableSnapshot | None
    partitions: Mapping[str, tuple[PinnedFile, ...]] = field(default_factory=dict)
    locations: Mapping[str, str] = field(default_factory=dict)
    write_ids: tuple[int, ...] | None = None

    def files(self) -> list[PinnedFile]:
        return [f for files in self.partitions.values() for f in files]


# --- the retry decision (pure) ----------------------------------------------------------------


class Verdict(enum.Enum):
    READ = "read"  # a consistent cut: read (or accept) it
    RETRY = "retry"  # an apply raced the read: read again at once
    WAIT = "wait"  # not there yet (watermark below min_event_id, or not published): wait, read again
    FAIL = "fail"  # no waiting helps (a halted database below min_event_id, mixed watermarks)


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""
    event_id: int | None = None


def decide_marks(marks: Marks, dbs: Sequence[str], min_event_id: int | None = None) -> Decision:
    """Whether marks read before and after a read of tables of ``dbs`` allow it, and the event id
    it shows at least: the databases' watermark, or a newer ``repl.last.id`` among them (mid-batch,
    every step up to that id is applied, in order, across databases)."""
    mark = marks.watermark
    if mark is None:
        if not any(m.exists for m in marks.databases.values()):
            return Decision(Verdict.WAIT, f"none of the databases {sorted(dbs)} exists on the target yet")
        return Decision(
            Verdict.WAIT, "no watermark is published yet (is the target job running, with a --watermark-db?)"
        )
    present: dict[str, int] = {}
    for db in dbs:
        seen = marks.databases.get(db, DbMark(False))
        if not seen.exists:
            continue  # its tables are absent: true at any event id after the database's drop
        if seen.last_id is None or seen.source_id is None:
            return Decision(Verdict.FAIL, f"database {db} is not a replica (it has no {LAST_ID_PARAM})")
        if mark.source_id and seen.source_id != mark.source_id:
            text = f"database {db} is replicated from source {seen.source_id!r}, not {mark.source_id!r}"
            return Decision(Verdict.FAIL, text)
        present[db] = seen.last_id
    halted = sorted(db for db in present if db in mark.halted)
    if halted:
        db = halted[0]
        known = mark.of(db)
        pinned = present[db] if known is None else known
        if len(present) > 1:
            others = ", ".join(sorted(set(present) - {db}))
            text = (
                f"database {db} is halted at event {pinned} while {others} went on: no single source state "
                "covers them; read the halted database on its own"
            )
            return Decision(Verdict.FAIL, text)
        if present[db] > pinned:
            return Decision(Verdict.RETRY, f"database {db} is being re-applied after its halt at {pinned}")
        event_id = pinned
    else:
        # no read database is halted: every step up to the global watermark (a batch's end) and up
        # to each read database's watermark and repl.last.id is applied, steps being in order
        marked = [w for db in present if (w := mark.of(db)) is not None]
        if mark.consistency == "database" and len(present) > 1:
            # lanes move databases independently within a batch: only at a batch's end (every read
            # database at or below its watermark, so no step of the running batch touched it) do
            # several databases show one source state
            ahead = sorted(db for db, i in present.items() if i > _db_mark(mark, db))
            if ahead:
                text = (f"--consistency database: {', '.join(ahead)} moved past the watermark in the batch "
                        "being applied; waiting for the batch's end")
                return Decision(Verdict.RETRY, text)
            event_id = max([mark.event_id, *marked])
        else:
            event_id = max([mark.event_id, *marked, *present.values()])
    if min_event_id is not None and event_id < min_event_id:
        if halted:
            text = f"database {halted[0]} is halted at event {event_id}, below min_event_id {min_event_id}"
            return Decision(Verdict.FAIL, text, event_id)
        where = ", ".join(f"{db} repl.last.id {i} watermark {mark.of(db)}" for db, i in present.items())
        text = f"waiting for event {min_event_id}: the tables reflect event {event_id}"
        return Decision(Verdict.WAIT, f"{text} ({where})" if where else text, event_id)
    return Decision(Verdict.READ, event_id=event_id)


def _db_mark(mark: Watermark, db: str) -> int:
    own = mark.of(db)
    return mark.event_id if own is None else own


def decide(
    before: Marks,
    after: Marks,
    first: Sequence[PinnedTable],
    second: Sequence[PinnedTable],
    dbs: Sequence[str],
    min_event_id: int | None = None,
) -> Decision:
    """The verdict on one attempt: marks read before and after, tables resolved twice in between."""
    if before != after:
        return Decision(Verdict.RETRY, "the watermark or a repl.last.id moved during the read")
    if list(first) != list(second):
        changed = [a.name for a, b in zip(first, second, strict=True) if a != b]
        return Decision(Verdict.RETRY, f"tables changed between two resolutions: {changed}")
    return decide_marks(before, dbs, min_event_id)


# --- the result ------------------------------------------------------------------------------


@dataclass(frozen=True)
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

    def __getitem__(self, name: str) -> DataFrame:
        return self.frames[_key(name)]

    def release(self) -> None:
        """Free the materialized blocks now rather than when the JVM collects the DataFrames; the
        DataFrames (and any derived from them) fail afterwards, they never re-read the replica."""
        _drop(self.frames)


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
    names = list(dict.fromkeys(_key(t) for t in tables))
    if not names:
        raise SnapshotError("snapshot needs at least one table")
    dbs = sorted({n.split(".", 1)[0] for n in names})
    filters = {_key(k): v for k, v in (where or {}).items()}
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
        if last.verdict is Verdict.READ and pinned is not None:
            assert last.event_id is not None
            frames = _materialize(spark, pinned, filters, last.event_id)
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
    except _Raced as exc:
        return Decision(Verdict.RETRY, str(exc)), None, before
    after = read_marks(catalog, dbs, watermark_db)
    decision = decide(before, after, first, second, dbs, min_event_id)
    if decision.verdict is Verdict.READ:
        for table in first:
            if table.table is None:
                raise TableNotFound(f"table {table.name} does not exist at source event {decision.event_id}")
    return decision, first, before


# --- reading the catalog and the filesystem ------------------------------------------------------


def read_marks(catalog: Catalog, dbs: Iterable[str], watermark_db: str | None = None) -> Marks:
    """The watermark record and the marks of ``dbs``; the record's database is ``watermark_db`` or
    the one named after the databases' source (``streamer_watermark_<source id>``)."""
    marks: dict[str, DbMark] = {}
    for db in dbs:
        snap = catalog.get_database(db)
        if snap is None:
            marks[db] = DbMark(False)
            continue
        raw = snap.parameters.get(LAST_ID_PARAM)
        last_id = int(raw) if raw is not None and raw.strip().isdigit() else None
        marks[db] = DbMark(True, last_id, snap.parameters.get(REPL_SOURCE_PARAM))
    name = watermark_db
    if name is None:
        sources = sorted({m.source_id for m in marks.values() if m.source_id})
        if len(sources) > 1:
            raise SnapshotError(f"the databases are replicated from sources {sources}: no common watermark")
        name = default_watermark_db(sources[0]) if sources else None
    record = catalog.get_database(name) if name else None
    try:
        watermark = from_parameters(record.parameters) if record is not None else None
    except ValueError as exc:
        raise SnapshotError(f"watermark database {name}: {exc}") from exc
    return Marks(watermark, marks)


class _Raced(StreamerError):
    """The metastore changed between two calls of one resolution: read again."""


def resolve(catalog: Catalog, name: str, warehouse_root: str | None = None) -> PinnedTable:
    """The table's metastore snapshot and its exact visible files, now (no consistency of its own)."""
    db, table = name.split(".", 1)
    snap = catalog.get_table(db, table)
    if snap is None:
        return PinnedTable(name, None)
    if snap.table_type.upper() in ("VIRTUAL_VIEW", "MATERIALIZED_VIEW"):
        raise SnapshotError(f"{name} is a view: snapshot reads tables (read the tables the view reads)")
    write_ids: tuple[int, ...] | None = None
    if is_acid_replica(snap.parameters):
        if not snap.sd.location:
            raise SnapshotError(f"{name}: the ACID replica has no location")
        root = warehouse_root or posixpath.dirname(posixpath.dirname(snap.sd.location.rstrip("/")))
        write_ids = tuple(load_visibility(root).write_ids(acid_key(db, table)))
    locations: dict[str, str] = {}
    if snap.partition_keys:
        keys = [k.name.lower() for k in snap.partition_keys]
        for part in catalog.list_partitions(db, table):
            if len(part.values) != len(keys):
                raise _Raced(f"{name}: partition {part.values} does not fit keys {keys} (replaced meanwhile)")
            locations[_partition_name(keys, part.values)] = part.sd.location or ""
    else:
        locations[UNPARTITIONED] = snap.sd.location or ""
    partitions = {
        part: tuple(_list_files(location, write_ids, f"{name}/{part}".rstrip("/")))
        for part, location in sorted(locations.items())
    }
    return PinnedTable(name, snap, partitions, dict(sorted(locations.items())), write_ids)


def _partition_name(keys: Sequence[str], values: Sequence[str]) -> str:
    return partition_name(list(keys), list(values))


def _list_files(location: str, write_ids: Sequence[int] | None, obj: str) -> list[PinnedFile]:
    """Visible files below ``location`` (hidden ``.``/``_`` names skipped at every level); for an
    ACID replica only below the directories its committed write ids make visible."""
    if not location:
        return []
    fs, root = url_to_fs(location)
    root = root.rstrip("/")
    base = location.rstrip("/")
    entries = _ls(fs, root)
    if write_ids is not None:
        names = [_name(e) for e in entries if e["type"] == "directory"]
        chosen = set(visible_dirs(names, set(write_ids), obj))
        entries = [e for e in entries if e["type"] == "directory" and _name(e) in chosen]
    out: list[PinnedFile] = []
    stack = [(e, "") for e in entries]
    while stack:
        entry, rel_dir = stack.pop()
        name = _name(entry)
        if is_hidden(name):
            continue
        rel = f"{rel_dir}/{name}" if rel_dir else name
        if entry["type"] == "directory":
            stack.extend((child, rel) for child in _ls(fs, str(entry["name"])))
        else:
            out.append(PinnedFile(rel, f"{base}/{rel}", int(entry.get("size") or 0), _identity(entry)))
    return sorted(out, key=lambda f: f.relative)


def _ls(fs: AbstractFileSystem, path: str) -> list[dict[str, Any]]:
    try:
        return list(fs.ls(path, detail=True))
    except FileNotFoundError:
        return []  # gone: the table or partition was dropped or replaced (the second resolution tells)


def _name(entry: Mapping[str, Any]) -> str:
    return posixpath.basename(str(entry["name"]).rstrip("/"))


def _identity(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    mtime = entry.get("mtime", entry.get("LastModified", entry.get("last_modified")))
    return (entry.get("size"), str(mtime), entry.get("ino"))


def still_there(files: Iterable[PinnedFile]) -> bool:
    """Whether every file is still the one resolved (same size, modification time, inode)."""
    for f in files:
        fs, path = url_to_fs(f.url)
        try:
            info = fs.info(path)
        except FileNotFoundError:
            return False
        if _identity(info) != f.identity:
            return False
    return True


# --- Spark ----------------------------------------------------------------------------------------


def _materialize(
    spark: SparkSession, pinned: Sequence[PinnedTable], filters: Mapping[str, str], event_id: int
) -> dict[str, DataFrame] | None:
    """Each table read from exactly its pinned files into Spark's block store; None when one of a
    table's files changed while that table was read (the attempt raced an apply: the blocks are
    dropped and the caller reads again). Each table's files need to survive only its own read."""
    frames: dict[str, DataFrame] = {}
    for table in pinned:
        try:
            df = _frame(spark, table, event_id)
            if table.name in filters:
                df = df.where(filters[table.name])
            # small files would each be a task: hold ~128 MiB per partition (no shuffle)
            parts = max(1, -(-sum(f.size for f in table.files()) // (128 << 20)))
            frames[table.name] = df.coalesce(parts).localCheckpoint(eager=True)
        except Exception as exc:
            if still_there(table.files()):
                _drop(frames)
                raise
            log.debug("reading %s raced an apply: %s", table.name, exc)
            _drop(frames)
            return None
        if not still_there(table.files()):
            _drop(frames)
            return None
    return frames


def _drop(frames: Mapping[str, DataFrame]) -> None:
    """Remove locally checkpointed frames' blocks (``DataFrame.unpersist`` does not touch them)."""
    for frame in frames.values():
        plan = frame._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)


def _frame(spark: SparkSession, table: PinnedTable, event_id: int) -> DataFrame:
    """A DataFrame over exactly the pinned files: data columns, then partition keys (typed)."""
    from pyspark.sql import functions as F

    snap = table.table
    assert snap is not None
    fmt = _format(snap)
    data = [(c.name.lower(), c.type) for c in snap.sd.columns]
    keys = [(c.name.lower(), c.type) for c in snap.partition_keys]
    ddl = ", ".join(f"`{c}` {t}" for c, t in data + keys)
    names = [f"`{c}`" for c, _ in data + keys]
    files = {part: [f.url for f in fs] for part, fs in table.partitions.items() if fs}
    if not files:
        return spark.createDataFrame([], ddl)
    if not keys:
        return spark.read.schema(ddl).format(fmt).load(files[UNPARTITIONED]).select(*names)
    base = (snap.sd.location or "").rstrip("/")
    if base and all(table.locations[p].rstrip("/") == f"{base}/{p}" for p in files):
        paths = [u for urls in files.values() for u in urls]
        return spark.read.schema(ddl).option("basePath", base).format(fmt).load(paths).select(*names)
    # partitions outside the table's directory: read each, its key values as typed literals
    data_ddl = ", ".join(f"`{c}` {t}" for c, t in data)
    frames = []
    for part, urls in sorted(files.items()):
        values = parse_partition_name(part)
        df = spark.read.schema(data_ddl).format(fmt).load(urls)
        for key, kind in keys:
            df = df.withColumn(key, F.lit(values[key]).cast(kind))
        frames.append(df.select(*names))
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def _format(snap: TableSnapshot) -> str:
    text = " ".join(x or "" for x in (snap.sd.input_format, snap.sd.serde.serialization_lib)).lower()
    for marker, fmt in _FORMATS.items():
        if marker in text:
            return fmt
    raise SnapshotError(
        f"{snap.db}.{snap.name}: snapshot reads Parquet and ORC tables, not {snap.sd.input_format!r}"
    )


def _key(name: str) -> str:
    parts = [p.strip().strip("`").lower() for p in name.strip().split(".")]
    if len(parts) != 2 or not all(parts):
        raise SnapshotError(f"table name {name!r} must be 'db.table'")
    return f"{parts[0]}.{parts[1]}"
