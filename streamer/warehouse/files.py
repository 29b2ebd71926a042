"""Data files of the warehouse: Parquet writing, content checksums, change management (cmroot).

Change management follows Hive's ReplChangeManager: a file deleted or overwritten by a change is
first retained as ``<cmroot>/<file name>_<checksum>`` (one flat directory; equal name+checksum kept
once), so a replica can still copy the exact bytes an older event named. The retained copy is made
*before* the change commits and the original is removed only after, so an event never names a file
that is in neither place.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from streamer.events.model import Column, FileRef
from streamer.warehouse.errors import WarehouseError

log = logging.getLogger(__name__)

CHECKSUM_ALGORITHM = "sha256"

_ARROW_TYPES: dict[str, pa.DataType] = {
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
}


def checksum(path: Path) -> str:
    """Hex sha256 of the file's content (the warehouse's filesystem checksum)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def path_of(uri: str) -> Path:
    """The local path of a ``file:`` location (the only scheme the bundled warehouse writes).

    Locations are Hadoop-style, as Hive writes them: ``file:/abs/path``, not percent-encoded
    (a partition directory ``k=a%3Ab`` is named so literally).
    """
    if uri.startswith("/"):
        return Path(uri)
    if not uri.startswith("file:"):
        raise WarehouseError(f"location {uri} is not a local file location")
    rest = uri[len("file:") :]
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise WarehouseError(f"location {uri} names host {authority!r}: only local files are supported")
        rest = "/" + path
    return Path(rest)


def uri_of(path: Path) -> str:
    """Hadoop's rendering of a local path (``file:/abs/path``), as Hive stores locations."""
    return "file:" + str(path.absolute())


def is_data_file(path: Path) -> bool:
    """Hive ignores hidden files (``.`` or ``_`` prefixes) when it lists a table's data."""
    return path.is_file() and not path.name.startswith((".", "_"))


def data_files(directory: Path) -> list[Path]:
    """The data files directly in ``directory`` (a table or partition location), by name."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if is_data_file(p))


def tree_files(directories: Iterable[Path]) -> list[Path]:
    """Every data file below ``directories`` at any depth (an ACID table's deltas and bases), once each;
    hidden files and directories are skipped as Hive skips them."""
    found: set[Path] = set()
    for directory in directories:
        if directory.is_dir():
            found.update(
                p
                for p in directory.rglob("*")
                if is_data_file(p)
                and not any(part.startswith((".", "_")) for part in p.relative_to(directory).parts)
            )
    return sorted(found)


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    return pa.schema([pa.field(c.name, _ARROW_TYPES[c.type.lower()]) for c in columns])


def write_parquet(
    directory: Path,
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, object]],
    n_files: int = 1,
    *,
    file_name: Callable[[int], str] | None = None,
) -> list[Path]:
    """Write ``rows`` as ``n_files`` Parquet files named as Hive names them (``000000_0``, ``_copy_N``,
    or ``file_name(i)`` in a fresh directory such as an ACID delta)."""
    names = {c.name for c in columns}
    for row in rows:
        unknown = sorted(set(row) - names)
        if unknown:
            raise WarehouseError(f"row has columns {unknown} not in the table ({sorted(names)})")
    schema = arrow_schema(columns)
    directory.mkdir(parents=True, exist_ok=True)
    n_files = max(1, min(n_files, len(rows))) if rows else 1
    written: list[Path] = []
    try:
        for i in range(n_files):
            chunk = rows[i::n_files]
            data = {c.name: [r.get(c.name) for r in chunk] for c in columns}
            try:
                table = pa.Table.from_pydict(data, schema=schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise WarehouseError(f"rows do not match the table's columns: {exc}") from exc
            path = directory / file_name(i) if file_name else _free_name(directory, i)
            if path.exists():
                raise WarehouseError(f"{path} exists already: refusing to overwrite a data file")
            tmp = directory / f".{path.name}.tmp"
            pq.write_table(table, tmp)
            tmp.rename(path)
            written.append(path)
    except BaseException:
        remove_files(written)
        raise
    return written


def read_parquet(paths: Iterable[Path]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for path in paths:
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def _free_name(directory: Path, bucket: int) -> Path:
    base = f"{bucket:06d}_0"
    candidate = directory / base
    copy = 0
    while candidate.exists():
        copy += 1
        candidate = directory / f"{base}_copy_{copy}"
    return candidate


def remove_files(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


class ChangeManager:
    """The flat cmroot directory of retained files, named ``<name>_<checksum>``."""

    def __init__(self, cmroot: Path) -> None:
        self.root = cmroot.absolute()
        self.root.mkdir(parents=True, exist_ok=True)

    def cm_path(self, name: str, chk: str) -> Path:
        return self.root / f"{name}_{chk}"

    def file_ref(self, path: Path, partition: str | None = None) -> FileRef:
        """The reference an event carries for ``path``: URI, checksum, size and its cmroot name."""
        chk = checksum(path)
        return FileRef(
            uri=uri_of(path),
            checksum=chk,
            checksum_algorithm=CHECKSUM_ALGORITHM,
            cm_uri=uri_of(self.cm_path(path.name, chk)),
            size=path.stat().st_size,
            partition=partition,
        )

    def retain(self, paths: Iterable[Path]) -> list[Path]:
        """Keep a copy of each file in cmroot (the caller deletes the originals after commit)."""
        kept: list[Path] = []
        for path in paths:
            target = self.cm_path(path.name, checksum(path))
            if not target.exists():
                tmp = self.root / f".{target.name}.tmp"
                try:
                    os.link(path, tmp)
                except OSError:
                    shutil.copyfile(path, tmp)
                tmp.replace(target)
            os.utime(target, None)  # retention counts from the latest recycle, as Hive's does
            kept.append(target)
        return kept

    def clean(self, retain_seconds: float, now: float | None = None) -> int:
        """Delete retained files older than ``retain_seconds``; returns how many were deleted."""
        cutoff = (time.time() if now is None else now) - retain_seconds
        deleted = 0
        for path in self.root.iterdir():
            if path.is_file() and not path.name.startswith(".") and path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)
                deleted += 1
        log.info("cmroot %s: deleted %s files older than %ss", self.root, deleted, retain_seconds)
        return deleted
