"""Data files and change management (cmroot)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from streamer.events.model import Column
from streamer.warehouse.errors import WarehouseError
from streamer.warehouse.files import CHECKSUM_ALGORITHM, ChangeManager, checksum, read_parquet, write_parquet

COLS = [Column("id", "bigint"), Column("name", "string")]


def test_checksum_is_sha256_of_content(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"hello")
    assert CHECKSUM_ALGORITHM == "sha256"
    assert checksum(f) == hashlib.sha256(b"hello").hexdigest()


def test_parquet_files_are_named_as_hive_names_them(tmp_path: Path) -> None:
    rows = [{"id": i, "name": str(i)} for i in range(5)]
    first = write_parquet(tmp_path, COLS, rows, n_files=2)
    second = write_parquet(tmp_path, COLS, rows[:1])
    assert [p.name for p in first] == ["000000_0", "000001_0"]
    assert [p.name for p in second] == ["000000_0_copy_1"]
    assert sorted(r["id"] for r in read_parquet([*first, *second])) == [0, 0, 1, 2, 3, 4]  # type: ignore[type-var]


def test_rows_not_matching_columns_are_refused_and_leave_no_file(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="not in the table"):
        write_parquet(tmp_path, COLS, [{"id": 1, "oops": 2}])
    with pytest.raises(WarehouseError, match="do not match"):
        write_parquet(tmp_path, COLS, [{"id": "not a number"}])
    assert list(tmp_path.iterdir()) == []


def test_retained_files_are_flat_named_by_checksum_and_kept_once(tmp_path: Path) -> None:
    cm = ChangeManager(tmp_path / "cm")
    a, b = tmp_path / "d1" / "000000_0", tmp_path / "d2" / "000000_0"
    for f in (a, b):
        f.parent.mkdir()
        f.write_bytes(b"same")
    kept = cm.retain([a]) + cm.retain([b])
    assert kept[0] == kept[1] == tmp_path / "cm" / f"000000_0_{hashlib.sha256(b'same').hexdigest()}"
    assert [p.name for p in (tmp_path / "cm").iterdir()] == [kept[0].name]
    assert kept[0].read_bytes() == b"same"
    assert cm.file_ref(a).cm_uri == f"file:{kept[0]}"


def test_clean_deletes_only_older_files(tmp_path: Path) -> None:
    cm = ChangeManager(tmp_path / "cm")
    old, new = tmp_path / "old", tmp_path / "new"
    old.write_bytes(b"o")
    new.write_bytes(b"n")
    kept_old, kept_new = cm.retain([old, new])
    os.utime(kept_old, (1000, 1000))
    assert cm.clean(retain_seconds=60, now=kept_new.stat().st_mtime + 1) == 1
    assert not kept_old.exists() and kept_new.exists()
