"""The archive's manifest: which files hold which records, and the proof that they chain.

One JSON document, ``manifest.json`` in the archive directory (schema in docs/dr.md, "The archive
manifest"). It is the archive's progress: a file is part of the archive only once its entry is in
the manifest, and the archiver resumes after the last entry's last offset. Everything here is pure:
parsing, checking and extending a manifest; reading and writing it is ``streamer.archive.store``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from streamer.errors import StreamerError

MANIFEST_NAME = "manifest.json"
FORMAT = "streamer-archive"
VERSION = 1
FILE_PATTERN = re.compile(r"^events-(\d{20})-(\d{20})\.avro$")


class ArchiveError(StreamerError):
    """An archive that cannot be used as it is: a manifest or file that is malformed, altered, out of
    order or does not continue the chain. The message names the file and its event range."""


@dataclass(frozen=True)
class Entry:
    """One archive file: the records of offsets ``first_offset..last_offset`` (inclusive) of the
    topic's partition, events ``first_event_id..last_event_id``."""

    file: str
    first_offset: int
    last_offset: int
    first_event_id: int
    last_event_id: int
    # the chain at both ends: the prev_event_id the first and the last record carry (None: names none)
    first_prev_event_id: int | None
    last_prev_event_id: int | None
    records: int
    bytes: int
    sha256: str
    written_ms: int = 0

    def describe(self) -> str:
        """How an error names the file: its name and the events and offsets it holds."""
        return (f"archive file {self.file} (events {self.first_event_id}..{self.last_event_id}, "
                f"offsets {self.first_offset}..{self.last_offset})")


@dataclass(frozen=True)
class Manifest:
    """The archive of one partition of ``topic``, as published by source ``source_id``."""

    topic: str
    source_id: str
    partition: int = 0
    files: tuple[Entry, ...] = field(default_factory=tuple)

    @property
    def next_offset(self) -> int | None:
        """The offset the archive continues from (None: empty, it starts where the topic does)."""
        return self.files[-1].last_offset + 1 if self.files else None

    @property
    def last_event_id(self) -> int | None:
        return self.files[-1].last_event_id if self.files else None

    @property
    def records(self) -> int:
        return sum(e.records for e in self.files)

    def with_entry(self, entry: Entry) -> Manifest:
        """The manifest with ``entry`` appended, refused unless it continues the last one."""
        check_follows(self.files[-1] if self.files else None, entry)
        return replace(self, files=(*self.files, entry))


def file_name(first_offset: int, last_offset: int) -> str:
    """The archive file of a range: fixed width, so names sort as their offsets do."""
    return f"events-{first_offset:020d}-{last_offset:020d}.avro"


def check_follows(before: Entry | None, entry: Entry) -> None:
    """``entry`` is consistent in itself and continues ``before`` (offsets after it, and its first
    record names ``before``'s last event as its predecessor when it names one)."""
    what = entry.describe()
    if entry.records < 1 or entry.first_offset > entry.last_offset:
        raise ArchiveError(f"{what}: the manifest gives {entry.records} records for its offsets")
    if entry.records > entry.last_offset - entry.first_offset + 1:
        raise ArchiveError(f"{what}: {entry.records} records cannot fit its offsets")
    if entry.file != file_name(entry.first_offset, entry.last_offset):
        raise ArchiveError(f"{what}: the manifest names it {entry.file!r}, not "
                           f"{file_name(entry.first_offset, entry.last_offset)!r}")
    if not re.fullmatch(r"[0-9a-f]{64}", entry.sha256):
        raise ArchiveError(f"{what}: sha256 {entry.sha256!r} is not 64 lowercase hex digits")
    if before is None:
        return
    if entry.first_offset <= before.last_offset:
        raise ArchiveError(f"{what} does not come after {before.describe()}: the manifest is out of order")
    if entry.first_prev_event_id is not None and entry.first_prev_event_id != before.last_event_id:
        raise ArchiveError(
            f"{what}: its first record follows event {entry.first_prev_event_id}, but the file before it "
            f"ends at event {before.last_event_id}: records between them are missing from the archive"
        )


# --- JSON ---------------------------------------------------------------------------------------

_ENTRY_INTS = ("first_offset", "last_offset", "first_event_id", "last_event_id", "records", "bytes")
_ENTRY_OPTIONAL = ("first_prev_event_id", "last_prev_event_id")


def to_json(manifest: Manifest) -> bytes:
    """The manifest as written: UTF-8 JSON, keys sorted."""
    body = {
        "format": FORMAT,
        "version": VERSION,
        "topic": manifest.topic,
        "partition": manifest.partition,
        "source_id": manifest.source_id,
        "files": [asdict(e) for e in manifest.files],
    }
    return (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()


def from_json(data: bytes, where: str = MANIFEST_NAME) -> Manifest:
    """Parse and check a manifest: every field typed, entries in order and chained."""
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArchiveError(f"{where}: not a JSON document ({exc})") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ArchiveError(f"{where}: not a streamer archive manifest (format is not {FORMAT!r})")
    if raw.get("version") != VERSION:
        raise ArchiveError(f"{where}: manifest version {raw.get('version')!r}; this streamer reads {VERSION}")
    files = raw.get("files")
    if not isinstance(files, list):
        raise ArchiveError(f"{where}: 'files' is not a list")
    manifest = Manifest(
        topic=_str(raw, "topic", where), source_id=_str(raw, "source_id", where),
        partition=_int(raw, "partition", where),
    )
    for index, item in enumerate(files):
        manifest = manifest.with_entry(_entry(item, f"{where} files[{index}]"))
    return manifest


def _entry(item: Any, where: str) -> Entry:
    if not isinstance(item, dict):
        raise ArchiveError(f"{where}: not an object")
    values: dict[str, Any] = {k: _int(item, k, where) for k in _ENTRY_INTS}
    for key in _ENTRY_OPTIONAL:
        value = item.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ArchiveError(f"{where}: {key} is {value!r}, not an integer or null")
        values[key] = value
    values["written_ms"] = _int(item, "written_ms", where) if "written_ms" in item else 0
    return Entry(file=_str(item, "file", where), sha256=_str(item, "sha256", where), **values)


def _str(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        raise ArchiveError(f"{where}: {key} is {value!r}, not a string")
    return value


def _int(raw: Mapping[str, Any], key: str, where: str) -> int:
    value = raw.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ArchiveError(f"{where}: {key} is {value!r}, not a non-negative integer")
    return value
