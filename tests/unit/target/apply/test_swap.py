"""Atomic publish of an INSERT's files by exchanging directories (real files, real renameat2)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from streamer.errors import PathEscapeError
from streamer.target.apply import swap
from streamer.target.apply.files import TMP_PREFIX, FileCopier, Staged, clear_dir, link_dir
from streamer.target.apply.paths import Root
from streamer.target.apply.swap import OLD_INFIX, SWAP_INFIX, publish_swapped, supports_exchange
from tests.unit.target.builders import write_source_file


@pytest.fixture
def dst(tmp_path: Path) -> Path:
    if not supports_exchange(str(tmp_path)):
        pytest.skip("this filesystem has no RENAME_EXCHANGE")
    out = tmp_path / "dst"
    out.mkdir()
    return out


def _stage(src: Path, dst: Path, directory: Path, files: dict[str, bytes]) -> Staged:
    refs = [write_source_file(src, name, body) for name, body in files.items()]
    copier = FileCopier(max_workers=2, roots=[Root.parse(str(dst))])
    return copier.stage_all(refs, lambda r: str(directory))


def _names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if OLD_INFIX not in p.name}


def test_insert_adds_files_and_keeps_the_others_as_the_same_inodes(tmp_path: Path, dst: Path) -> None:
    part = dst / "t" / "dt=1"
    part.mkdir(parents=True)
    (part / "old").write_bytes(b"old")
    (part / ".hidden").write_bytes(b"h")
    inode = (part / "old").stat().st_ino
    staged = _stage(tmp_path / "src", dst, part, {"new": b"new"})
    report = publish_swapped(staged, str(part), replace=False, roots=[Root.parse(str(dst))], event_id=7)
    assert report is not None and report.files == 1
    assert _names(part) == {"old", "new", ".hidden"}
    assert (part / "old").stat().st_ino == inode, "kept files are linked, not copied"
    assert _names(dst / "t") == {"dt=1"}, "the old tree is set aside"


def test_overwrite_keeps_only_the_new_files_and_hidden_entries(tmp_path: Path, dst: Path) -> None:
    table = dst / "t"
    (table / "sub").mkdir(parents=True)
    (table / "sub" / "x").write_bytes(b"x")
    (table / "old").write_bytes(b"old")
    (table / "_SUCCESS").write_bytes(b"")
    staged = _stage(tmp_path / "src", dst, table, {"new1": b"1", "new2": b"2"})
    assert publish_swapped(staged, str(table), replace=True, roots=[Root.parse(str(dst))], event_id=8)
    assert _names(table) == {"new1", "new2", "_SUCCESS"}


def test_a_new_directory_appears_whole_and_a_crash_leftover_is_replaced(tmp_path: Path, dst: Path) -> None:
    table = dst / "t"
    table.mkdir()
    leftover = table / f".dt=2{SWAP_INFIX}9"
    leftover.mkdir()
    (leftover / "junk").write_bytes(b"j")
    part = table / "dt=2"
    staged = _stage(tmp_path / "src", dst, part, {"a": b"a", "b": b"b"})
    assert publish_swapped(staged, str(part), replace=False, roots=[Root.parse(str(dst))], event_id=9)
    assert _names(part) == {"a", "b"}
    assert _names(table) == {"dt=2"}


def test_a_symlink_in_the_directory_is_refused(tmp_path: Path, dst: Path) -> None:
    part = dst / "t"
    part.mkdir()
    os.symlink("/etc/passwd", part / "evil")
    staged = _stage(tmp_path / "src", dst, part, {"a": b"a"})
    with pytest.raises(PathEscapeError):
        publish_swapped(staged, str(part), replace=False, roots=[Root.parse(str(dst))], event_id=10)
    assert _names(part) == {"evil"}, "nothing published"


# 60 INSERTs of four files, every fourth an OVERWRITE
MULTI_FILE = [(4, i % 4 == 3) for i in range(60)]


def _listings(
    tmp_path: Path, dst: Path, swapped: bool, rounds: list[tuple[int, bool]] = MULTI_FILE
) -> tuple[list[frozenset[str]], set[frozenset[str]]]:
    """What a reader listing the table in a tight loop saw while INSERTs of ``rounds`` (files, whether
    an OVERWRITE) were published; and the states that existed."""
    table = dst / "t"
    table.mkdir()
    roots = [Root.parse(str(dst))]
    valid: set[frozenset[str]] = {frozenset()}
    stop = threading.Event()
    seen: list[frozenset[str]] = []

    def lister() -> None:
        while not stop.is_set():
            try:
                seen.append(frozenset(n for n in os.listdir(table) if not n.startswith((".", "_"))))
            except FileNotFoundError:
                seen.append(frozenset({"<missing>"}))

    reader = threading.Thread(target=lister)
    reader.start()
    try:
        current: set[str] = set()
        for i, (width, overwrite) in enumerate(rounds):
            files = {f"f{i}_{k}": bytes([i, k]) for k in range(width)}
            staged = _stage(tmp_path / f"src{i}", dst, table, files)
            if swapped:
                publish_swapped(staged, str(table), replace=overwrite, roots=roots, event_id=i)
            else:  # file by file, as where directories cannot be exchanged
                staged.publish()
                if overwrite:
                    clear_dir(str(table), roots, keep=set(files))
            current = set(files) if overwrite else current | set(files)
            valid.add(frozenset(current))
    finally:
        stop.set()
        reader.join()
    assert len(seen) > 100, "the lister did not run"
    return seen, valid


def test_a_lister_never_sees_part_of_an_insert_or_a_mix_of_an_overwrite(tmp_path: Path, dst: Path) -> None:
    seen, valid = _listings(tmp_path, dst, swapped=True)
    bad = [s for s in seen if s not in valid]
    assert not bad, f"{len(bad)} listings of states that never existed, e.g. {sorted(bad[0])}"


def test_a_one_file_append_is_renamed_in_and_never_shows_a_state_that_did_not_exist(
    tmp_path: Path, dst: Path
) -> None:
    """An append of one file straight into the directory is published by that file's rename: the
    directory stays the same (no swap, nothing set aside), and a lister still sees only real states
    across one-file appends, multi-file appends and overwrites."""
    table = dst / "t"
    table.mkdir()
    (table / "old").write_bytes(b"old")
    roots = [Root.parse(str(dst))]
    inode = table.stat().st_ino
    staged = _stage(tmp_path / "src", dst, table, {"new": b"new"})
    assert publish_swapped(staged, str(table), replace=False, roots=roots, event_id=1)
    assert table.stat().st_ino == inode, "the directory itself was not swapped"
    assert {p.name for p in dst.iterdir()} == {"t"}, "no shadow, no set-aside tree"
    assert _names(table) == {"old", "new"} and (table / "new").read_bytes() == b"new"
    staged = _stage(tmp_path / "src2", dst, table, {"a": b"a", "b": b"b"})
    assert publish_swapped(staged, str(table), replace=False, roots=roots, event_id=2)
    assert table.stat().st_ino != inode, "two files still appear in one swap"
    deep = table / "delta_1_1"
    staged = _stage(tmp_path / "src3", dst, deep, {"bucket_0": b"d"})
    inode = table.stat().st_ino
    assert publish_swapped(staged, str(table), replace=False, roots=roots, event_id=3)
    assert table.stat().st_ino != inode, "a file in a new subdirectory appears with it in one swap"


def test_an_append_of_no_file_into_a_missing_directory_still_creates_it(tmp_path: Path, dst: Path) -> None:
    """A zero-row INSERT into a directory that is gone shows it again, empty, as the swap always did."""
    part = dst / "t" / "dt=9"
    (dst / "t").mkdir()
    staged = Staged(roots=[Root.parse(str(dst))])
    assert publish_swapped(staged, str(part), replace=False, roots=[Root.parse(str(dst))], event_id=4)
    assert part.is_dir() and _names(part) == set()


def test_a_lister_sees_only_real_states_across_one_file_appends(tmp_path: Path, dst: Path) -> None:
    rounds = [(1 if i % 3 else 3, i % 5 == 4) for i in range(80)]  # mostly one file, some overwrites
    seen, valid = _listings(tmp_path, dst, swapped=True, rounds=rounds)
    bad = [s for s in seen if s not in valid]
    assert not bad, f"{len(bad)} listings of states that never existed, e.g. {sorted(bad[0])}"


def test_file_by_file_publishing_is_caught_by_the_same_lister(tmp_path: Path, dst: Path) -> None:
    """The control: without the exchange the lister sees states that never existed (it can fail)."""
    seen, valid = _listings(tmp_path, dst, swapped=False)
    assert [s for s in seen if s not in valid]


def test_replaced_trees_are_removed_after_the_grace_period(
    tmp_path: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(swap, "GRACE_SECONDS", 0.2)
    part = dst / "t" / "dt=1"
    part.mkdir(parents=True)
    (part / "old").write_bytes(b"old")
    (dst / "t" / f".dt=0{OLD_INFIX}1").mkdir()  # a stale one a stopped process left
    staged = _stage(tmp_path / "src", dst, part, {"new": b"new"})
    publish_swapped(staged, str(part), replace=True, roots=[Root.parse(str(dst))], event_id=3)
    assert not (dst / "t" / f".dt=0{OLD_INFIX}1").exists(), "stale trees are swept"
    aside = [p for p in (dst / "t").iterdir() if OLD_INFIX in p.name]
    assert len(aside) == 1 and (aside[0] / "old").exists(), "kept for readers still listing it"
    deadline = time.monotonic() + 10
    while aside[0].exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not aside[0].exists()


def _staging_files(root: Path) -> list[Path]:
    return sorted(root.rglob(f"{TMP_PREFIX}*"))


@pytest.mark.parametrize("overwrite", [False, True], ids=["insert", "overwrite"])
def test_a_killed_copys_staging_file_does_not_outlive_the_replayed_publish(
    tmp_path: Path, dst: Path, overwrite: bool
) -> None:
    """A process killed while staging leaves ``.streamer-tmp-*`` in the table directory; the replay
    swaps that directory away, and the set-aside tree (kept for readers) must not carry it along."""
    table = dst / "db.db" / "tail51"
    table.mkdir(parents=True)
    (table / "000000_0").write_bytes(b"old")
    stray = table / f"{TMP_PREFIX}000000_0-0123456789ab"
    stray.write_bytes(b"half a copy")
    staged = _stage(tmp_path / "src", dst, table, {"000000_0": b"new", "000001_0": b"n2"})
    assert publish_swapped(staged, str(table), replace=overwrite, roots=[Root.parse(str(dst))], event_id=51)
    assert _names(table) == {"000000_0", "000001_0"}
    aside = [p for p in (dst / "db.db").iterdir() if OLD_INFIX in p.name]
    assert len(aside) == 1 and (aside[0] / "000000_0").read_bytes() == b"old", "kept for readers"
    assert _staging_files(dst) == [], "the dead copy's staging file is gone at once"


def test_a_one_file_append_drops_a_killed_copys_staging_file_too(tmp_path: Path, dst: Path) -> None:
    table = dst / "db.db" / "tail52"
    table.mkdir(parents=True)
    (table / "000000_0").write_bytes(b"old")
    (table / f"{TMP_PREFIX}000001_0-0123456789ab").write_bytes(b"half a copy")
    staged = _stage(tmp_path / "src", dst, table, {"000001_0": b"new"})
    assert publish_swapped(staged, str(table), replace=False, roots=[Root.parse(str(dst))], event_id=52)
    assert _names(table) == {"000000_0", "000001_0"}
    assert (table / "000001_0").read_bytes() == b"new"
    assert _staging_files(dst) == [], "the dead copy's staging file is gone at once"


def test_trees_a_stopped_process_set_aside_are_removed_in_their_grace_everywhere(
    tmp_path: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed during the grace period leaves its set-aside trees behind; the next one
    removes them when their grace is over (not before: a reader may list them), even in directories
    it never publishes into, and their staging files at once."""
    monkeypatch.setattr(swap, "GRACE_SECONDS", 3.0)
    now = time.time_ns()
    here = dst / "a.db" / f".t1{OLD_INFIX}{now}"  # beside the directory published into
    elsewhere = dst / "b.db" / "t2" / f".dt=1{OLD_INFIX}{now}"  # nothing published there again
    expired = dst / "c.db" / f".t3{OLD_INFIX}1"
    for tree in (here, elsewhere, expired):
        tree.mkdir(parents=True)
        (tree / "000000_0").write_bytes(b"old")
        (tree / f"{TMP_PREFIX}000000_0-0123456789ab").write_bytes(b"half")
    table = dst / "a.db" / "t"
    staged = _stage(tmp_path / "src", dst, table, {"f": b"f"})
    assert publish_swapped(staged, str(table), replace=False, roots=[Root.parse(str(dst))], event_id=5)
    assert (here / "000000_0").exists(), "still in its grace period: a reader may be listing it"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_staging_files(dst) or expired.exists()):
        time.sleep(0.02)
    assert _staging_files(dst) == [] and not expired.exists()
    assert (elsewhere / "000000_0").exists(), "still in its grace period"
    while time.monotonic() < deadline and (here.exists() or elsewhere.exists()):
        time.sleep(0.05)
    assert not here.exists() and not elsewhere.exists()


def test_a_dropped_directory_goes_in_one_rename_and_is_deleted_after_the_grace_period(
    dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reaped: list[tuple[str, float]] = []
    monkeypatch.setattr(swap._reaper, "add", lambda path, delay: reaped.append((path, delay)))
    part = dst / "a.db" / "t" / "dt=1"
    (part / "sub").mkdir(parents=True)
    for i in range(3):
        (part / f"00000{i}_0").write_bytes(b"x")
    (part / "sub" / f"{TMP_PREFIX}f-0123456789ab").write_bytes(b"half")  # a killed copy's
    inode = part.stat().st_ino
    assert swap.remove_aside(str(part), [Root.parse(str(dst))], event_id=4) == str(dst / "a.db" / "t")
    assert not part.exists() and _names(dst / "a.db" / "t") == set()
    aside = [p for p in (dst / "a.db" / "t").iterdir() if OLD_INFIX in p.name]
    assert len(aside) == 1 and aside[0].name.startswith(".dt=1") and aside[0].stat().st_ino == inode
    assert sorted(p.name for p in aside[0].iterdir() if p.is_file()) == ["000000_0", "000001_0", "000002_0"]
    assert _staging_files(dst) == [], "a killed copy's staging file goes at once"
    # deleted by the reaper after the grace period (the background adopt may find it and schedule it too)
    assert (str(aside[0]), swap.GRACE_SECONDS) in reaped and {p for p, _ in reaped} == {str(aside[0])}
    assert swap.remove_aside(str(part), [Root.parse(str(dst))], event_id=4), "absent: a replay"


def test_a_renamed_table_leaves_the_hidden_trees_and_staging_files_behind(dst: Path) -> None:
    table = dst / "a.db" / "t"
    (table / "dt=1").mkdir(parents=True)
    (table / "dt=1" / "000000_0").write_bytes(b"x")
    (table / "dt=1" / f"{TMP_PREFIX}000001_0-0123456789ab").write_bytes(b"half")
    (table / f".dt=0{OLD_INFIX}{time.time_ns()}").mkdir()  # a dropped partition, set aside
    (table / f".dt=2{SWAP_INFIX}7").mkdir()  # a killed swap's shadow
    roots = [Root.parse(str(dst))]
    assert link_dir(str(table), str(dst / "a.db" / "u"), roots, event_id=8)
    linked = sorted(str(p.relative_to(dst / "a.db" / "u")) for p in (dst / "a.db" / "u").rglob("*"))
    assert linked == ["dt=1", "dt=1/000000_0"]


def test_a_lister_sees_a_dropped_directory_whole_or_not_at_all(dst: Path) -> None:
    """Deleted in place, a directory shows a reader its files going one by one; set aside, never."""
    roots = [Root.parse(str(dst))]
    table = dst / "t"
    seen: list[int] = []
    stop = threading.Event()

    def lister(part: Path) -> None:
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):
                seen.append(sum(1 for _ in os.scandir(part)))

    for round_ in range(20):
        part = table / f"dt={round_}"
        part.mkdir(parents=True)
        for i in range(200):
            (part / f"{i:06d}_0").write_bytes(b"")
        reader = threading.Thread(target=lister, args=(part,))
        reader.start()
        time.sleep(0.002)
        assert swap.remove_aside(str(part), roots, event_id=round_)
        stop.set()
        reader.join()
        stop.clear()
    assert seen and set(seen) == {200}


def test_a_symlinked_directory_is_not_removed_through(tmp_path: Path, dst: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"k")
    (dst / "t").mkdir()
    os.symlink(outside, dst / "t" / "dt=1")
    with pytest.raises(PathEscapeError, match="symlink"):
        swap.remove_aside(str(dst / "t" / "dt=1"), [Root.parse(str(dst))], event_id=6)
    assert (outside / "keep").exists() and (dst / "t" / "dt=1").is_symlink()


def test_a_directory_that_cannot_be_renamed_is_left_to_the_in_place_deletion(
    dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = dst / "t" / "dt=1"
    part.mkdir(parents=True)

    def refused(src: str, dst_: str) -> None:
        raise OSError(16, "Device or resource busy")  # a mount point

    monkeypatch.setattr(swap.os, "rename", refused)
    assert not swap.remove_aside(str(part), [Root.parse(str(dst))], event_id=7)
    assert part.exists()
