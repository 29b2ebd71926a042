"""FileCopier on real temp files: verified, cm fallback, all-or-nothing, idempotent."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import struct
from pathlib import Path

import pytest

from streamer import checksums, metrics
from streamer.errors import ApplyError, ChecksumMismatchError, PathEscapeError
from streamer.events.model import FileRef
from streamer.target.apply.files import (
    TMP_PREFIX,
    FileCopier,
    clear_dir,
    move_dir,
    remove_tree,
)
from streamer.target.apply.paths import Root
from tests.unit.target.builders import write_source_file


def _visible(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _temps(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(TMP_PREFIX)]


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    src, cm, dst = tmp_path / "src", tmp_path / "cm", tmp_path / "dst"
    for d in (src, cm, dst):
        d.mkdir()
    return src, cm, dst


def _copier(dst: Path) -> FileCopier:
    """A copier into ``dst``, an object's directory: strictly inside the root (its parent), as every
    directory the applier copies into is (a root itself is refused: ``test_a_root_itself_is_refused``)."""
    return FileCopier(max_workers=3, chunk_size=7, roots=[Root.parse(str(dst.parent))])


def test_a_root_itself_is_refused(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    ref = write_source_file(src, "f", b"data")
    root_copier = FileCopier(roots=[Root.parse(str(dst))])
    with pytest.raises(PathEscapeError, match="target root itself"):
        root_copier.copy_all([ref], lambda r: str(dst), event_id=4)
    with pytest.raises(PathEscapeError, match="not inside"):  # the object's directory holds its files
        root_copier.copy_all([ref], lambda r: str(dst / "t"), obj_dir=str(dst / "u"), event_id=4)
    assert _visible(dst) == {}
    assert root_copier.copy_all([ref], lambda r: str(dst / "t"), event_id=4).files == 1


def test_copies_and_verifies(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    refs = [write_source_file(src, f"f{i}", b"x" * (i * 10)) for i in range(1, 6)]
    before = metrics.TARGET_BYTES_COPIED._value.get()
    report = _copier(dst).copy_all(refs, lambda r: str(dst / "t"))
    assert report.files == 5 and report.bytes_copied == 150 and report.cm_fallbacks == 0
    assert _visible(dst) == {f"t/f{i}": b"x" * (i * 10) for i in range(1, 6)}
    assert metrics.TARGET_BYTES_COPIED._value.get() - before == 150
    assert not _temps(dst)


def test_md5_is_supported(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    (src / "a").write_bytes(b"abc")
    ref = FileRef(uri=str(src / "a"), checksum=hashlib.md5(b"abc").hexdigest(), checksum_algorithm="MD5")
    assert _copier(dst).copy_all([ref], lambda r: str(dst)).files == 1


def test_changed_source_falls_back_to_cmroot(dirs: tuple[Path, Path, Path]) -> None:
    src, cm, dst = dirs
    ref = write_source_file(src, "part-0", b"original")
    (cm / "part-0_chk").write_bytes(b"original")
    (src / "part-0").write_bytes(b"changed later")
    ref = FileRef(**{**ref.__dict__, "cm_uri": f"file://{cm}/part-0_chk"})
    before = metrics.TARGET_CM_FALLBACKS._value.get()
    report = _copier(dst).copy_all([ref], lambda r: str(dst))
    assert report.cm_fallbacks == 1
    assert (dst / "part-0").read_bytes() == b"original"
    assert metrics.TARGET_CM_FALLBACKS._value.get() - before == 1


def test_vanished_source_falls_back_to_cmroot(dirs: tuple[Path, Path, Path]) -> None:
    src, cm, dst = dirs
    ref = write_source_file(src, "f", b"data")
    (cm / "f_x").write_bytes(b"data")
    (src / "f").unlink()
    ref = FileRef(**{**ref.__dict__, "cm_uri": str(cm / "f_x")})
    assert _copier(dst).copy_all([ref], lambda r: str(dst)).cm_fallbacks == 1


def test_neither_matching_fails_and_leaves_nothing(dirs: tuple[Path, Path, Path]) -> None:
    src, cm, dst = dirs
    good = write_source_file(src, "good", b"fine")
    bad = write_source_file(src, "bad", b"one")
    (src / "bad").write_bytes(b"two")
    (cm / "bad_x").write_bytes(b"three")
    bad = FileRef(**{**bad.__dict__, "cm_uri": str(cm / "bad_x")})
    with pytest.raises(ChecksumMismatchError) as info:
        _copier(dst).copy_all([good, bad], lambda r: str(dst / "t"), event_id=42)
    assert info.value.event_id == 42 and info.value.obj == bad.uri
    assert "bad_x" in info.value.cause
    assert _visible(dst) == {} and not _temps(dst)


def test_both_gone_fails(dirs: tuple[Path, Path, Path]) -> None:
    src, cm, dst = dirs
    ref = write_source_file(src, "f", b"data")
    (src / "f").unlink()
    ref = FileRef(**{**ref.__dict__, "cm_uri": str(cm / "nothing")})
    with pytest.raises(ChecksumMismatchError, match="missing"):
        _copier(dst).copy_all([ref], lambda r: str(dst))
    assert _visible(dst) == {}


def test_unknown_algorithm_is_an_error(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    ref = FileRef(**{**write_source_file(src, "f", b"d").__dict__, "checksum_algorithm": "crc32c"})
    with pytest.raises(ApplyError, match="unknown checksum algorithm 'crc32c'"):
        _copier(dst).copy_all([ref], lambda r: str(dst))


def test_no_checksum_copies_unverified(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    (src / "f").write_bytes(b"raw")
    before = metrics.TARGET_FILES_UNVERIFIED._value.get()
    report = _copier(dst).copy_all([FileRef(uri=str(src / "f"))], lambda r: str(dst))
    assert report.unverified == 1 and (dst / "f").read_bytes() == b"raw"
    assert metrics.TARGET_FILES_UNVERIFIED._value.get() - before == 1


def test_recopy_is_skipped_and_stale_content_replaced(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    ref = write_source_file(src, "f", b"content")
    copier = _copier(dst)
    assert copier.copy_all([ref, ref], lambda r: str(dst)).files == 1
    again = copier.copy_all([ref], lambda r: str(dst))
    assert again.files == 0 and again.skipped == 1
    (dst / "f").write_bytes(b"stale")
    assert copier.copy_all([ref], lambda r: str(dst)).files == 1
    assert (dst / "f").read_bytes() == b"content"


def test_staged_files_are_hidden_until_published(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    refs = [write_source_file(src, n, n.encode()) for n in ("a", "b")]
    staged = _copier(dst).stage_all(refs, lambda r: str(dst))
    assert _visible(dst).keys() == {t.name for t in _temps(dst)}
    assert all(t.name.startswith(".") for t in _temps(dst))
    staged.publish()
    assert _visible(dst) == {"a": b"a", "b": b"b"}
    staged2 = _copier(dst).stage_all([write_source_file(src, "c", b"c")], lambda r: str(dst))
    staged2.discard()
    assert _visible(dst) == {"a": b"a", "b": b"b"}


def test_write_failure_is_typed_and_leaves_no_partial_file(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    ref = write_source_file(src, "f", b"data")
    (dst / "t").write_bytes(b"a file where a directory should be")
    with pytest.raises(ApplyError) as info:
        _copier(dst).copy_all([ref], lambda r: str(dst / "t"), event_id=7)
    assert info.value.event_id == 7
    assert _visible(dst) == {"t": b"a file where a directory should be"}


def test_two_different_files_with_one_destination_are_refused(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    a = write_source_file(src / "x", "f", b"1")
    b = write_source_file(src / "y", "f", b"2")
    with pytest.raises(ApplyError, match="two different files"):
        _copier(dst).copy_all([a, b], lambda r: str(dst))


def test_symlinks_in_the_target_tree_are_refused(dirs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    src, _, dst = dirs
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, dst / "link")
    ref = write_source_file(src, "f", b"data")
    with pytest.raises(PathEscapeError, match="symlink"):
        _copier(dst).copy_all([ref], lambda r: str(dst / "link" / "t"), event_id=3)
    assert list(outside.iterdir()) == []
    with pytest.raises(PathEscapeError):
        remove_tree(str(dst / "link" / "t"), [Root.parse(str(dst))])
    with pytest.raises(PathEscapeError):
        clear_dir(str(dst), [Root.parse(str(dst))])


def test_clear_and_move_and_remove(dirs: tuple[Path, Path, Path]) -> None:
    _, _, dst = dirs
    roots = [Root.parse(str(dst))]
    (dst / "t" / "p=1").mkdir(parents=True)
    (dst / "t" / "p=1" / "f").write_bytes(b"1")
    (dst / "t" / "g").write_bytes(b"2")
    (dst / "t" / ".hidden").write_bytes(b"3")
    clear_dir(str(dst / "t"), roots, recursive_files=True)
    assert _visible(dst) == {"t/.hidden": b"3"} and (dst / "t" / "p=1").is_dir()
    assert move_dir(str(dst / "t"), str(dst / "u"), roots)
    assert not move_dir(str(dst / "t"), str(dst / "u"), roots)
    remove_tree(str(dst / "u"), roots)
    remove_tree(str(dst / "u"), roots)
    assert _visible(dst) == {}
    with pytest.raises(PathEscapeError):
        remove_tree(str(dst), roots)


def _tree(top: Path, files: int = 30) -> None:
    for i in range(files):
        (top / f"p={i % 3}").mkdir(parents=True, exist_ok=True)
        (top / f"p={i % 3}" / f"f{i}").write_bytes(b"x" * i)


def test_a_removed_tree_is_deleted_and_a_root_is_never_removed(dirs: tuple[Path, Path, Path]) -> None:
    _, _, dst = dirs
    roots = [Root.parse(str(dst))]
    _tree(dst / "db.db" / "t")
    remove_tree(str(dst / "db.db" / "t"), roots)
    assert not (dst / "db.db" / "t").exists() and (dst / "db.db").is_dir()
    remove_tree(str(dst / "db.db" / "t"), roots)  # a replay: absent is fine
    with pytest.raises(PathEscapeError):
        remove_tree(str(dst), roots)
    assert (dst / "db.db").is_dir()


def _hdfs(algorithm: str, data: bytes) -> str:
    """What HDFS records for ``data`` written with 16-byte chunks and 64-byte blocks."""
    hasher = checksums.new(algorithm, bytes_per_crc=16, block_size=64)
    hasher.update(data)
    return hasher.hexdigest()


@pytest.mark.parametrize("algorithm", [a for a in checksums.ALGORITHMS if a.startswith("hdfs-")])
def test_hdfs_checksums_verify_with_the_sizes_their_value_records(
    dirs: tuple[Path, Path, Path], algorithm: str
) -> None:
    src, cm, dst = dirs
    data = bytes(range(256)) * 3  # 12 blocks of 64 bytes, copied in chunks of 7
    (src / "f").write_bytes(data)
    ref = FileRef(uri=str(src / "f"), checksum=_hdfs(algorithm, data), checksum_algorithm=algorithm)
    assert _copier(dst).copy_all([ref], lambda r: str(dst), event_id=5).files == 1
    assert (dst / "f").read_bytes() == data
    assert _copier(dst).copy_all([ref], lambda r: str(dst), event_id=5).skipped == 1  # idempotent re-copy
    # the source changed since; the cm copy still has the event's content
    (src / "f").write_bytes(data[:-1] + b"!")
    (cm / "f_x").write_bytes(data)
    (dst / "f").unlink()
    moved = FileRef(**{**ref.__dict__, "cm_uri": str(cm / "f_x")})
    assert _copier(dst).copy_all([moved], lambda r: str(dst), event_id=5).cm_fallbacks == 1


def test_wrong_hdfs_checksum_halts_with_event_file_and_cause(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    (src / "f").write_bytes(b"content")
    algorithm = checksums.HDFS_MD5_CRC32C
    ref = FileRef(uri=str(src / "f"), checksum=_hdfs(algorithm, b"other"), checksum_algorithm=algorithm)
    with pytest.raises(ChecksumMismatchError) as info:
        _copier(dst).copy_all([ref], lambda r: str(dst), event_id=8)
    assert (info.value.event_id, info.value.obj) == (8, ref.uri)
    assert f"{algorithm} checksum" in info.value.cause and ref.checksum in info.value.cause
    assert _visible(dst) == {} and not _temps(dst)


def test_malformed_hdfs_checksum_is_an_error_before_any_copy(dirs: tuple[Path, Path, Path]) -> None:
    src, _, dst = dirs
    (src / "f").write_bytes(b"content")
    sha = hashlib.sha256(b"content").hexdigest()
    ref = FileRef(uri=str(src / "f"), checksum=sha, checksum_algorithm=checksums.HDFS_MD5_CRC32C)
    with pytest.raises(ApplyError, match="has 32 bytes; a hdfs-md5-of-md5-of-crc32c value has 28") as info:
        _copier(dst).copy_all([ref], lambda r: str(dst), event_id=9)
    assert (info.value.event_id, info.value.obj) == (9, ref.uri)
    assert _visible(dst) == {}


@pytest.mark.parametrize("special", ["device", "fifo", "link to a device", "directory"])
def test_only_regular_files_are_read(dirs: tuple[Path, Path, Path], special: str) -> None:
    """``file:///dev/zero`` with a declared size would stream zeros until the disk is full: a record
    names data files, and only a regular file is read (a link counts as what it points at)."""
    src, _, dst = dirs
    path = src / "f"
    if special == "device":
        path = Path("/dev/zero")
    elif special == "fifo":
        os.mkfifo(path)
    elif special == "link to a device":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    digest = hashlib.sha256(b"\0" * 10).hexdigest()
    ref = FileRef(uri=path.as_uri(), checksum=digest, checksum_algorithm="sha256", size=10)
    with pytest.raises(ApplyError, match="not a regular file") as raised:
        _copier(dst).copy_all([ref], lambda r: str(dst / "t"), event_id=12)
    assert raised.value.event_id == 12
    assert _visible(dst) == {} and not _temps(dst)


def test_a_file_without_checksum_is_read_no_further_than_its_declared_size(
    dirs: tuple[Path, Path, Path],
) -> None:
    src, _, dst = dirs
    (src / "f").write_bytes(b"x" * 1000)
    ref = FileRef(uri=str(src / "f"), size=10)
    with pytest.raises(ChecksumMismatchError, match="size 11 != expected 10"):
        _copier(dst).copy_all([ref], lambda r: str(dst / "t"), event_id=3)
    assert _visible(dst) == {} and not _temps(dst)


@pytest.mark.parametrize("bytes_per_crc", [1, 8, 2**16 + 1, 2**31 - 1])
def test_hdfs_sizes_a_record_carries_are_bounded_before_any_read(
    dirs: tuple[Path, Path, Path], bytes_per_crc: int
) -> None:
    """bytesPerCRC 1 would make hashing hundreds of times slower, 2^31-1 would buffer the file
    several times over: a record's value may carry only sizes HDFS is configured with."""
    src, _, dst = dirs
    ref = write_source_file(src, "f", b"data")
    value = (struct.pack(">iq", bytes_per_crc, 0) + hashlib.md5(b"x").digest()).hex()
    crafted = FileRef(uri=ref.uri, checksum=value, checksum_algorithm=checksums.HDFS_MD5_CRC32C, size=4)
    with pytest.raises(ApplyError, match=f"bytesPerCRC {bytes_per_crc}; accepted from a record: 16..65536"):
        _copier(dst).copy_all([crafted], lambda r: str(dst / "t"), event_id=5)
    assert _visible(dst) == {} and not _temps(dst)


def test_a_source_file_that_grows_under_the_copy_falls_back_to_its_cmroot_copy(
    dirs: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Longer than when the copy looked at it: not the event's file (it is being rewritten), so its
    cmroot copy is read next, as for a file that changed or vanished."""
    from streamer.target.apply import files

    src, cm, dst = dirs
    ref = write_source_file(src, "f", b"0123456789")
    kept = write_source_file(cm, "f_kept", b"0123456789")
    looked_at = files.readable_size
    monkeypatch.setattr(files, "readable_size", lambda fs, path, url, event_id: (
        5 if url == ref.uri else looked_at(fs, path, url, event_id)))
    crafted = dataclasses.replace(ref, cm_uri=kept.uri)
    report = _copier(dst).copy_all([crafted], lambda r: str(dst / "t"), event_id=8)
    assert report.cm_fallbacks == 1 and (dst / "t" / "f").read_bytes() == b"0123456789"
    alone = FileRef(uri=ref.uri, checksum=ref.checksum, checksum_algorithm="sha256", size=10)
    with pytest.raises(ChecksumMismatchError, match="grew past 5 bytes"):
        _copier(dst).copy_all([alone], lambda r: str(dst / "u"), event_id=9)


def test_a_tree_deleted_in_place_survives_an_entry_that_vanishes_during_the_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A swap's reaper may delete a replaced directory it set aside inside a table while a DROP_TABLE
    deletes that table in place (object stores, another mount): the drop still removes the tree."""
    from fsspec.implementations.local import LocalFileSystem

    table = tmp_path / "wh" / "db.db" / "t"
    (table / ".dt=1.streamer-old-x").mkdir(parents=True)
    (table / ".dt=1.streamer-old-x" / "f").write_bytes(b"x")
    (table / "dt=1").mkdir()
    real_rm = LocalFileSystem.rm
    calls = []

    def racing_rm(self: LocalFileSystem, path: str, recursive: bool = False, **kw: object) -> None:
        calls.append(path)
        if len(calls) == 1:  # the reaper wins the race: the walk meets a vanished entry
            shutil.rmtree(table / ".dt=1.streamer-old-x")
            raise FileNotFoundError(2, "No such file or directory", str(table / ".dt=1.streamer-old-x"))
        real_rm(self, path, recursive=recursive)

    monkeypatch.setattr(LocalFileSystem, "rm", racing_rm)
    remove_tree(str(table), [Root.parse(str(tmp_path / "wh"))])
    assert not table.exists() and len(calls) == 2
