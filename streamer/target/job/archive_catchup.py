"""``target run --archive DIR``: a target past the topic's retention catches up from the event archive.

Before the streaming query starts, the target's position (``streamer.archive.catchup``) is compared
with the topic's first offset. When it is older, the archive's files from the position on are
verified whole (``streamer.archive.verify``) and their records applied through the job's own
``BatchApplier.process``, as micro-batches from the topic would be (the same chain check against the
anchor, planning, halts). A local Spark checkpoint that would resume before the topic's first offset
is then moved aside, so that the query starts at the topic's first offset: the records up to the
anchor are passed over, and the first one after it must continue the chain from the archive's last
record, else the job stops with ``EventChainError`` (a gap between archive and topic is data loss).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from streamer.archive.catchup import plan_catch_up, position_of
from streamer.archive.reading import archive_replay
from streamer.archive.store import ArchiveStore
from streamer.archive.verify import verify_file
from streamer.events.codec import EventDeserializer
from streamer.target.job.bounded import UntilReached
from streamer.target.job.checkpoint import _local, resume_offset
from streamer.target.job.settings import TargetSettings

if TYPE_CHECKING:
    from streamer.target.job.streaming import BatchApplier

log = logging.getLogger(__name__)


def apply_records(job: BatchApplier, records: Sequence[tuple[int, bytes]], chunk: int) -> None:
    """``(offset, value)`` records applied as micro-batches of at most ``chunk``."""
    for i in range(0, len(records), chunk):
        with job.lock:
            job.process(records[i:i + chunk])


def catch_up_from_archive(settings: TargetSettings, low: int | None = None) -> int:
    """Before ``streaming.run``: the target's metastore opened and its state dir claimed as the job
    claims them, then :func:`catch_up`; returns the records applied."""
    from streamer.metastore.thrift import HmsCatalog
    from streamer.target.job.preflight import claim
    from streamer.target.job.streaming import BatchApplier

    catalog = HmsCatalog(settings.metastore.uri, auth=settings.metastore.auth)
    try:
        with claim(settings, catalog):
            store = ArchiveStore(settings.kafka.archive_dir or "")
            manifest = store.read_manifest()
            decode = EventDeserializer(check_envelope=False)
            replay = archive_replay(store, manifest, decode) if manifest is not None else None
            job = BatchApplier(settings, catalog, replay=replay)  # held events: from the archive too
            try:
                return catch_up(settings, job, low)
            finally:
                job.runner.close()
    finally:
        catalog.close()


def catch_up(settings: TargetSettings, job: BatchApplier, low: int | None = None) -> int:
    """Apply what the archive holds between the target's position and the topic's first offset
    (``low``: read from the topic when not given) through ``job``; returns the records applied."""
    archive_dir = settings.kafka.archive_dir
    assert archive_dir is not None
    if low is None:
        low = topic_start(settings)
    resume = resume_offset(settings.layout.checkpoint_dir)
    ours = resume is not None and resume.get("topic") == settings.kafka.topic
    resume_at = int(resume["offset"]) if resume is not None and ours else None
    anchor = job.anchor if job.anchor is not None and job.anchor.topic == settings.kafka.topic else None
    position = position_of(resume_at, anchor.offset if anchor is not None else None)
    store = ArchiveStore(archive_dir)
    manifest = store.read_manifest() if position < low else None
    plan = plan_catch_up(manifest, settings.kafka.topic, settings.source_id, position, low, archive_dir)
    if position >= low:
        log.info("target position %d is on topic %s (first offset %d): no catch-up from the archive",
                 position, settings.kafka.topic, low)
        return 0
    assert manifest is not None
    if not plan.needed:
        log.warning("archive %s ends at offset %d, before the target's position %d: nothing to catch up "
                    "from it", settings.kafka.archive_dir, manifest.files[-1].last_offset, position)
    decode = EventDeserializer(check_envelope=False)
    applied = 0
    for before, entry in plan.files:
        records = verify_file(entry, store.read_file(entry.file), manifest, before, decode)
        # whole, as the topic redelivers an uncommitted batch: records up to the anchor are passed over
        # by the chain check and events already applied by the planner (a bound stopped inside a file)
        before_anchor = job.anchor.offset if job.anchor is not None else -1
        applied += sum(1 for r in records if r.offset > before_anchor)
        try:
            apply_records(job, [(r.offset, r.value) for r in records], settings.scale.max_events_per_trigger)
        except UntilReached as reached:  # up to the bound: the job then stops there at once
            log.info("catch-up from the archive %s", reached)
            break
        log.info("caught up from the archive: %s", entry.describe())
    if resume_at is not None and resume_at < low:
        _move_aside(settings.layout.checkpoint_dir)
    return applied


def topic_start(settings: TargetSettings) -> int:
    """The topic's first offset (its low watermark; 0 for a topic the broker does not have)."""
    from confluent_kafka import Consumer

    from streamer.kafka.client_log import with_client_log
    from streamer.kafka.topics import watermarks

    config = {"bootstrap.servers": settings.kafka.bootstrap_servers,
              "group.id": f"streamer-check-{settings.source_id}", "enable.auto.commit": False,
              **settings.kafka.config}
    consumer = Consumer(with_client_log(config))
    try:
        marks = watermarks(consumer, settings.kafka.topic, 0)
    finally:
        consumer.close()
    return 0 if marks is None else marks[0]


def _move_aside(checkpoint_dir: str) -> None:
    """A local checkpoint (``resume_offset`` reads only those) renamed beside itself."""
    path = _local(checkpoint_dir)
    assert path is not None
    aside = path.with_name(f"{path.name}.before-archive-{int(time.time() * 1000)}")
    path.rename(aside)
    log.warning("Spark checkpoint %s resumed before the topic's first offset: moved to %s; the query "
                "starts at the topic's first offset and the event chain continues from the archive",
                path, aside)
