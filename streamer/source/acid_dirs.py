"""Which ``base``/``delta`` directories of a Hive 2.x transactional table a dump copies (pure).

Hive's reader (``AcidUtils.getAcidState`` in Hive 2.3) reads the newest valid base, then each delta
above it once (a delta compacted into a wider one is obsolete; the deltas of the statements of one
transaction are all read) and relies on filtering rows by transaction id for the rest: it may
read a delta that holds an open or aborted transaction's rows and drop them row by row. A target
reads whole directories (it has no row-level transaction ids), so ``choose`` makes Hive's choice,
then leaves out every delta whose range holds an open transaction or one above the high water mark,
and every delta of aborted transactions only: an open or aborted transaction's files are never
dumped. A compacted delta spanning an aborted transaction is kept, as Hive keeps it (the compactor
dropped that transaction's rows). ``write_ids`` are the transaction ids the chosen directories
stand for, which is how a target decides what it reads (``streamer.target.table_reader``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from streamer.metastore.thrift import TxnSnapshot
from streamer.warehouse.acid import AcidDir, parse_dir


@dataclass(frozen=True)
class DirChoice:
    """The directories to copy (in Hive's read order), the ids they stand for, and why others are out."""

    chosen: list[str]
    write_ids: frozenset[int]
    left_out: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def range_validity(snap: TxnSnapshot, lo: int, hi: int) -> str:
    """Hive's ``isTxnRangeValid``: ``"all"``, ``"some"`` or ``"none"`` of ``lo..hi`` committed."""
    if snap.high_water_mark < lo:
        return "none"
    invalid = {t for t in snap.open | snap.aborted if lo <= t <= hi}
    count = len(invalid) + max(0, hi - snap.high_water_mark)
    if count == 0:
        return "all"
    return "none" if count == hi - lo + 1 else "some"


def valid_base(snap: TxnSnapshot, txn: int) -> bool:
    """Hive's ``isValidBase``: no transaction at or below ``txn`` is still open, none above the mark."""
    low = snap.min_open
    return txn <= snap.high_water_mark and (low is None or low > txn)


def _order(item: tuple[AcidDir, str]) -> tuple[int, int, int, str]:
    """Hive's ``ParsedDelta`` order: by min id, then the wider range first, then statement id."""
    d, name = item
    return (d.min_write_id, -d.max_write_id, -1 if d.statement_id is None else d.statement_id, name)


def _unreadable(snap: TxnSnapshot, d: AcidDir) -> str | None:
    """Why a delta Hive would read holds data a whole-directory reader must not see, or None."""
    ids = range(d.min_write_id, d.max_write_id + 1)
    open_ids = sorted(t for t in ids if t in snap.open)
    if open_ids:
        return f"holds open transactions {open_ids[:10]}"
    if d.max_write_id > snap.high_water_mark:
        return f"holds transactions above the high water mark {snap.high_water_mark}"
    if all(t in snap.aborted for t in ids):
        return "of aborted transactions only"
    return None


def choose(names: Iterable[str], snap: TxnSnapshot) -> DirChoice:
    """The directories among ``names`` (first-level names of a table or partition) a dump copies."""
    parsed = [(d, n) for n in names if (d := parse_dir(n)) is not None]
    left_out: dict[str, str] = {}
    warnings: list[str] = []
    best: tuple[AcidDir, str] | None = None
    for d, n in parsed:
        if d.kind != "base":
            continue
        if not valid_base(snap, d.max_write_id):
            left_out[n] = "base not valid yet (open transactions at or below it, or above the mark)"
        elif best is None or (d.max_write_id, n) > (best[0].max_write_id, best[1]):
            if best is not None:
                left_out[best[1]] = f"obsolete: {n} replaces it"
            best = (d, n)
        else:
            left_out[n] = f"obsolete: {best[1]} replaces it"
    chosen = [best[1]] if best else []
    ids: set[int] = {best[0].max_write_id} if best else set()
    current = best[0].max_write_id if best else 0
    last_stmt: int = -1
    deltas = sorted(((d, n) for d, n in parsed if d.kind != "base"), key=_order)
    for d, n in deltas:
        if range_validity(snap, d.min_write_id, d.max_write_id) == "none":
            left_out[n] = "no committed transaction in it (open, aborted or above the high water mark)"
            continue
        if d.max_write_id > current and range_validity(snap, current + 1, d.max_write_id) != "none":
            why = _unreadable(snap, d)
            if why is not None:
                left_out[n] = why
                warnings.append(f"{n} {why}: left out, with the rows of its committed transactions")
                continue
            if range_validity(snap, d.min_write_id, d.max_write_id) == "some":
                warnings.append(f"{n} spans aborted transactions: copied whole, as Hive reads it")
            chosen.append(n)
            ids.update(range(d.min_write_id, d.max_write_id + 1))
            current = d.max_write_id
            last_stmt = -1 if d.statement_id is None else d.statement_id
        elif d.max_write_id == current and last_stmt >= 0:
            chosen.append(n)  # another statement of the same transaction
            ids.update(range(d.min_write_id, d.max_write_id + 1))
        else:
            left_out[n] = "obsolete: covered by a base or a wider delta"
    return DirChoice(chosen, frozenset(ids), left_out, warnings)
