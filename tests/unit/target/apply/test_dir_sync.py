"""A directory sync whose source changes under it (a writer replacing files while the target copies
them) lists the source again and reaches its newer state, instead of halting the table's database;
a source that never holds still fails after a few listings."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.errors import ChecksumMismatchError
from streamer.target.apply.dir_sync import ATTEMPTS, ChecksumCache, sync_dir
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.sources import SourceRules


class MovingSource(ChecksumCache):
    """Each listing of the source is followed by its writer replacing every file with a new one."""

    def __init__(self, source: Path, moves: int) -> None:
        super().__init__()
        self.source, self.moves, self.listed = source, moves, 0

    def listing(self, url: str) -> dict[str, str] | None:
        out = super().listing(url)
        if url == self.source.as_uri() and self.listed < self.moves:
            self.listed += 1
            for old in list(self.source.iterdir()):
                old.unlink()
            (self.source / f"part-{self.listed}").write_bytes(f"rows {self.listed}".encode())
        return out


def _dirs(tmp_path: Path) -> tuple[Path, Path, FileCopier]:
    source, target = tmp_path / "src" / "t", tmp_path / "wh" / "a.db" / "t"
    source.mkdir(parents=True)
    target.mkdir(parents=True)
    (source / "part-0").write_bytes(b"rows 0")
    roots = TargetPaths((tmp_path / "wh").as_uri(), (tmp_path / "ext").as_uri()).roots
    rules = SourceRules(prefixes=(source.parent.as_uri(),))  # a sync reads only below a declared prefix
    return source, target, FileCopier(max_workers=2, roots=roots, sources=rules)


def test_a_source_replaced_during_the_sync_is_listed_again_and_reached(tmp_path: Path) -> None:
    source, target, copier = _dirs(tmp_path)
    done = sync_dir(copier, source.as_uri(), target.as_uri(), MovingSource(source, moves=1), event_id=7,
                    database=None)
    assert done is not None and done.copied == 1
    assert {p.name: p.read_bytes() for p in target.iterdir()} == {"part-1": b"rows 1"}


def test_a_source_that_never_holds_still_fails_naming_the_event(tmp_path: Path) -> None:
    source, target, copier = _dirs(tmp_path)
    with pytest.raises(ChecksumMismatchError) as err:
        sync_dir(copier, source.as_uri(), target.as_uri(), MovingSource(source, moves=ATTEMPTS), event_id=7,
                 database=None)
    assert err.value.event_id == 7
    assert not [p for p in target.iterdir() if not p.name.startswith(".")]  # nothing half-copied
