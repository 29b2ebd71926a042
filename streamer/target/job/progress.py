"""A target job's checkpoint of its own: what it consumed and applied, and where everyone reads it.

One object owns the job's progress outside the catalog: the newest event id consumed and each
database's last applied event (``progress.json``, read by ``status`` and the lag metric), the event
chain's anchor (the last record consumed, ``chain.py``), and the watermark readers decide by
(``watermark.py``). ``BatchApplier`` asks it to check a batch's chain before anything is applied and
hands it the batch's outcome after every step ran; the order of those writes is what readers rely
on (DESIGN invariant 2: the watermark moves only after every step of its batch).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence

from streamer import metrics
from streamer.errors import EventChainError
from streamer.events.model import Event
from streamer.metastore.catalog import Catalog
from streamer.target.apply.plan import Plan
from streamer.target.job.batch_end import BatchEndWriter
from streamer.target.job.bounded import Bounded, consumed_through
from streamer.target.job.settings import TargetSettings
from streamer.target.job.watermark import Watermark, WatermarkPublisher, compute, default_watermark_db
from streamer.target.state.chain import Anchor, ChainCheck, check_chain, read_anchor, write_anchor
from streamer.target.state.status import lag_events, read_progress, write_progress

log = logging.getLogger(__name__)


class JobProgress:
    """The job's consumed and applied progress, its chain anchor and its watermark."""

    def __init__(
        self, settings: TargetSettings, catalog: Catalog, database_location: Callable[[str], str],
        target_db: Callable[[str], str], *, watermark_catalog: Catalog | None = None,
    ) -> None:
        """``watermark_catalog``: a connection of the watermark's own, so that a batch's end can be
        written while the next batch applies (``batch_done(later=True)``); without it, never."""
        self.settings = settings
        self.target_db = target_db
        known, self.consumed = read_progress(settings.layout.state_dir)  # the newest event id consumed
        # db -> (event id, source time) of its last applied event; kept across restarts
        self.applied_times: dict[str, tuple[int, int]] = {
            db: (int(p.get("event_id", 0)), int(p.get("event_time", 0))) for db, p in known.items()
        }
        self.anchor: Anchor | None = read_anchor(settings.layout.state_dir)  # the last record consumed
        self.chain_error: EventChainError | None = None  # set once the chain broke: the job stops
        self._anchor_held: Anchor | None = None  # the topic was seen to hold this anchor's record
        name = settings.layout.watermark_db
        if name is None:
            name = default_watermark_db(settings.source_id)
        self.watermark = WatermarkPublisher(
            watermark_catalog or catalog, name or None, database_location(name) if name else "",
            settings.source_id,
        )
        self.watermark.prepare()
        self.ends = BatchEndWriter() if watermark_catalog is not None else None
        self._ended: Watermark | None = None  # the watermark of the last batch's end (maybe unwritten)

    def check_chain(
        self, decoded: Sequence[tuple[int, Event]], record_at: Callable[[int], Event | None]
    ) -> ChainCheck:
        """Whether ``decoded`` continues the chain from the anchor; a break is kept, and raised again by
        every later batch (``EventChainError``) once this one's intact records are applied.
        ``record_at(offset)`` reads one record of the topic (``anchor_gone``)."""
        if self.chain_error is not None:
            raise self.chain_error
        gone = self.anchor_gone(decoded, record_at)
        if gone is not None:
            chain = ChainCheck(0, self.anchor, gone)
        else:
            chain = check_chain(self.settings.kafka.topic, decoded, self.anchor)
        if chain.error is not None:
            self.chain_error = chain.error
            metrics.TARGET_DATA_LOSS.set(1)
            log.error("%s", chain.error)
        return chain

    def anchor_gone(
        self, decoded: Sequence[tuple[int, Event]], record_at: Callable[[int], Event | None]
    ) -> EventChainError | None:
        """Records from before the anchor come again when Spark's checkpoint trails what the job
        applied (``--batch-follow``; a crash between a batch's end and Spark's commit). The chain
        does not check them (they were checked when first consumed), so first the topic must still
        hold the anchor's record: else they are another topic's (recreated and refilled) and none
        may be applied. Read once per anchor, from the batch when it holds that offset."""
        anchor, topic = self.anchor, self.settings.kafka.topic
        if anchor is None or anchor.topic != topic or anchor == self._anchor_held:
            return None
        first = next((event for offset, event in decoded if offset < anchor.offset), None)
        if first is None:
            return None
        there = next((event for offset, event in decoded if offset == anchor.offset), None)
        if there is None:
            there = record_at(anchor.offset)
        if there is not None and there.event_id == anchor.event_id:
            self._anchor_held = anchor
            return None
        return EventChainError(
            topic, expected_prev=anchor.event_id,
            found_prev=there.event_id if there is not None else first.event_id,
            event_id=there.event_id if there is not None else first.event_id,
            event_type=str((there or first).event_type), offset=anchor.offset, last_offset=anchor.offset,
            same_offset=True, missing=there is None,
        )

    def publish(self, progress: dict[str, int], stuck: Collection[str], *, consumed: int | None = None,
                halt: bool = False) -> None:
        """Publish the watermark as of ``consumed`` (default: the newest event id whose batch is fully
        applied); at a ``halt`` mid-batch the previous batch's, so that the halt is known before any
        later step (failing to publish a halt stops the batch). Nothing to write when the last
        batch's end holds the same ids (being written, or written)."""
        mark = self._mark(progress, stuck, self.consumed if consumed is None else consumed)
        if mark.same_ids(self._ended):
            return
        self.settle()
        self.watermark.publish(mark, required=halt)

    def _mark(self, progress: dict[str, int], stuck: Collection[str], consumed: int) -> Watermark:
        return compute(progress, consumed, stuck, self.target_db, self.settings.source_id,
                       consistency=self.settings.scale.consistency)

    def settle(self) -> None:
        """Wait until the last batch's end is written (``batch_done(later=True)``); raises its error."""
        if self.ends is not None:
            self.ends.settle()

    def close(self) -> None:
        """Write the last batch's end, if it waits, and stop its thread."""
        if self.ends is not None:
            self.ends.close()

    def applied(self, the_plan: Plan, applied: Iterable[int]) -> list[Event]:
        """Note each step of ``the_plan`` whose last event is in ``applied``; returns their events."""
        done = set(applied)
        events: list[Event] = []
        for step in the_plan.steps:
            if step.last_event_id in done:
                self.applied_times[step.db] = (step.last_event_id, step.last.source.event_time)
                events.extend(step.events)
        return events

    def batch_done(
        self, the_plan: Plan, bounded: Bounded, newest: int, any_applied: bool, chain: ChainCheck,
        progress: dict[str, int], stuck: Collection[str], *, later: bool = False,
    ) -> None:
        """After every step of a batch: the consumed id and applied times (``progress.json``), then the
        watermark, and the chain's anchor, in that order; ``later`` (with a watermark connection of
        its own): written on the ``BatchEndWriter``'s thread while the caller goes on."""
        state_dir = self.settings.layout.state_dir
        consumed = consumed_through(bounded, newest, self.settings.kafka.until_event)
        times: dict[str, tuple[int, int]] | None = None
        if any_applied or consumed > self.consumed:
            self.consumed = max(self.consumed, consumed)
            times = dict(self.applied_times)  # as of now: the next batch changes the job's own
        mark = self._mark(progress, stuck, self.consumed)  # after every step (DESIGN invariant 2)
        if the_plan.source_head is not None and progress:
            metrics.TARGET_LAG_EVENTS.set(lag_events(the_plan.source_head, progress, self.consumed, stuck))
        anchor = chain.anchor if chain.anchor is not None and chain.anchor != self.anchor else None
        if anchor is not None:
            self.anchor = anchor
        self._ended, consumed_now = mark, self.consumed

        def end() -> None:
            if times is not None:
                write_progress(state_dir, times, consumed_now)
            self.watermark.publish(mark)
            if anchor is not None:
                write_anchor(state_dir, anchor)

        if later and self.ends is not None:
            self.ends.submit(end)
        else:
            self.settle()
            end()
