"""Checking an archive file against its manifest entry and the chain, before anything of it is used.

A file is accepted whole or not at all: its size and sha256 are the manifest's, it decodes, it holds
the entry's count of records at strictly increasing offsets from the entry's first to its last, each
record names the one before it as its predecessor (when it names one), its ends are the entry's, and
(given ``decode``) every record's columns say what its encoded event says. Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from streamer.archive.manifest import ArchiveError, Entry, Manifest
from streamer.archive.ocf import ArchivedRecord, FileHeader, decode
from streamer.events.model import Event


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chain_break(records: Sequence[ArchivedRecord], before: int | None = None) -> str | None:
    """Why ``records`` are not one unbroken, ordered run (None: they are). ``before``: the event id of
    the record before the first (its predecessor), when known."""
    last_offset: int | None = None
    last_event = before
    for record in records:
        if last_offset is not None and record.offset <= last_offset:
            return f"the record at offset {record.offset} comes after offset {last_offset}: out of order"
        if last_event is not None and record.prev_event_id is not None and record.prev_event_id != last_event:
            return (f"the record at offset {record.offset} (event {record.event_id}) follows event "
                    f"{record.prev_event_id}, but the record before it is event {last_event}")
        last_offset, last_event = record.offset, record.event_id
    return None


def verify_file(
    entry: Entry,
    data: bytes,
    manifest: Manifest,
    before: Entry | None,
    decode_event: Callable[[bytes], Event] | None = None,
) -> list[ArchivedRecord]:
    """The records of ``entry``'s file ``data``, or ``ArchiveError`` naming the file and its range."""
    what = entry.describe()
    if len(data) != entry.bytes:
        kind = "truncated" if len(data) < entry.bytes else "longer than written"
        raise ArchiveError(f"{what} is {kind}: {len(data)} bytes, the manifest says {entry.bytes}; nothing "
                           "from it was applied")
    digest = sha256(data)
    if digest != entry.sha256:
        raise ArchiveError(f"{what} was altered: its sha256 is {digest}, the manifest says {entry.sha256}; "
                           "nothing from it was applied")
    header, records = decode(data, what)
    if header != FileHeader(manifest.topic, manifest.partition, manifest.source_id):
        raise ArchiveError(f"{what} holds topic {header.topic!r} partition {header.partition} of source "
                           f"{header.source_id!r}, not the manifest's {manifest.topic!r} "
                           f"{manifest.partition} {manifest.source_id!r}")
    if len(records) != entry.records:
        raise ArchiveError(f"{what} holds {len(records)} records, the manifest says {entry.records}")
    broken = chain_break(records, before.last_event_id if before is not None else None)
    if broken is not None:
        raise ArchiveError(f"{what}: {broken}; nothing from it was applied")
    first, last = records[0], records[-1]
    ends = (first.offset, last.offset, first.event_id, last.event_id, first.prev_event_id, last.prev_event_id)
    expected = (entry.first_offset, entry.last_offset, entry.first_event_id, entry.last_event_id,
                entry.first_prev_event_id, entry.last_prev_event_id)
    if ends != expected:
        raise ArchiveError(f"{what}: its records run offsets {first.offset}..{last.offset}, events "
                           f"{first.event_id}..{last.event_id} (predecessors {first.prev_event_id}, "
                           f"{last.prev_event_id}), not as the manifest says")
    if decode_event is not None:
        for record in records:
            check_record(record, decode_event, what)
    return records


def check_record(record: ArchivedRecord, decode_event: Callable[[bytes], Event], what: str) -> Event:
    """The record's event, refused unless its columns (what the chain was checked on) agree with it."""
    try:
        event = decode_event(record.value)
    except Exception as exc:  # a CodecError, or anything else a corrupt value makes the decoder raise
        raise ArchiveError(f"{what}: the record at offset {record.offset} (event {record.event_id}) does not "
                           f"decode: {exc}") from exc
    said = (record.event_id, record.prev_event_id, record.event_type)
    found = (event.event_id, event.prev_event_id, str(event.event_type))
    if said != found:
        raise ArchiveError(f"{what}: the record at offset {record.offset} says event {said[0]} after "
                           f"{said[1]} ({said[2]}), its encoded event is {found[0]} after {found[1]} "
                           f"({found[2]})")
    return event
