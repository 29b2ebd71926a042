"""Hive's ACID table layout and visibility rules, as pure functions.

A transactional table keeps each write id's data in its own directory below the table (or
partition) location: ``delta_W_W_SSSS`` for the statement ``S`` of write id ``W``, and ``base_W``
for data that replaces everything up to ``W`` (major compaction, INSERT OVERWRITE). Which rows a
reader sees is decided by the set of committed write ids, never by the files alone: aborted and
still-open writes stay on disk until Hive's cleaner removes them. Names follow Hive's AcidUtils
(7-digit write ids, 4-digit statement ids).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from streamer.events.model import TableSnapshot
from streamer.warehouse.errors import WarehouseError

FULL = "full"
INSERT_ONLY = "insert_only"
KINDS = (FULL, INSERT_ONLY)

_DELTA = re.compile(r"^(delta|delete_delta)_(\d+)_(\d+)(?:_(\d+))?$")
_BASE = re.compile(r"^base_(\d+)(?:_v(\d+))?$")


@dataclass(frozen=True)
class AcidDir:
    """One first-level directory of an ACID table: ``base_W`` or ``[delete_]delta_MIN_MAX[_STMT]``."""

    kind: str  # "base", "delta" or "delete_delta"
    min_write_id: int
    max_write_id: int
    statement_id: int | None = None


def kind_of(spec: bool | str) -> str | None:
    """Normalize ``create_table``'s ``transactional`` argument: False, True/"full", "insert_only"."""
    if spec is False:
        return None
    if spec is True:
        return FULL
    if spec in KINDS:
        return str(spec)
    raise WarehouseError(f"transactional={spec!r}: expected False, True, {FULL!r} or {INSERT_ONLY!r}")


def table_params(kind: str) -> dict[str, str]:
    """The table properties Hive sets for a transactional table of ``kind``."""
    properties = "insert_only" if kind == INSERT_ONLY else "default"
    return {"transactional": "true", "transactional_properties": properties}


def table_kind(tbl: TableSnapshot) -> str | None:
    """``FULL``, ``INSERT_ONLY``, or None for a table that is not transactional."""
    return params_kind(tbl.parameters)


def params_kind(params: Mapping[str, str]) -> str | None:
    lowered = {k.lower(): v for k, v in params.items()}
    if lowered.get("transactional", "").lower() != "true":
        return None
    return INSERT_ONLY if lowered.get("transactional_properties", "").lower() == INSERT_ONLY else FULL


def delta_dir(write_id: int, statement_id: int) -> str:
    """``delta_0000005_0000005_0000``: the directory of one statement of write id 5."""
    return f"delta_{write_id:07d}_{write_id:07d}_{statement_id:04d}"


def base_dir(write_id: int) -> str:
    return f"base_{write_id:07d}"


def bucket_file(bucket: int) -> str:
    """Full ACID data files are named by bucket (``bucket_00000``), as Hive's ORC writer names them."""
    return f"bucket_{bucket:05d}"


def parse_dir(name: str) -> AcidDir | None:
    """The ACID directory ``name`` stands for, or None if it is not one (Hive then ignores it)."""
    m = _DELTA.match(name)
    if m:
        kind, lo, hi, stmt = m.groups()
        if int(lo) > int(hi):
            return None
        return AcidDir(kind, int(lo), int(hi), int(stmt) if stmt is not None else None)
    m = _BASE.match(name)
    if m:
        return AcidDir("base", 0, int(m.group(1)))
    return None


def visible_dirs(names: Iterable[str], committed: Collection[int]) -> list[str]:
    """The directories a reader with this committed write-id set reads, in write-id order.

    The newest base whose write id is committed, then every delta above it whose write ids are
    all committed. Directories of aborted or open writes, and everything below the base, are
    skipped (as AcidUtils.getAcidState does). Delete deltas are not produced here and are refused.
    """
    parsed = [(d, n) for n in names if (d := parse_dir(n)) is not None]
    bases = [(d, n) for d, n in parsed if d.kind == "base" and d.max_write_id in committed]
    best = max(bases, key=lambda b: (b[0].max_write_id, b[1]), default=None)
    floor = best[0].max_write_id if best else 0
    out = [best[1]] if best else []
    for d, n in sorted(parsed, key=lambda p: (p[0].min_write_id, p[0].max_write_id, p[1])):
        if d.kind == "base" or d.max_write_id <= floor:
            continue
        if d.kind == "delete_delta":
            raise WarehouseError(f"{n}: delete deltas are not supported by the bundled warehouse")
        if all(w in committed for w in range(d.min_write_id, d.max_write_id + 1)):
            out.append(n)
    return out
