"""``streamer load --from DIR``: an archive applied to a target with no broker (Hive's REPL LOAD).

The records go through the target job's own ``BatchApplier.process``, the entry ``target run``'s
micro-batches take: the same decoding, chain check against the state dir's anchor, planning, halts,
progress and watermark. The state dir is the target's: a load is resumable (files up to the anchor
are passed over), ``streamer status`` and ``streamer archive status`` show where it is, and
``streamer target run`` can go on from it on the archive's topic. Every file is verified whole
(``streamer.archive.verify``) before any record of it is applied; held events of a released database
are re-read from the archive, never from a broker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from streamer.archive.manifest import ArchiveError
from streamer.archive.reading import archive_replay, pending, read_archive, verified_records
from streamer.events.codec import EventDeserializer
from streamer.metastore.catalog import Catalog
from streamer.target.job.settings import TargetSettings
from streamer.target.state.chain import Anchor

log = logging.getLogger(__name__)


@dataclass
class LoadReport:
    """What one load did: files verified and applied, and where the target's chain ends."""

    files: int = 0
    records: int = 0
    skipped_files: int = 0  # passed over: consumed by an earlier load or run
    anchor: Anchor | None = None
    halted: dict[str, int] = field(default_factory=dict)  # source db -> halted event id
    stopped: str | None = None  # why it stopped before the archive's end (--until-event)


def load(settings: TargetSettings, url: str, catalog: Catalog,
         stop: Callable[[], bool] | None = None) -> LoadReport:
    """Apply archive ``url`` to the target of ``settings`` (its topic is the archive's) through
    ``catalog``; the state dir is claimed as ``target run`` claims it."""
    from streamer.target.job.archive_catchup import apply_records
    from streamer.target.job.bounded import UntilReached
    from streamer.target.job.preflight import claim
    from streamer.target.job.streaming import BatchApplier

    store, manifest = read_archive(url)
    if manifest.topic != settings.kafka.topic:
        raise ArchiveError(f"{url} archives topic {manifest.topic!r}, not {settings.kafka.topic!r}")
    decode = EventDeserializer(check_envelope=False)
    report = LoadReport()
    with claim(settings, catalog):
        job = BatchApplier(settings, catalog, replay=archive_replay(store, manifest, decode))
        try:
            for before, entry, _ in pending(manifest, None):
                if stop is not None and stop():
                    break
                if job.reached_until:
                    report.stopped = f"reached --until-event {settings.kafka.until_event}"
                    break
                anchor = job.anchor if job.anchor is not None and job.anchor.topic == manifest.topic else None
                if anchor is not None and entry.last_offset < anchor.offset:
                    report.skipped_files += 1  # consumed before; the file holding the anchor is fed again
                    continue
                records = verified_records(store, manifest, before, entry, decode)  # whole, before any apply
                new = sum(1 for r in records if anchor is None or r.offset > anchor.offset)
                whole = [(r.offset, r.value) for r in records]  # what was consumed before is passed over,
                try:  # as in a batch the topic delivers again (a bound may have stopped inside the file)
                    apply_records(job, whole, settings.scale.max_events_per_trigger)
                except UntilReached as reached:  # the events up to the bound are applied
                    report.stopped = str(reached)
                    break
                if new:
                    report.files += 1
                    report.records += new
                    log.info("loaded %s", entry.describe())
                else:
                    report.skipped_files += 1
        finally:
            job.runner.close()
        report.anchor = job.anchor
        report.halted = {db: halt.event_id for db, halt in job.state.halts().items()}
    return report
