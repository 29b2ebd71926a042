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
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import KafkaException

from streamer import metrics
from streamer.errors import StreamerError
from streamer.kafka.record_size import record_size, too_large
from streamer.source.prepare import Prepared
from streamer.source.thrift_reader import ThriftNotificationReader
from streamer.source.watch import (
    HmsWatchCatalog,
    WatchCatalog,
    Watcher,
)

log = logging.getLogger("streamer.source.watch")


class Agent(Protocol):
    """What a cycle uses of ``streamer.source.agent.SourceAgent`` (named here, not imported: the agent
    imports this module)."""

    config: Any
    reader: Any
    preparer: Any
    last_id: int
    _clock: Callable[[], float]

    def run_once(self) -> int: ...

    def _publish(self, prepared: list[Prepared], head: int) -> None: ...

    def _after_failed_commit(self, exc: KafkaException, prepared: list[Prepared]) -> None: ...


def watch_catalog_for(reader: object) -> WatchCatalog | None:
    """The metastore a reader reads through, over Thrift (``--hms-uri``); None for any other reader."""
    if isinstance(reader, ThriftNotificationReader):
        return HmsWatchCatalog(reader.uri, timeout_s=reader.timeout_seconds, auth=reader.auth)
    return None


def hive_database(reader: object) -> bool:
    """Whether ``reader`` reads a Hive metastore's database (``--notification-db``), where Spark may
    write tables the agent cannot find without Thrift; the bundled warehouse logs every write itself."""
    from streamer.source.reader import SqlNotificationReader
    from streamer.source.source_db import is_bundled_warehouse

    if not isinstance(reader, SqlNotificationReader):
        return False
    try:
        return not is_bundled_warehouse(reader.url)
    except Exception:  # an unreachable database fails the agent's own start, naming it
        return True


def watch_cycle(agent: Agent, watcher: Watcher) -> int:
    """List the watched directories and publish a replace of each one that changed; the number
    published."""
    started = time.monotonic()
    try:
        return _cycle(agent, watcher)
    finally:
        metrics.SOURCE_WATCH_SECONDS.observe(time.monotonic() - started)


def _cycle(agent: Agent, watcher: Watcher) -> int:
    watcher.begin()
    try:
        changes = watcher.scan()
    except (OSError, StreamerError) as exc:
        metrics.SOURCE_WATCH_ERRORS.inc()
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
        metrics.SOURCE_WATCH_ERRORS.inc()
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
            metrics.SOURCE_WATCH_ERRORS.inc()
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
