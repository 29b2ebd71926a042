"""One watch cycle of the agent (``streamer.source.watch``): list, catch up with the log, publish.

The listings are made first; then the log is published up to the head read after them, so that every
metastore change the listings saw (a new partition) reaches targets before the replaces do; listings
of tables an event named meanwhile are left for the next cycle. The replaces go out in one
transaction after the last published event, with its id, followed by a PROGRESS record, as any batch.
A directory that cannot be listed or read, or whose record would be larger than
``--max-record-bytes``, is logged as an error, counted in ``streamer_source_watch_errors_total`` and
tried again next cycle; the log's events keep flowing.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException

from streamer.errors import StreamerError
from streamer.kafka.record_size import record_size, too_large
from streamer.source.prepare import Prepared
from streamer.source.thrift_reader import ThriftNotificationReader
from streamer.source.watch import (
    WATCH_ERRORS,
    WATCH_SECONDS_HISTOGRAM,
    HmsWatchCatalog,
    WatchCatalog,
    Watcher,
)

if TYPE_CHECKING:
    from streamer.source.agent import SourceAgent

log = logging.getLogger("streamer.source.watch")


def watch_catalog_for(reader: object) -> WatchCatalog | None:
    """The metastore a reader reads through, over Thrift (``--hms-uri``); None for any other reader."""
    if isinstance(reader, ThriftNotificationReader):
        return HmsWatchCatalog(reader.uri, timeout_s=reader.timeout_seconds, auth=reader.auth)
    return None


def watch_cycle(agent: SourceAgent, watcher: Watcher) -> int:
    """List the watched directories and publish a replace of each one that changed; the number
    published."""
    started = time.monotonic()
    try:
        return _cycle(agent, watcher)
    finally:
        WATCH_SECONDS_HISTOGRAM.observe(time.monotonic() - started)


def _cycle(agent: SourceAgent, watcher: Watcher) -> int:
    watcher.begin()
    try:
        changes = watcher.scan()
    except (OSError, StreamerError) as exc:
        WATCH_ERRORS.inc()
        log.error("watch: cannot list the watched tables (%s); trying again in the next cycle", exc)
        return 0
    head = agent.reader.head_event_id()
    while agent.last_id < head and agent.run_once() > 0:
        pass
    if agent.last_id < head:
        return 0  # the log is not published up to the listings yet (a gap settling): next cycle
    changes = watcher.untouched(changes)
    if not changes:
        return 0
    try:
        events, ready = watcher.events(changes, source_id=agent.config.source_id, after=agent.last_id,
                                       now=agent._clock())
    except OSError as exc:
        WATCH_ERRORS.inc()
        log.error("watch: cannot read the files of a watched directory (%s); trying again in the next "
                  "cycle", exc)
        return 0
    prepared: list[Prepared] = []
    published = []
    limit = agent.config.max_record_bytes
    for event, change in zip(events, ready, strict=True):
        value = agent.preparer.encode(dataclasses.replace(event, prev_event_id=agent.last_id))
        key = event.db.encode() if event.db else None
        if too_large(key, value, limit):
            WATCH_ERRORS.inc()
            log.error("watch: the replace of %s (%d files) would be a record of %d bytes, over "
                      "--max-record-bytes %d: not published; raise the limit (targets read records that "
                      "large too)", change.dir.shown, len(change.entries), record_size(key, value), limit)
            continue
        prepared.append(Prepared(event.event_id, event.event_type.value, key, value, obj=change.dir.shown))
        published.append(change)
    if not prepared:
        return 0
    try:
        agent._publish(prepared, max(head, agent.last_id))
    except KafkaException as exc:
        agent._after_failed_commit(exc, prepared)
        return 0
    watcher.commit(published)
    for change in published:
        log.info("watch: %s changed: published as a replace by its %d files after event %d",
                 change.dir.shown, len(change.entries), agent.last_id)
    return len(published)
