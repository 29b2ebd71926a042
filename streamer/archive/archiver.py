"""``streamer archive run``: the topic, consumed into archive files and their manifest.

Each cycle reads from the archive's next offset (the manifest's last offset + 1, or the topic's first
offset for a new archive) towards the topic's end, read_committed, with explicit assignment and no
consumer group. A file is cut at ``max_records_per_file`` records, or with what there is once the
topic's end is reached and ``roll_seconds`` passed since the last file (at once with ``once``). Every
record is decoded (its id, predecessor and type go into the file's columns) and the run is checked
against the chain before it is written: a topic that does not continue the archive (purged before it
was archived, recreated, refilled) stops the archiver with ``DataLossError`` or ``ArchiveError``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamer.archive import metrics
from streamer.archive.manifest import ArchiveError, Entry, Manifest, file_name
from streamer.archive.ocf import ArchivedRecord, FileHeader, encode
from streamer.archive.store import ArchiveStore
from streamer.archive.verify import chain_break, sha256
from streamer.errors import ConfigError, DataLossError, StreamerError
from streamer.events.codec import EventDeserializer
from streamer.events.model import Event
from streamer.kafka.record_limit import DEFAULT_TARGET_MAX_RECORD_BYTES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchiveSettings:
    """``streamer archive run``'s settings; see its ``--help`` for each."""

    bootstrap_servers: str
    topic: str
    source_id: str
    archive_dir: str
    kafka_settings: Mapping[str, Any] = field(default_factory=dict)
    partition: int = 0
    max_records_per_file: int = 10_000
    roll_seconds: float = 60.0
    poll_seconds: float = 1.0
    max_record_bytes: int = DEFAULT_TARGET_MAX_RECORD_BYTES


def start_manifest(store: ArchiveStore, settings: ArchiveSettings) -> Manifest:
    """The archive's manifest (a new one for an empty directory), refused when it is another topic's."""
    store.ensure()
    manifest = store.read_manifest()
    if manifest is None:
        return Manifest(settings.topic, settings.source_id, settings.partition)
    if (manifest.topic, manifest.source_id, manifest.partition) != (
            settings.topic, settings.source_id, settings.partition):
        raise ConfigError(
            f"{store.url} archives topic {manifest.topic!r} partition {manifest.partition} of source "
            f"{manifest.source_id!r}, not {settings.topic!r} {settings.partition} of {settings.source_id!r}"
        )
    return manifest


def to_archived(
    offset: int, event: Event, value: bytes, key: bytes | None, ts_ms: int | None
) -> ArchivedRecord:
    return ArchivedRecord(
        offset=offset, event_id=event.event_id, prev_event_id=event.prev_event_id,
        event_type=str(event.event_type), value=value, db=event.db, table=event.table, timestamp_ms=ts_ms,
        key=key,
    )


def make_entry(records: list[ArchivedRecord], data: bytes, now_ms: int) -> Entry:
    first, last = records[0], records[-1]
    return Entry(
        file=file_name(first.offset, last.offset), first_offset=first.offset, last_offset=last.offset,
        first_event_id=first.event_id, last_event_id=last.event_id,
        first_prev_event_id=first.prev_event_id, last_prev_event_id=last.prev_event_id,
        records=len(records), bytes=len(data), sha256=sha256(data), written_ms=now_ms,
    )


def append(store: ArchiveStore, manifest: Manifest, records: list[ArchivedRecord]) -> Manifest:
    """Write ``records`` as one file, then the manifest that names it (the order that makes a crash
    leave either nothing or a whole file); returns the new manifest."""
    before = manifest.files[-1].last_event_id if manifest.files else None
    broken = chain_break(records, before)
    if broken is not None:
        raise ArchiveError(f"topic {manifest.topic!r} does not continue archive {store.url}: {broken}")
    data = encode(records, FileHeader(manifest.topic, manifest.partition, manifest.source_id))
    entry = make_entry(records, data, int(time.time() * 1000))
    updated = manifest.with_entry(entry)  # refuses an entry that does not continue the last one
    store.write_file(entry.file, data)
    store.write_manifest(updated)
    metrics.ARCHIVE_FILES.inc()
    metrics.ARCHIVE_RECORDS.inc(entry.records)
    metrics.ARCHIVE_BYTES.inc(entry.bytes)
    metrics.ARCHIVE_LAST_EVENT_ID.set(entry.last_event_id)
    metrics.ARCHIVE_LAST_OFFSET.set(entry.last_offset)
    log.info("archived %s: %d records, events %d..%d", entry.file, entry.records, entry.first_event_id,
             entry.last_event_id)
    return updated


class Archiver:
    """Consumes ``settings.topic`` into ``settings.archive_dir``."""

    def __init__(self, settings: ArchiveSettings) -> None:
        self.settings = settings
        self.store = ArchiveStore(settings.archive_dir)
        self.manifest = start_manifest(self.store, settings)
        self.store.remove_orphans(self.manifest)
        self.decode = EventDeserializer(check_envelope=False)
        self._last_write = time.monotonic()
        self._pending: list[ArchivedRecord] = []  # read from the topic, not in a file yet (roll_seconds)
        if self.manifest.files:
            metrics.ARCHIVE_LAST_EVENT_ID.set(self.manifest.files[-1].last_event_id)
            metrics.ARCHIVE_LAST_OFFSET.set(self.manifest.files[-1].last_offset)

    def run(self, *, once: bool = False, stop: Callable[[], bool] | None = None) -> Manifest:
        """Archive until ``stop()`` (with ``once``: up to the topic's end as it was, then return)."""
        consumer = self._consumer()
        try:
            while stop is None or not stop():
                wrote = self.cycle(consumer, final=once)
                if once and not wrote:
                    break
                if not wrote:
                    time.sleep(self.settings.poll_seconds)
        finally:
            consumer.close()
        return self.manifest

    def cycle(self, consumer: Any, *, final: bool) -> bool:
        """One read towards the topic's end; whether a file was written."""
        from streamer.kafka.topics import watermarks

        s = self.settings
        marks = watermarks(consumer, s.topic, s.partition)
        if marks is None:
            raise StreamerError(f"topic {s.topic!r} partition {s.partition} does not exist")
        low, high = marks
        start = self.manifest.next_offset if self.manifest.next_offset is not None else low
        metrics.ARCHIVE_LAG_RECORDS.set(max(0, high - start))
        read_from = self._pending[-1].offset + 1 if self._pending else start  # read, not yet written
        if read_from < low:
            raise DataLossError(
                f"data loss: archive {self.store.url} ends at offset {read_from - 1} (event "
                f"{self.manifest.last_event_id}) but topic {s.topic!r} now starts at offset {low}: records "
                f"{read_from}..{low - 1} were deleted before they were archived"
            )
        room = s.max_records_per_file - len(self._pending)
        if high > read_from and room > 0:
            self._pending.extend(self._read(consumer, read_from, high, room))
        if not self._pending:
            return False
        full = len(self._pending) >= s.max_records_per_file
        due = final or time.monotonic() - self._last_write >= s.roll_seconds
        if not full and not due:
            return False  # kept: the next cycle reads on from the last of them
        records, self._pending = self._pending, []
        self.manifest = append(self.store, self.manifest, records)
        self._last_write = time.monotonic()
        metrics.ARCHIVE_LAG_RECORDS.set(max(0, high - (records[-1].offset + 1)))
        return True

    def _read(self, consumer: Any, start: int, end: int, limit: int) -> Iterator[ArchivedRecord]:
        from streamer.kafka.record_limit import check_message
        from streamer.kafka.topics import iter_range

        s = self.settings
        for count, msg in enumerate(iter_range(consumer, s.topic, s.partition, start, end,
                              check=lambda m: check_message(m, s.max_record_bytes)), start=1):
            offset, value = int(msg.offset() or 0), bytes(msg.value() or b"")
            try:
                event = self.decode(value)
            except StreamerError as exc:
                raise ArchiveError(f"topic {s.topic!r} offset {offset}: the record is not an event the "
                                   f"archive can name ({exc}); nothing from it was archived") from exc
            ts_type, ts_ms = msg.timestamp()
            yield to_archived(offset, event, value, msg.key(), None if ts_type == 0 or ts_ms < 0 else ts_ms)
            if count >= limit:
                return

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        from streamer.kafka.client_log import with_client_log
        from streamer.kafka.record_limit import consumer_settings

        s = self.settings
        config = {
            "bootstrap.servers": s.bootstrap_servers,
            "group.id": f"streamer-archive-{s.source_id}",  # never joined: explicit assignment
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "error",
            **s.kafka_settings,
        }
        return Consumer(with_client_log({**config, **consumer_settings(s.max_record_bytes, config)}))
