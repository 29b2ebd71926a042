"""The executor: does the effects a handler decided (``effects``), in order, each through the door.

Catalog effects go to ``door.execute`` (ownership, names, places, bounds); file effects to the door's
file operations (``door.check_place`` first, then the guard and the read rules); bookkeeping to the
job's own state; a step's progress (its fence, the journal, its marker) to ``markers``. A refused or
failed effect raises the ``EventError`` that names it; the effects after it are not done, and the
applier halts the event's database, as for any failed step. Design: docs/design/apply.md ("The door").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from streamer import metrics
from streamer.events.model import Event, PartitionSnapshot
from streamer.target.apply import door, markers
from streamer.target.apply.by_state import REGISTRY
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.effects import (
    AbortTxn,
    Advance,
    CatalogEffect,
    ClaimExternal,
    ClearDir,
    CommitTxn,
    CopyResources,
    CopyWriteIds,
    DatabaseCreated,
    DatabaseDropped,
    Effect,
    FenceDatabase,
    ForgetByState,
    ForgetDatabase,
    ForgetTable,
    ForgetTables,
    MoveDir,
    NoteByState,
    NoteTxnBytes,
    OpenTxns,
    PublishFiles,
    PublishTogether,
    PutPartitions,
    Refuse,
    RelocateDir,
    RememberTable,
    RemoveTree,
    ResetWriteIds,
    SyncByState,
    SyncGone,
    SyncJournal,
    WriteFiles,
)
from streamer.target.apply.state_sync import sync_by_state
from streamer.target.apply.writes import publish_together, put_partitions, write_files

log = logging.getLogger(__name__)


def run(ctx: ApplyContext, effects: Iterable[Effect]) -> None:
    """Do ``effects`` in order. A step whose batch's markers alone record it (a fenced database's:
    no journal line) leaves its directories' fsyncs to run behind it (``streamer.target.apply.dir_fsync``)."""
    effects = list(effects)
    ctx.dir_fsyncs = ctx.markers.dir_fsyncs if _recorded_at_batch_end(effects) else None
    try:
        _run(ctx, effects)
    finally:
        ctx.dir_fsyncs = None


def _recorded_at_batch_end(effects: list[Effect]) -> bool:
    """Whether only the batch's markers record the step: none of its effects writes a durable record of
    its own (the visibility store's, which a replay trusts: a committed transaction is not copied again)."""
    if any(isinstance(e, _RECORDED_AT_ONCE) for e in effects):
        return False
    return any(isinstance(e, Advance) and e.deferred and not e.journaled for e in effects)


_RECORDED_AT_ONCE = (ResetWriteIds, CopyWriteIds, OpenTxns, NoteTxnBytes, CommitTxn, AbortTxn)


def _run(ctx: ApplyContext, effects: list[Effect]) -> None:
    linked: set[str] = set()  # directories a RelocateDir linked (their RemoveTree(if_linked) goes ahead)
    gone: list[tuple[Event, PartitionSnapshot]] = []  # partitions a PublishTogether left to SyncGone
    for effect in effects:
        if isinstance(effect, CatalogEffect):
            ctx.do(effect)
            continue
        match effect:
            case Refuse(error=error):
                raise error
            case PutPartitions():
                put_partitions(ctx, effect)
            case PublishTogether():
                gone += publish_together(ctx, effect)
            case SyncGone(table=table):
                for event, partition in gone:
                    sync_by_state(ctx, event, table, [partition])
                gone.clear()
            case MoveDir(event_id=event_id, old=old, new=new):
                door.move_dir(ctx, old, new, event_id=event_id)
            case ClaimExternal(source_location=location, target_dir=target_dir, table=table):
                ctx.claim_external(location, target_dir, table)
            case PublishFiles(event_id=event_id, refs=refs, target_dir=target_dir, source_dir=source_dir,
                              read_location=read_location):
                ctx.stage_files(event_id, refs, target_dir, source_dir, read_location).publish()
            case ClearDir(event_id=event_id, directory=directory, recursive_files=recursive):
                door.clear_dir(ctx, directory, recursive_files=recursive, event_id=event_id)
            case RelocateDir(event_id=event_id, old=old, new=new):
                if door.link_dir(ctx, old, new, event_id=event_id):
                    linked.add(old)
                else:
                    door.move_dir(ctx, old, new, event_id=event_id)
            case RemoveTree(event_id=event_id, directory=directory, if_linked=if_linked):
                if not if_linked or directory in linked:
                    door.remove_tree(ctx, directory, event_id=event_id)
            case WriteFiles():
                write_files(ctx, effect)
            case SyncByState(event=event, table=table, partitions=partitions, reason=reason):
                if reason:
                    log.warning("event %s: %s", event.event_id, reason)
                sync_by_state(ctx, event, table, list(partitions) if partitions is not None else None)
            case CopyResources(event_id=event_id, function=fn, db_location=db_location):
                door.copy_resources(ctx, fn, event_id, db_location)
            case _:
                _bookkeeping(ctx, effect)


def _bookkeeping(ctx: ApplyContext, effect: Effect) -> None:
    match effect:
        case ResetWriteIds(key=key):
            ctx.acid.update(lambda v: v.reset_table(key))
        case CopyWriteIds(old=old, new=new):
            ctx.acid.update(lambda v: v.copy_table(old, new))
        case RememberTable(table=table):
            ctx.memory.remember_table(table)
        case ForgetTable(db=db, name=name):
            ctx.memory.forget_table(db, name)
        case ForgetTables():
            ctx.memory.forget_tables()
        case ForgetDatabase(name=name):
            ctx.memory.forget(name)
        case FenceDatabase():
            markers.fence(ctx, effect)
        case SyncJournal(objects=objects):
            markers.journal_in(ctx).before_step(objects)
        case Advance():
            markers.advance(ctx, effect)
        case ForgetByState(db=db, name=name):
            REGISTRY.forget(db, name)
        case NoteByState(db=db, name=name, reason=reason):
            REGISTRY.note(db, name, reason)
        case OpenTxns(txn_ids=ids):
            ctx.acid.update(lambda v: v.opened(ctx.source_id, ids))
        case NoteTxnBytes(txn_id=txn_id, size=size):
            ctx.acid.update(lambda v: v.noted_bytes(ctx.source_id, txn_id, size))
        case CommitTxn(txn_id=txn_id, visible=visible):
            ctx.acid.update(lambda v: v.committed(ctx.source_id, txn_id, visible))
            metrics.TARGET_TXNS_COMMITTED.inc()
            log.debug("txn %s committed: writes of %s", txn_id, sorted(visible))
        case AbortTxn(txn_id=txn_id, pending_bytes=pending):
            ctx.acid.update(lambda v: v.aborted(ctx.source_id, txn_id))
            metrics.TARGET_TXNS_ABORTED.inc()
            metrics.TARGET_ABORTED_BYTES_SKIPPED.inc(pending)
        case DatabaseCreated(name=name):
            metrics.database_created(name)
        case DatabaseDropped(name=name):
            REGISTRY.forget_database(name)
            metrics.forget_database(name)  # its series go with it (the watermark's too: is_dropped)
        case _:
            raise TypeError(f"not an effect: {effect!r}")
