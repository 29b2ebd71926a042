"""Transactions, decided: nothing of a txn is visible until its COMMIT_TXN has staged, verified and
published every write, then added the write ids to its source's visibility file in one atomic
replace (``CommitTxn``). Design: docs/design/apply.md.
"""

from __future__ import annotations

from streamer.errors import ApplyError
from streamer.events.model import (
    AbortTxnPayload,
    AcidWritePayload,
    CommitTxnPayload,
    Event,
    OpenTxnPayload,
    PartitionSnapshot,
)
from streamer.target.apply.effects import (
    AbortTxn,
    CommitTxn,
    Effect,
    FileCopy,
    NoteTxnBytes,
    OpenTxns,
    PublishTogether,
)
from streamer.target.apply.locations import partition_place
from streamer.target.apply.partitions import partition_values
from streamer.target.apply.view import View, is_managed, payload_of
from streamer.target.state.visibility import TxnState, table_key

MAX_TXNS_PER_EVENT = 10_000
"""Transactions one OPEN_TXN may open: Hive opens a batch of at most ``hive.txn.max.open.batch``
(1,000 by default); each is a line of the source's visibility file, read on every later transaction."""


def open_txn(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, OpenTxnPayload)
    ids = payload.txn_ids
    if len(ids) > MAX_TXNS_PER_EVENT:
        raise ApplyError(
            f"OPEN_TXN opens {len(ids)} transactions; at most {MAX_TXNS_PER_EVENT} are accepted from one "
            "event (Hive opens batches of hive.txn.max.open.batch, 1,000 by default)", obj="transactions",
        )
    return [OpenTxns(ids)]


def acid_write(view: View, event: Event) -> list[Effect]:
    """Hive 3 logs ACID_WRITE before the commit: only its size is kept, for the aborted-bytes metric."""
    payload = payload_of(event, AcidWritePayload)
    return [NoteTxnBytes(payload.txn_id, sum(f.size or 0 for f in payload.write.files))]


def commit_txn(view: View, event: Event) -> list[Effect]:
    """Every write staged and verified, all published, then the one flip that shows them together."""
    payload = payload_of(event, CommitTxnPayload)
    txn = view.txn(payload.txn_id)
    if txn is not None and txn.state is TxnState.COMMITTED:
        return []  # a replay after the visibility flip: everything is in place
    if txn is not None and txn.state is TxnState.ABORTED:
        raise ApplyError(
            f"transaction {payload.txn_id} was aborted; it cannot commit", obj=f"txn {payload.txn_id}"
        )
    if txn is None and not payload.writes:
        return []  # opened before this target's history and wrote nothing we replicate
    effects: list[Effect] = []
    copies: list[FileCopy] = []
    visible: dict[str, list[int]] = {}
    for write in payload.writes:
        snap = write.table_snapshot
        db = view.target_db(snap.db if snap else write.db)
        name = (snap.name if snap else write.table).lower()
        table = view.existing_table(db, name)
        if table is None:
            raise ApplyError(
                f"table of a write (write id {write.write_id}) of transaction {payload.txn_id} "
                "is missing on the target (out of the replication policy?)",
                obj=f"{db}.{name}",
            )
        if write.partition:
            part = write.partition_snapshot or PartitionSnapshot(values=partition_values(write.partition))
            target_dir, claim = partition_place(view.paths, table, part)
            effects += [claim] if claim is not None else []
            source_dir = part.sd.location
        else:  # derived, not the catalog's location, which a metastore may have qualified
            target_dir = view.paths.table_location(db, name) if is_managed(table) else ""
            target_dir = target_dir or table.sd.location or ""
            source_dir = snap.sd.location if snap else None
        read_location = source_dir or (snap.sd.location if snap else None)
        copies.append(FileCopy(event, write.files, target_dir, source_dir, read_location))
        ids = visible.setdefault(table_key(db, name), [])
        if write.write_id not in ids:
            ids.append(write.write_id)
    return [*effects, PublishTogether(None, copies), CommitTxn(payload.txn_id, visible)]


def abort_txn(view: View, event: Event) -> list[Effect]:
    payload = payload_of(event, AbortTxnPayload)
    txn = view.txn(payload.txn_id)
    if txn is None or txn.state is not TxnState.OPEN:
        return []  # unknown (opened before this target's history) or a replay: nothing to drop
    return [AbortTxn(payload.txn_id, txn.pending_bytes)]
