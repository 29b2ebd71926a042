"""The event-id chain of a topic: proof that a target consumed every record the source published.

Every record names its predecessor's event id (``Event.prev_event_id``); a target keeps the last
record it consumed (the *anchor*) under ``--state-dir`` and checks each later record against it,
raising ``EventChainError`` at a gap. The rules: docs/design/consistency.md. The check is pure;
reading and writing the anchor file are the only I/O here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from streamer.errors import EventChainError
from streamer.events.model import Event
from streamer.target.state.files import (
    StateFileError,
    expect_int,
    expect_object,
    expect_str,
    field,
    read_json,
    write_json,
)
from streamer.target.state.lock import state_lock

log = logging.getLogger(__name__)

CHAIN_FILE = "chain.json"


@dataclass(frozen=True)
class Anchor:
    """The last record a target consumed from ``topic``."""

    topic: str
    offset: int
    event_id: int


@dataclass(frozen=True)
class ChainCheck:
    """The outcome for one batch: ``records[:intact]`` continue the chain; ``anchor`` is the last of
    them (to persist once they are applied); ``error`` is the break, if there is one."""

    intact: int
    anchor: Anchor | None
    error: EventChainError | None = None


def check_chain(topic: str, records: Sequence[tuple[int, Event]], anchor: Anchor | None) -> ChainCheck:
    """Check ``(offset, event)`` records, in offset order, against the last consumed one."""
    if anchor is not None and anchor.topic != topic:
        anchor = None
    for index, (offset, event) in enumerate(records):
        if anchor is not None:
            if offset < anchor.offset:
                continue  # delivered again: it was checked when first consumed
            if offset == anchor.offset:
                if event.event_id != anchor.event_id:
                    return ChainCheck(index, anchor, _error(topic, anchor, offset, event, event.event_id))
                continue
            if event.prev_event_id is not None and event.prev_event_id != anchor.event_id:
                return ChainCheck(index, anchor, _error(topic, anchor, offset, event, event.prev_event_id))
        anchor = Anchor(topic, offset, event.event_id)
    return ChainCheck(len(records), anchor)


def _error(topic: str, anchor: Anchor, offset: int, event: Event, found: int) -> EventChainError:
    return EventChainError(
        topic,
        expected_prev=anchor.event_id,
        found_prev=found,
        event_id=event.event_id,
        event_type=str(event.event_type),
        offset=offset,
        last_offset=anchor.offset,
        same_offset=offset == anchor.offset,
    )


# --- the anchor file ----------------------------------------------------------------------------


def read_anchor(state_dir: str | Path) -> Anchor | None:
    """The anchor kept in ``<state_dir>/chain.json`` (None before the first batch)."""
    path = Path(state_dir) / CHAIN_FILE
    try:
        raw = read_json(path)
        if raw is None:
            return None
        body = expect_object(raw, path, "the anchor")
        return Anchor(
            expect_str(field(body, "topic", path, "the anchor"), path, "topic"),
            expect_int(field(body, "offset", path, "the anchor"), path, "offset"),
            expect_int(field(body, "event_id", path, "the anchor"), path, "event_id"),
        )
    except StateFileError as exc:
        raise StateFileError(
            f"{exc}; remove it with `streamer target reset-chain` to start a new chain"
        ) from exc


def write_anchor(state_dir: str | Path, anchor: Anchor) -> None:
    """Replace the anchor atomically (a crash leaves the old one, which a redelivery passes)."""
    with state_lock(state_dir):
        write_json(Path(state_dir) / CHAIN_FILE,
                   {"topic": anchor.topic, "offset": anchor.offset, "event_id": anchor.event_id})


def reset_anchor(state_dir: str | Path) -> Anchor | None:
    """Forget the anchor (an operator accepts a loss): the next record consumed starts a new chain."""
    with state_lock(state_dir):
        path = Path(state_dir) / CHAIN_FILE
        try:
            anchor = read_anchor(state_dir)
        except StateFileError as exc:
            log.warning("removing an unreadable event chain anchor: %s", exc)
            anchor = None
        path.unlink(missing_ok=True)
    if anchor is not None:
        log.warning("event chain reset: the anchor was offset %d, event %d of topic %s",
                    anchor.offset, anchor.event_id, anchor.topic)
    return anchor
