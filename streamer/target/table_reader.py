"""Reading ACID replicas correctly from Spark: exactly the rows of committed write ids.

``read_table`` hands Spark only the ``base_W``/``delta_W_W[_S]`` directories the visibility file of
the table's source makes visible (as Hive's ``AcidUtils.getAcidState`` chooses them); other tables
are read with ``spark.table``. Data files are read as Parquet; delete deltas raise ``ReadError``.
See docs/design/consistency.md.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamer.errors import StreamerError
from streamer.filesystems import url_to_fs
from streamer.metastore.transport import HmsAuth
from streamer.target.state.visibility import ACID_PARAM, VisibilitySnapshot, is_acid_replica

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_DELTA = re.compile(r"^(delta|delete_delta)_(\d+)_(\d+)(?:_(\d+))?$")
_BASE = re.compile(r"^base_(\d+)(?:_v(\d+))?$")


class ReadError(StreamerError):
    """An ACID replica cannot be read consistently; the message names the table and why."""


# --- Hive's ACID directory rules (pure) --------------------------------------------------------


@dataclass(frozen=True)
class AcidDir:
    """A first-level directory of an ACID table or partition: ``base_W`` or ``[delete_]delta_LO_HI[_S]``."""

    name: str
    kind: str  # "base", "delta", "delete_delta"
    min_write_id: int
    max_write_id: int


def parse_acid_dir(name: str) -> AcidDir | None:
    """The ACID directory ``name`` stands for, or None (Hive ignores other names)."""
    m = _DELTA.match(name)
    if m:
        lo, hi = int(m.group(2)), int(m.group(3))
        return AcidDir(name, m.group(1), lo, hi) if lo <= hi else None
    m = _BASE.match(name)
    if m:
        return AcidDir(name, "base", 0, int(m.group(1)))
    return None


def visible_dirs(names: Iterable[str], committed: Collection[int], obj: str = "") -> list[str]:
    """The directories a reader with this committed write-id set reads, in write-id order.

    The newest base whose write id is committed, then the deltas above it whose write ids are all
    committed, each range once: a delta inside an already chosen range (compacted into it) is
    skipped, several statements of one range are all read. Anything of an aborted or open write id,
    and everything under the base, is skipped.
    """
    dirs = [d for n in names if (d := parse_acid_dir(n)) is not None]
    bases = [d for d in dirs if d.kind == "base" and d.max_write_id in committed]
    best = max(bases, key=lambda d: (d.max_write_id, d.name), default=None)
    current = best.max_write_id if best else 0
    out = [best.name] if best else []
    last: tuple[int, int] | None = None
    for d in sorted(dirs, key=lambda d: (d.min_write_id, -d.max_write_id, d.name)):
        if d.kind == "base":
            continue
        if not all(w in committed for w in range(d.min_write_id, d.max_write_id + 1)):
            continue
        same_range = last == (d.min_write_id, d.max_write_id)
        if d.max_write_id <= current and not same_range:
            continue
        if d.kind == "delete_delta":
            raise ReadError(f"{obj}/{d.name}: delete deltas are not supported by this reader")
        out.append(d.name)
        current, last = max(current, d.max_write_id), (d.min_write_id, d.max_write_id)
    return out


# --- layout on the filesystem ------------------------------------------------------------------


def committed_layout(location: str, committed: Collection[int], n_keys: int) -> dict[str, list[str]]:
    """Visible ACID directories per partition name (``""`` unpartitioned) under a table location.

    Partition directories are found by listing ``n_keys`` levels of ``k=v`` names (hidden names
    skipped); a partition without committed data maps to an empty list.
    """
    fs, root = url_to_fs(location)
    root = root.rstrip("/")
    out: dict[str, list[str]] = {}

    def walk(path: str, rel: str, depth: int) -> None:
        try:
            entries = fs.ls(path, detail=True)
        except FileNotFoundError:
            return
        dirs = [posixpath.basename(str(e["name"]).rstrip("/")) for e in entries if e["type"] == "directory"]
        dirs = [d for d in dirs if not d.startswith((".", "_"))]
        if depth == n_keys:
            out[rel] = visible_dirs(dirs, committed, f"{location}/{rel}".rstrip("/"))
            return
        for d in sorted(dirs):
            if "=" in d:
                walk(f"{path}/{d}", f"{rel}/{d}" if rel else d, depth + 1)

    walk(root, "", 0)
    return out


def committed_write_ids(layout: Mapping[str, Sequence[str]]) -> dict[str, list[int]]:
    """Write ids whose data a reader sees, per partition (the checker's ``write_ids`` input)."""
    out: dict[str, list[int]] = {}
    for part, names in layout.items():
        ids: set[int] = set()
        for name in names:
            d = parse_acid_dir(name)
            if d is not None and d.kind != "base":
                ids.update(range(d.min_write_id, d.max_write_id + 1))
            elif d is not None:
                ids.add(d.max_write_id)
        out[part] = sorted(ids)
    return out


# --- Spark ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TableInfo:
    location: str
    params: dict[str, str]
    columns: list[tuple[str, str]]  # (name, Hive/Spark type) data columns, then partition keys
    partition_keys: list[str]


def read_table(
    spark: SparkSession,
    name: str,
    *,
    warehouse_root: str | None = None,
    hms_uri: str | None = None,
    hms_auth: HmsAuth | None = None,
    visibility: VisibilitySnapshot | None = None,
) -> DataFrame:
    """Exactly the committed rows of ``db.table`` on a target.

    ``warehouse_root`` is the target's warehouse root (default: two levels above the table's
    location, which is where the target derives every managed table). ``hms_uri`` reads the
    table's metadata from that metastore instead of Spark's catalog (for a session not attached to
    the target metastore; ``hms_auth`` for a Kerberos metastore). To read several tables at one
    instant, make one ``streamer.target.state.visibility.VisibilitySnapshot(warehouse_root)`` and pass it
    as ``visibility`` to each call (it reads each source's visibility file once).
    """
    db, table = _split(name)
    info = _info_from_hms(hms_uri, db, table, hms_auth) if hms_uri else _info_from_spark(spark, db, table)
    if not is_acid_replica(info.params):
        return spark.table(f"`{db}`.`{table}`")
    root = warehouse_root or posixpath.dirname(posixpath.dirname(info.location.rstrip("/")))
    state = visibility if visibility is not None else VisibilitySnapshot(root)
    committed = set(state.write_ids(db, table, info.params))
    layout = committed_layout(info.location, committed, len(info.partition_keys))
    base = info.location.rstrip("/")
    paths = [f"{base}/{part}/{d}" if part else f"{base}/{d}" for part, dirs in layout.items() for d in dirs]
    ddl = ", ".join(f"`{c}` {t}" for c, t in info.columns)
    if not paths:
        return spark.createDataFrame([], ddl)
    names = [f"`{c}`" for c, _ in info.columns]
    return spark.read.schema(ddl).option("basePath", base).parquet(*paths).select(*names)


def _split(name: str) -> tuple[str, str]:
    parts = name.strip().strip("`").split(".")
    if len(parts) != 2 or not all(parts):
        raise ReadError(f"table name {name!r} must be 'db.table'")
    return parts[0].strip("`").lower(), parts[1].strip("`").lower()


def _info_from_spark(spark: SparkSession, db: str, table: str) -> _TableInfo:
    quoted = f"`{db}`.`{table}`"
    params = {str(r[0]): str(r[1]) for r in spark.sql(f"SHOW TBLPROPERTIES {quoted}").collect()}
    cols = spark.catalog.listColumns(f"{db}.{table}")
    data = [(c.name, c.dataType) for c in cols if not c.isPartition]
    keys = [(c.name, c.dataType) for c in cols if c.isPartition]
    location = ""
    if is_acid_replica(params):
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {quoted}").collect()
        location = next((str(r[1]) for r in rows if str(r[0]).strip() == "Location"), "")
        if not location:
            raise ReadError(f"{db}.{table}: Spark's catalog reports no location for this {ACID_PARAM} table")
    return _TableInfo(location, params, data + keys, [k for k, _ in keys])


def _info_from_hms(uri: str, db: str, table: str, auth: HmsAuth | None) -> _TableInfo:
    from streamer.metastore.thrift import HmsCatalog

    with HmsCatalog(uri, auth=auth) as catalog:
        snap = catalog.get_table(db, table)
    if snap is None:
        raise ReadError(f"table {db}.{table} does not exist in the metastore at {uri}")
    if is_acid_replica(snap.parameters) and not snap.sd.location:
        raise ReadError(f"{db}.{table}: the metastore at {uri} reports no location")
    cols = [(c.name, c.type) for c in snap.sd.columns] + [(c.name, c.type) for c in snap.partition_keys]
    keys = [c.name for c in snap.partition_keys]
    return _TableInfo(snap.sd.location or "", dict(snap.parameters), cols, keys)
