"""Doing an INSERT's ``WriteFiles`` and an ADD_PARTITION step's ``PublishTogether`` and ``PutPartitions``.

``WriteFiles``: all files staged and verified, then published in one directory
swap where the filesystem allows, else renamed into place together and counted as non-atomic (an
INSERT OVERWRITE then removes the files it did not stage). Files gone from the source of a table
replicated by state: its directory synced from the source instead (``state_sync``). Design:
docs/design/apply.md.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from streamer import metrics
from streamer.errors import ApplyError
from streamer.events.model import Event, PartitionSnapshot
from streamer.filesystems import atomic_rename
from streamer.target.apply import door
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.effects import (
    AddPartitions,
    AlterPartitions,
    PublishTogether,
    PutPartitions,
    WriteFiles,
)
from streamer.target.apply.files import Staged
from streamer.target.apply.state_sync import gone_to_state, sync_by_state

log = logging.getLogger(__name__)


def write_files(ctx: ApplyContext, write: WriteFiles) -> None:
    event, target_dir = write.event, write.target_dir
    try:
        staged = ctx.stage_files(event.event_id, write.refs, target_dir, write.source_dir,
                                 write.read_location)
    except ApplyError as exc:
        if not gone_to_state(exc, write.table):
            raise
        _sync_instead(ctx, write, exc)
        return
    if door.publish_swapped(ctx, staged, target_dir, replace=write.replace, event_id=event.event_id):
        return  # one atomic switch of the directory (streamer.target.apply.swap)
    staged.publish()
    removed: list[str] = []
    if write.replace:
        keep = {_top_level(f.final, target_dir) for f in staged.files}
        removed = door.clear_dir(ctx, target_dir, keep=keep, event_id=event.event_id)
    published = sum(1 for f in staged.files if not f.skipped)
    if published > 1 or (published and removed):
        _count_nonatomic(write.table.db, target_dir)


def _sync_instead(ctx: ApplyContext, write: WriteFiles, exc: ApplyError) -> None:
    """The INSERT's files are gone from a table replicated by state: its directory synced instead."""
    table, values = write.table, list(write.partition_values)
    partitions = None
    if values:
        found = ctx.catalog.get_partition(table.db, table.name, values)
        if found is None:
            raise exc
        partitions = [found]
    log.warning("event %s: %s; %s is replicated by state: syncing it from the source instead",
                write.event.event_id, exc.cause, table.qualified_name)
    sync_by_state(ctx, write.event, table, partitions)


_warned_nonatomic: set[str] = set()


def _count_nonatomic(db: str, target_dir: str) -> None:
    """An INSERT became visible file by file: counted, and said once per filesystem kind (local
    filesystems without directory exchange say so in ``streamer.target.apply.swap``)."""
    metrics.TARGET_NONATOMIC_PUBLISHES.labels(db=db).inc()
    scheme = urlsplit(target_dir).scheme.lower() or "file"
    if scheme != "file" and scheme not in _warned_nonatomic:
        _warned_nonatomic.add(scheme)
        how = "" if atomic_rename(target_dir) else "; a rename there is a server-side copy and a delete"
        log.warning(
            "publishing on %s is not atomic (no directory exchange%s): an INSERT's files appear one by "
            "one (each whole, hidden while staged) and an INSERT OVERWRITE briefly shows old and new "
            "files together; streamer_target_nonatomic_publishes_total counts such publishes",
            scheme,
            how,
        )


def _top_level(final: str, target_dir: str) -> str:
    """The first path segment of ``final`` below ``target_dir``, whatever their URL spellings.

    A metastore hands back ``file:/x`` for ``file:///x``: comparing URL text would miss the prefix
    and an overwrite would then delete the files it had just published.
    """
    base = urlsplit(target_dir).path.rstrip("/") + "/"
    path = urlsplit(final).path
    if not path.startswith(base):
        raise ApplyError(f"file {final} is not below {target_dir}", obj=final)
    return path[len(base) :].split("/", 1)[0]


def publish_together(ctx: ApplyContext, publish: PublishTogether) -> list[tuple[Event, PartitionSnapshot]]:
    """Stage every copy, then publish them all; returns the (event, partition)s whose files were gone
    from the source of a table replicated by state, to be synced once the catalog lists them."""
    staged: list[Staged] = []
    gone: list[tuple[Event, PartitionSnapshot]] = []
    try:
        for c in publish.copies:
            try:
                staged.append(ctx.stage_files(c.event.event_id, c.refs, c.target_dir, c.source_dir,
                                              c.read_location))
            except ApplyError as exc:
                if publish.table is None or c.partition is None or not gone_to_state(exc, publish.table):
                    raise
                log.warning("event %s: %s; %s is replicated by state: syncing partition %s from the "
                            "source instead", c.event.event_id, exc.cause, publish.table.qualified_name,
                            c.partition.values)
                gone.append((c.event, c.partition))
    except BaseException:
        for s in staged:
            s.discard()
        raise
    for s in staged:
        s.publish()  # partition directories are invisible until the metastore lists them
    return gone


def put_partitions(ctx: ApplyContext, put: PutPartitions) -> None:
    """Add ``put``'s partitions in one call (all or nothing); when that fails (some exist: a replay
    after a crash, or a real failure), look, then add the missing and make the others equal."""
    table, wanted = put.table, {tuple(p.values): p for p in put.partitions}
    try:
        ctx.do(AddPartitions(table, list(wanted.values())))
        return
    except ApplyError:
        pass
    existing = {v: got for v in wanted if (got := ctx.catalog.get_partition(table.db, table.name, list(v)))}
    new = [p for v, p in wanted.items() if v not in existing]
    changed = [p for v, p in wanted.items() if v in existing and existing[v] != p]
    if new:
        ctx.do(AddPartitions(table, new))
    if changed:
        ctx.do(AlterPartitions(table, changed))
