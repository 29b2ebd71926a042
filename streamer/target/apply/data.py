"""INSERT [OVERWRITE]: all files of the event staged and verified, then published in one directory
swap where the filesystem allows, else renamed into place together and counted as non-atomic.
Design: docs/design/apply.md.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from streamer import metrics
from streamer.errors import ApplyError
from streamer.events.model import Event, InsertPayload, PartitionSnapshot, TableSnapshot
from streamer.filesystems import atomic_rename
from streamer.target.apply import door
from streamer.target.apply.by_state import source_location
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.state_sync import gone_to_state, sync_by_state
from streamer.target.apply.view import payload_of

log = logging.getLogger(__name__)


def insert(ctx: ApplyContext, event: Event) -> None:
    payload = payload_of(event, InsertPayload)
    if payload.unlocated and not payload.files:
        _unlocated(ctx, event, payload)
        return
    table, source = ctx.table_for(event, payload.table)
    if payload.partition_values:
        part = payload.partition or PartitionSnapshot(values=payload.partition_values)
        target_dir = ctx.partition_dir(table, source, part)
        source_dir = part.sd.location
    else:
        target_dir = table.sd.location or ""
        source_dir = source.sd.location if source else None
    # a partition the event does not locate is read as part of its table's location
    read_location = source_dir or (source.sd.location if source else None)
    try:
        staged = ctx.copy(event, payload.files, target_dir, source_dir, read_location)
    except ApplyError as exc:
        if not gone_to_state(exc, table):
            raise
        _sync_instead(ctx, event, table, payload.partition_values, exc)
        return
    if door.publish_swapped(ctx, staged, target_dir, replace=payload.replace, event_id=event.event_id):
        return  # one atomic switch of the directory (streamer.target.apply.swap)
    staged.publish()
    removed: list[str] = []
    if payload.replace:
        keep = {_top_level(f.final, target_dir) for f in staged.files}
        removed = door.clear_dir(ctx, target_dir, keep=keep, event_id=event.event_id)
    published = sum(1 for f in staged.files if not f.skipped)
    if published > 1 or (published and removed):
        _count_nonatomic(table.db, target_dir)


def _unlocated(ctx: ApplyContext, event: Event, payload: InsertPayload) -> None:
    """An INSERT the source agent could not locate (``InsertPayload.unlocated``): what it wrote is
    unknown, and applied as an empty append it would keep rows an INSERT OVERWRITE replaced. A table
    replicated by state syncs the object from the source's listing (``state_sync``, reading only
    below a declared ``--source-prefix``); any other halts its database at the event."""
    table, _ = ctx.table_for(event, payload.table)
    values = list(payload.partition_values)
    obj = table.qualified_name + (f" partition {values}" if values else "")
    if source_location(table):
        partitions = None
        if values:
            found = ctx.catalog.get_partition(table.db, table.name, values)
            partitions = [found] if found is not None else None
        if not values or partitions:
            log.warning("event %s: INSERT without files into %s that the source agent could not locate; "
                        "%s is replicated by state: syncing it from the source", event.event_id, obj,
                        table.qualified_name)
            sync_by_state(ctx, event, table, partitions)
            return
    raise ApplyError(
        "INSERT logged without files that the source agent could not locate (unlocated; its WARNING for "
        "this event says why): what it wrote is unknown (Hive 2.3 logs every INSERT OVERWRITE so), and "
        "applying it as an empty append would keep rows the source replaced. Compare the object with the "
        "source (streamer verify); if the replica already holds the source's rows, pass over the event "
        "with `streamer target skip`, else bootstrap the table again",
        event_id=event.event_id, event_type=event.event_type.value, obj=obj,
    )


def _sync_instead(
    ctx: ApplyContext, event: Event, table: TableSnapshot, values: list[str], exc: ApplyError
) -> None:
    """The INSERT's files are gone from a table replicated by state: its directory synced instead."""
    partitions = None
    if values:
        found = ctx.catalog.get_partition(table.db, table.name, list(values))
        if found is None:
            raise exc
        partitions = [found]
    log.warning("event %s: %s; %s is replicated by state: syncing it from the source instead",
                event.event_id, exc.cause, table.qualified_name)
    sync_by_state(ctx, event, table, partitions)


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
