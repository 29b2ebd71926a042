"""Comparable table states: what a reader can observe of one table, reduced to a fingerprint.

The source history and the samples of a target both describe tables with :class:`TableState`, built
by the same functions here, so "the target shows the source's state after event E" becomes an
equality of fingerprints. What a state keeps, and the ACID write ids: docs/design/consistency.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from streamer.events.model import TableSnapshot

# (path relative to the partition or table directory, content checksum; "" when the source has none)
FileKey = tuple[str, str]

UNPARTITIONED = ""  # the partition name under which an unpartitioned table's files are kept
VIEW_TYPES = frozenset({"VIRTUAL_VIEW", "MATERIALIZED_VIEW"})

VOLATILE_PARAMS = frozenset(
    {
        "transient_lastDdlTime",
        "last_modified_by",
        "last_modified_time",
        "numFiles",
        "numRows",
        "totalSize",
        "rawDataSize",
        "numFilesErasureCoded",
        "COLUMN_STATS_ACCURATE",
        "DO_NOT_UPDATE_STATS",
    }
)
# replication bookkeeping a target adds (repl.last.id, streamer.source.id, ...)
VOLATILE_PREFIXES = ("repl.", "streamer.")


def stable_params(params: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Parameters a replica must reproduce: volatile and bookkeeping keys removed, sorted."""
    kept = (k for k in params if k not in VOLATILE_PARAMS and not k.startswith(VOLATILE_PREFIXES))
    return tuple(sorted((k, params[k]) for k in kept))


@dataclass(frozen=True)
class TableMeta:
    """The metadata part of a table's state."""

    table_type: str
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[tuple[str, str], ...]
    parameters: tuple[tuple[str, str], ...]
    view_text: str | None = None

    @property
    def is_view(self) -> bool:
        return self.table_type in VIEW_TYPES

    @property
    def transactional(self) -> bool:
        return dict(self.parameters).get("transactional", "").lower() == "true"

    @property
    def key_names(self) -> list[str]:
        return [name for name, _ in self.partition_keys]


def table_meta(table: TableSnapshot) -> TableMeta:
    """The comparable metadata of a table snapshot (source event or target metastore alike)."""
    return TableMeta(
        table_type=table.table_type.upper(),
        columns=tuple((c.name.lower(), c.type.lower()) for c in table.sd.columns),
        partition_keys=tuple((c.name.lower(), c.type.lower()) for c in table.partition_keys),
        parameters=stable_params(table.parameters),
        view_text=table.view_original_text if table.table_type.upper() in VIEW_TYPES else None,
    )


@dataclass(frozen=True)
class TableState:
    """One table as a reader sees it; build it with :func:`table_state` so both sides normalise alike."""

    meta: TableMeta
    partitions: tuple[tuple[str, tuple[FileKey, ...]], ...]
    write_ids: tuple[int, ...] = ()

    @cached_property
    def fingerprint(self) -> str:
        """A short digest of the whole state; equal states have equal fingerprints."""
        return hashlib.blake2b(repr(self).encode(), digest_size=12).hexdigest()

    def files(self) -> dict[str, tuple[FileKey, ...]]:
        return dict(self.partitions)

    def describe(self) -> str:
        n_files = sum(len(f) for _, f in self.partitions)
        return f"{self.meta.table_type} with {len(self.partitions)} partition(s), {n_files} file(s)"


def table_state(
    meta: TableMeta,
    files: Mapping[str, Iterable[FileKey]] | None = None,
    write_ids: Iterable[int] | None = None,
) -> TableState:
    """A table's state from its metadata and its data files by partition name.

    ``files`` maps the Hive partition name (``k=v/k2=v2``, escaped as Hive escapes it; ``""`` for an
    unpartitioned table) to ``(relative path, checksum)`` of the partition's visible data files
    (hidden ``.``/``_`` files excluded). Every partition that exists must appear, even without files.
    ``write_ids`` (committed ones) is only kept for transactional tables (the ACID hook in
    docs/design/consistency.md).
    """
    files = files or {}
    if meta.is_view:
        parts: dict[str, tuple[FileKey, ...]] = {}
    elif not meta.partition_keys:
        extra = sorted(set(files) - {UNPARTITIONED})
        if extra:
            raise ValueError(f"unpartitioned table has files under partition names {extra}")
        parts = {UNPARTITIONED: _files(files.get(UNPARTITIONED, ()))}
    else:
        if UNPARTITIONED in files:
            raise ValueError("partitioned table has files outside any partition")
        parts = {name: _files(keys) for name, keys in files.items()}
    ids = tuple(sorted(set(write_ids or ()))) if meta.transactional else ()
    return TableState(meta, tuple(sorted(parts.items())), ids)


def _files(keys: Iterable[FileKey]) -> tuple[FileKey, ...]:
    return tuple(sorted({(path, checksum or "") for path, checksum in keys}))


def observe(
    table: TableSnapshot | None,
    files: Mapping[str, Iterable[FileKey]] | None = None,
    write_ids: Iterable[int] | None = None,
) -> TableState | None:
    """What a sampler records for one table read from a metastore (None when the table is absent)."""
    return None if table is None else table_state(table_meta(table), files, write_ids)


def diff(observed: TableState | None, expected: TableState | None, limit: int = 3) -> str:
    """A short human account of how two states differ, for violation messages."""
    if observed is None or expected is None:
        return f"{_presence(observed)} vs {_presence(expected)}"
    out = []
    if observed.meta != expected.meta:
        fields = [
            f
            for f in ("table_type", "columns", "partition_keys", "parameters", "view_text")
            if getattr(observed.meta, f) != getattr(expected.meta, f)
        ]
        out.append(f"metadata differs in {', '.join(fields)}")
    seen, want = observed.files(), expected.files()
    if set(seen) != set(want):
        extra, missing = sorted(set(seen) - set(want)), sorted(set(want) - set(seen))
        out.append(f"partitions extra {extra[:limit]} missing {missing[:limit]}")
    for name in sorted(set(seen) & set(want)):
        extra_f = sorted(set(seen[name]) - set(want[name]))
        missing_f = sorted(set(want[name]) - set(seen[name]))
        if extra_f or missing_f:
            out.append(f"partition {name!r}: extra files {extra_f[:limit]} missing {missing_f[:limit]}")
    if observed.write_ids != expected.write_ids:
        out.append("committed write ids differ")
    return "; ".join(out[: limit + 1]) or "equal"


def _presence(state: TableState | None) -> str:
    return "absent" if state is None else "present"
