"""Transactions: nothing of a txn is visible until its COMMIT_TXN has staged, verified and published
every write, then added the write ids to its source's visibility file in one atomic replace.
Design: docs/design/apply.md.
"""

from __future__ import annotations

import logging

from streamer import metrics
from streamer.errors import ApplyError
from streamer.events.model import (
    AbortTxnPayload,
    AcidWritePayload,
    CommitTxnPayload,
    Event,
    OpenTxnPayload,
    PartitionSnapshot,
)
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.files import CopyReport, Staged
from streamer.target.apply.partitions import partition_values
from streamer.target.apply.view import is_managed, payload_of
from streamer.target.state.visibility import TxnState, table_key

log = logging.getLogger(__name__)


MAX_TXNS_PER_EVENT = 10_000
"""Transactions one OPEN_TXN may open: Hive opens a batch of at most ``hive.txn.max.open.batch``
(1,000 by default); each is a line of the source's visibility file, read on every later transaction."""


def open_txn(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, OpenTxnPayload)
    ids = payload.txn_ids
    if len(ids) > MAX_TXNS_PER_EVENT:
        raise ApplyError(
            f"OPEN_TXN opens {len(ids)} transactions; at most {MAX_TXNS_PER_EVENT} are accepted from one "
            "event (Hive opens batches of hive.txn.max.open.batch, 1,000 by default)", obj="transactions",
        )
    ctx.acid.update(lambda v: v.opened(ctx.source_id, ids))


def acid_write(ctx: ApplyContext, event: Event) -> None:
    """Hive 3 logs ACID_WRITE before the commit: only its size is kept, for the aborted-bytes metric."""
    payload = payload_of(event, AcidWritePayload)
    size = sum(f.size or 0 for f in payload.write.files)
    ctx.acid.update(lambda v: v.noted_bytes(ctx.source_id, payload.txn_id, size))


def commit_txn(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, CommitTxnPayload)
    txn = ctx.acid.current().txn(ctx.source_id, payload.txn_id)
    if txn is not None and txn.state is TxnState.COMMITTED:
        return  # a replay after the visibility flip: everything is in place
    if txn is not None and txn.state is TxnState.ABORTED:
        raise ApplyError(
            f"transaction {payload.txn_id} was aborted; it cannot commit", obj=f"txn {payload.txn_id}"
        )
    if txn is None and not payload.writes:
        return  # opened before this target's history and wrote nothing we replicate
    staged: list[Staged] = []
    visible: dict[str, set[int]] = {}
    try:
        for write in payload.writes:
            snap = write.table_snapshot
            db = ctx.target_db(snap.db if snap else write.db)
            name = (snap.name if snap else write.table).lower()
            table = ctx.existing_table(db, name)
            if table is None:
                raise ApplyError(
                    f"table of a write (write id {write.write_id}) of transaction {payload.txn_id} "
                    "is missing on the target (out of the replication policy?)",
                    obj=f"{db}.{name}",
                )
            if write.partition:
                part = write.partition_snapshot or PartitionSnapshot(values=partition_values(write.partition))
                target_dir = ctx.partition_dir(table, snap, part)
                source_dir = part.sd.location
            else:  # derived, not the catalog's location, which a metastore may have qualified
                target_dir = ctx.paths.table_location(db, name) if is_managed(table) else ""
                target_dir = target_dir or table.sd.location or ""
                source_dir = snap.sd.location if snap else None
            read_location = source_dir or (snap.sd.location if snap else None)
            staged.append(ctx.copy(event, write.files, target_dir, source_dir, read_location))
            visible.setdefault(table_key(db, name), set()).add(write.write_id)
    except BaseException:
        for s in staged:
            s.discard()
        raise
    report = CopyReport()
    for s in staged:
        report += s.publish()
    # the one step that makes the whole transaction visible, across all its tables
    ctx.acid.update(lambda v: v.committed(ctx.source_id, payload.txn_id, visible))
    metrics.TARGET_TXNS_COMMITTED.inc()
    log.debug("txn %s committed: %s write(s), %s", payload.txn_id, len(payload.writes), report)


def abort_txn(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, AbortTxnPayload)
    txn = ctx.acid.current().txn(ctx.source_id, payload.txn_id)
    if txn is None or txn.state is not TxnState.OPEN:
        return  # unknown (opened before this target's history) or a replay: nothing to drop
    ctx.acid.update(lambda v: v.aborted(ctx.source_id, payload.txn_id))
    metrics.TARGET_TXNS_ABORTED.inc()
    metrics.TARGET_ABORTED_BYTES_SKIPPED.inc(txn.pending_bytes)
