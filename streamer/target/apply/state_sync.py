"""Syncing a table replicated by state (``by_state``) from within the apply path: when an ALTER that
changed its file statistics arrives, its directories (each partition's, or the table's) are made equal
to the source's as it is now (``dir_sync``). A failure is an ``ApplyError`` naming the event and the
directory, so the table's database halts as for any other event.
"""

from __future__ import annotations

import logging

from streamer.errors import ApplyError, ChecksumMismatchError, StreamerError, UnverifiableFileError
from streamer.events.model import Event, PartitionSnapshot, TableSnapshot
from streamer.target.apply import door
from streamer.target.apply.by_state import source_location
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.dir_sync import ChecksumCache
from streamer.target.apply.paths import partition_name

log = logging.getLogger(__name__)


def state_dirs(
    ctx: ApplyContext, table: TableSnapshot, partitions: list[PartitionSnapshot] | None = None
) -> list[tuple[str, str]]:
    """(source dir, target dir) of every directory of ``table`` (a target table marked by state), or
    of ``partitions`` (target partitions of it) only."""
    base = source_location(table)
    if not base:
        return []
    if not table.partition_keys:
        return [(base, table.sd.location)] if table.sd.location else []
    keys = [c.name for c in table.partition_keys]
    out = []
    listed = ctx.catalog.list_partitions(table.db, table.name) if partitions is None else partitions
    for p in listed:
        src = source_location(p) or base.rstrip("/") + "/" + partition_name(keys, p.values)
        if p.sd.location:
            out.append((src, p.sd.location))
    return out


def sync_by_state(
    ctx: ApplyContext, event: Event, table: TableSnapshot, partitions: list[PartitionSnapshot] | None = None
) -> None:
    """Sync every directory of ``table`` (a target table marked by state), or of ``partitions`` of
    it, with the source's."""
    cache = ChecksumCache()
    database = ctx.source_db(table.db) or table.db
    for src, target_dir in state_dirs(ctx, table, partitions):
        try:
            done = door.sync_dir(ctx, src, target_dir, cache, event_id=event.event_id, database=database)
        except StreamerError:
            raise
        except OSError as exc:
            raise ApplyError(
                f"syncing {target_dir} from {src} failed: {exc}", event_id=event.event_id,
                obj=table.qualified_name,
            ) from exc
        if done is None:
            log.info("event %s: %s is gone from the source; %s left as it is", event.event_id, src,
                     target_dir)
        elif done.copied or done.deleted:
            log.info("event %s: synced %s: %d files copied (%d bytes), %d deleted", event.event_id,
                     target_dir, done.copied, done.bytes_copied, done.deleted)


def gone_to_state(exc: Exception, table: TableSnapshot) -> bool:
    """Whether a write's copy failure ``exc`` is answered by syncing ``table`` from the source: its
    files are gone (or never checksummed) and the table is replicated by state, whose writer moved on
    logging nothing that says so. The sync reaches the source's state as it is now, the guarantee
    such a table has (docs/features.md, "Writers"); a table replicated by events halts instead."""
    return isinstance(exc, ChecksumMismatchError | UnverifiableFileError) and bool(source_location(table))
