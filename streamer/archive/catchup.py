"""Which archive files a target past the topic's retention needs (``target run --archive``). Pure.

A target's position is the next offset it would read: its Spark checkpoint's (the offset the next
micro-batch starts at), else the one after its chain anchor, else 0 (a new target reads the topic
from its start). When that is older than the topic's first offset, the records in between are
only in the archive: the files from the one holding the position on are applied first, then the
topic is read from its first offset, and the event chain (checked on every record, archived or not)
proves that the two meet. A gap between them is the chain's data-loss error, as without an archive.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamer.archive.manifest import Entry, Manifest
from streamer.errors import ConfigError, DataLossError


@dataclass(frozen=True)
class CatchUp:
    """The files to apply (each with the entry before it, for the chain) and the lowest offset to
    apply from; no files: nothing to catch up."""

    position: int
    files: tuple[tuple[Entry | None, Entry], ...] = ()

    @property
    def needed(self) -> bool:
        return bool(self.files)


def position_of(resume_offset: int | None, anchor_offset: int | None) -> int:
    """The next offset a target reads: its checkpoint's, else after its anchor, else the start."""
    if resume_offset is not None:
        return resume_offset
    return anchor_offset + 1 if anchor_offset is not None else 0


def plan_catch_up(
    manifest: Manifest | None, topic: str, source_id: str, position: int, low: int, archive: str
) -> CatchUp:
    """The archive files a target at ``position`` needs when the topic starts at ``low``."""
    if position >= low:
        return CatchUp(position)
    if manifest is None or not manifest.files:
        raise DataLossError(
            f"data loss: the target reads topic {topic!r} from offset {position}, but the topic starts at "
            f"offset {low} and archive {archive} holds no records; rebuild the target from a bootstrap"
        )
    if (manifest.topic, manifest.source_id) != (topic, source_id):
        raise ConfigError(f"--archive {archive} archives topic {manifest.topic!r} of source "
                          f"{manifest.source_id!r}, not {topic!r} of {source_id!r}")
    files = []
    before: Entry | None = None
    for entry in manifest.files:
        if entry.last_offset >= position:
            files.append((before, entry))
        before = entry
    return CatchUp(position, tuple(files))  # none: the archive ends before the position (the chain decides)
