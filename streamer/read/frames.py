"""Spark's side of a snapshot: each pinned table read from exactly its files into the block store."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from streamer.events.model import TableSnapshot
from streamer.hive.files import parse_partition_name
from streamer.read.errors import SnapshotError, SnapshotReleased
from streamer.read.model import UNPARTITIONED, PinnedTable
from streamer.read.resolve import still_there

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

_FORMATS = {"parquet": "parquet", "orc": "orc"}


def materialize(
    spark: SparkSession,
    pinned: Sequence[PinnedTable],
    filters: Mapping[str, str],
    event_id: int,
    hold: bool = True,
) -> dict[str, DataFrame] | None:
    """Each table read from exactly its pinned files into Spark's block store; None when one of a
    table's files changed while that table was read (the attempt raced an apply: the blocks are
    dropped and the caller reads again). Each table's files need to survive only its own read.

    ``hold`` False builds the DataFrames over the pinned files without reading them (Spark checks
    only that the files exist): they read the replica's files at each action, see ``Snapshot.read``."""
    frames: dict[str, DataFrame] = {}
    for table in pinned:
        try:
            df = _frame(spark, table, event_id)
            if table.name in filters:
                df = df.where(filters[table.name])
            if hold:
                # small files would each be a task: hold ~128 MiB per partition (no shuffle)
                parts = max(1, -(-sum(f.size for f in table.files()) // (128 << 20)))
                df = df.coalesce(parts).localCheckpoint(eager=True)
            frames[table.name] = df
        except Exception as exc:
            if still_there(table.files()):
                drop(frames)
                raise
            log.debug("reading %s raced an apply: %s", table.name, exc)
            drop(frames)
            return None
        if not still_there(table.files()):
            drop(frames)
            return None
    return frames


def drop(frames: Mapping[str, DataFrame]) -> None:
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


def mark_released(
    frame: DataFrame, message: str, error: type[SnapshotReleased] = SnapshotReleased
) -> None:
    """Make every later use of ``frame`` raise ``error`` (:class:`SnapshotReleased`) with ``message``
    instead of Spark's error about missing checkpoint blocks or files (a Java stack trace naming no
    table), or, for a frame over the replica's files, rows of files the target wrote since."""
    base = type(frame)
    if issubclass(base, _ReleasedMixin):
        return
    released = _RELEASED.get(base)
    if released is None:
        released = _RELEASED[base] = type(f"Released{base.__name__}", (_ReleasedMixin, base), {})
    frame.__dict__["_streamer_released"] = (error, message)
    frame.__class__ = released


class _ReleasedMixin:
    """Put in front of a released frame's class: every attribute is refused with the reason."""

    def __getattribute__(self, name: str) -> Any:
        if name in ("__class__", "__dict__"):
            return object.__getattribute__(self, name)
        error, message = object.__getattribute__(self, "__dict__")["_streamer_released"]
        raise error(message)

    def __repr__(self) -> str:
        message = object.__getattribute__(self, "__dict__")["_streamer_released"][1]
        return f"<released snapshot frame: {message}>"


_RELEASED: dict[type, type] = {}
