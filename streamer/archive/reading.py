"""Reading an archive: its manifest, its files verified whole, in order, from a target's position."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from streamer.archive.manifest import ArchiveError, Entry, Manifest
from streamer.archive.ocf import ArchivedRecord
from streamer.archive.store import ArchiveStore
from streamer.archive.verify import verify_file
from streamer.events.codec import EventDeserializer
from streamer.target.state.chain import Anchor


def read_archive(url: str) -> tuple[ArchiveStore, Manifest]:
    store = ArchiveStore(url)
    manifest = store.read_manifest()
    if manifest is None:
        raise ArchiveError(f"{url}: no archive here (no manifest.json)")
    return store, manifest


def pending(manifest: Manifest, anchor: Anchor | None) -> Iterator[tuple[Entry | None, Entry, bool]]:
    """(the entry before, entry, whether it is consumed already) for every file, in order."""
    before: Entry | None = None
    for entry in manifest.files:
        done = anchor is not None and anchor.topic == manifest.topic and entry.last_offset <= anchor.offset
        yield before, entry, done
        before = entry


def verified_records(store: ArchiveStore, manifest: Manifest, before: Entry | None, entry: Entry,
                     decode: EventDeserializer) -> list[ArchivedRecord]:
    return verify_file(entry, store.read_file(entry.file), manifest, before, decode)


def archive_replay(store: ArchiveStore, manifest: Manifest,
                   decode: EventDeserializer) -> Callable[[int, int], Iterable[tuple[int, bytes]]]:
    """Held events re-read from the archive: records at offsets ``start <= offset < end``; a range
    the archive does not hold whole is an ``ArchiveError``, never fewer events."""

    def replay(start: int, end: int) -> Iterator[tuple[int, bytes]]:
        first = manifest.files[0].first_offset if manifest.files else None
        last = manifest.files[-1].last_offset if manifest.files else -1
        if first is None or start < first or end > last + 1:
            raise ArchiveError(f"held events at offsets {start}..{end - 1} are to be re-read, but archive "
                               f"{store.url} holds offsets {first}..{last}")
        for before, entry, _ in pending(manifest, None):
            if entry.last_offset < start or entry.first_offset >= end:
                continue
            for record in verified_records(store, manifest, before, entry, decode):
                if start <= record.offset < end:
                    yield record.offset, record.value

    return replay


