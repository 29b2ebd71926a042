"""The Hive source catalog's file listing (a local directory tree) and ``streamer bootstrap``'s choice of
source: exactly one of --warehouse and --hms-uri; a transactional table's dump (the directories Hive's
reader chooses, on a local tree, with the metastore's answers given)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
from click.testing import CliRunner

from streamer.cli import cli
from streamer.events.model import Column, PartitionSnapshot, StorageDescriptor, TableSnapshot
from streamer.metastore.thrift import TxnSnapshot
from streamer.source.hms_source_catalog import HmsSourceCatalog, UnsupportedSourceObjectError, list_files
from tests.unit.source.test_hive_version import _Client, _hive2_answer, _hive3_answer

T = TypeVar("T")


def test_listing_skips_hidden_and_staging_names_at_every_level(tmp_path: Path) -> None:
    table = tmp_path / "db.db" / "t"
    (table / "dt=2024-01-01" / "HIVE_UNION_SUBDIR_1").mkdir(parents=True)
    (table / "dt=2024-01-01" / "000000_0").write_bytes(b"a")
    (table / "dt=2024-01-01" / "HIVE_UNION_SUBDIR_1" / "000000_0").write_bytes(b"bb")
    (table / "dt=2024-01-01" / "_SUCCESS").write_bytes(b"")
    (table / "dt=2024-01-01" / ".000000_0.crc").write_bytes(b"c")
    (table / "dt=2024-01-01" / ".hive-staging_1").mkdir()
    (table / "dt=2024-01-01" / ".hive-staging_1" / "000000_0").write_bytes(b"x")
    (table / "dt=2024-01-01" / "_tmp.dir").mkdir()
    (table / "dt=2024-01-01" / "_tmp.dir" / "000000_0").write_bytes(b"x")

    found = list_files(f"file:{table}/dt=2024-01-01", "dt=2024-01-01")  # Hadoop's file:/x spelling

    base = f"file://{table}/dt=2024-01-01"
    assert [(f.uri, f.size, f.partition) for f in found] == [
        (f"{base}/000000_0", 1, "dt=2024-01-01"),
        (f"{base}/HIVE_UNION_SUBDIR_1/000000_0", 2, "dt=2024-01-01"),
    ]


def test_a_missing_location_holds_no_files(tmp_path: Path) -> None:
    assert list_files(f"file://{tmp_path}/gone") == []
    assert list_files(None) == []


def test_bootstrap_needs_exactly_one_source() -> None:
    base = ["bootstrap", "--source-id", "s", "--bootstrap-servers", "127.0.0.1:1"]
    for extra in ([], ["--warehouse", "w.db", "--hms-uri", "thrift://h:1"]):
        result = CliRunner().invoke(cli, [*base, *extra])
        assert result.exit_code == 2, result.output
        assert "exactly one source: --warehouse" in result.output
    result = CliRunner().invoke(cli, [*base, "--warehouse", "w.db", "--notification-db", "n.db"])
    assert result.exit_code == 2 and "--notification-db goes with --hms-uri" in result.output


def test_bootstrap_help_names_both_sources() -> None:
    result = CliRunner().invoke(cli, ["bootstrap", "--help"], terminal_width=200)
    assert result.exit_code == 0
    flags = ("--warehouse", "--hms-uri", "--notification-db", "--work-dir", "--force", "STREAMER_HMS_URI",
             "STREAMER_NOTIFICATION_DB", "STREAMER_WORK_DIR")
    for flag in flags:
        assert flag in result.output


# --- transactional tables: only the directories Hive's reader chooses --------------------------


class _Metastore:
    """The reads ``HmsSourceCatalog`` makes of a transactional table, from snapshots in memory; its
    API probe is answered on the wire as a Hive 2.x server (or, ``hive3``, a Hive 3 one) answers."""

    def __init__(self, table: TableSnapshot, parts: list[PartitionSnapshot], *, hive3: bool = False) -> None:
        self.table, self.parts = table, parts
        self.answer = _hive3_answer() if hive3 else _hive2_answer()
        self.probes = 0
        self.conn = self  # the catalog's connection: the probe goes through ``conn.call``

    def call(self, obj: str, fn: Callable[[Any], T]) -> T:
        self.probes += 1
        return fn(_Client(self.answer, "3.1.3" if self.answer == _hive3_answer() else "3.0"))

    def get_table(self, db: str, name: str) -> TableSnapshot | None:
        return self.table if (db, name) == (self.table.db, self.table.name) else None

    def list_partitions(self, db: str, name: str) -> list[PartitionSnapshot]:
        return self.parts


class _Txns:
    def __init__(self, snap: TxnSnapshot) -> None:
        self.snap, self.calls = snap, 0

    def snapshot(self) -> TxnSnapshot:
        self.calls += 1
        return self.snap

    def abort(self, txn_ids: Iterable[int]) -> None:
        raise AssertionError("nothing to abort")


def _acid_dirs(root: Path, names: list[str]) -> None:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "bucket_00000").write_bytes(name.encode())
    (root / "_tmp.delta_0000009_0000009_0000").mkdir()  # a writer's temp dir: hidden


def test_a_transactional_tables_dump_holds_the_chosen_directories_of_each_partition(tmp_path: Path) -> None:
    sd = StorageDescriptor(location=f"file://{tmp_path}/t")
    table = TableSnapshot("t", "db", sd=sd, partition_keys=[Column("dt", "string")],
                          parameters={"transactional": "true"})
    parts = [PartitionSnapshot([d], "db", "t", StorageDescriptor(location=f"file://{tmp_path}/t/dt={d}"))
             for d in ("a", "b")]
    _acid_dirs(tmp_path / "t" / "dt=a", ["base_0000002", "delta_0000001_0000001_0000",
                                         "delta_0000003_0000003_0000", "delta_0000004_0000004_0000"])
    _acid_dirs(tmp_path / "t" / "dt=b", ["delta_0000005_0000005_0000", "delta_0000006_0000006_0000"])
    txns = _Txns(TxnSnapshot(5, aborted=frozenset({4})))  # 6 began after the snapshot
    source = HmsSourceCatalog(cast(Any, _Metastore(table, parts)), txns=txns)

    files = source.files("db", "t")
    ids = source.write_ids("db", "t")

    rel = sorted((f.partition, f.uri.split("/t/", 1)[1]) for f in files)
    assert rel == [
        ("dt=a", "dt=a/base_0000002/bucket_00000"),
        ("dt=a", "dt=a/delta_0000003_0000003_0000/bucket_00000"),
        ("dt=b", "dt=b/delta_0000005_0000005_0000/bucket_00000"),
    ]
    assert ids == [2, 3, 5]
    assert txns.calls == 1  # one snapshot for the whole dump
    source.files("db", "t")
    assert txns.calls == 1
    assert source.metastore_api().family == "Hive 2.x"
    assert cast(Any, source.hms).probes == 1  # asked once per dump


def test_a_hive3_sources_transactional_table_is_refused_before_its_directories_are_judged(
        tmp_path: Path) -> None:
    """Hive 3 directory names (write ids, ``_v`` visibility suffix of a compacted base, as AcidUtils
    writes them) under a transaction list that would make them look valid: refused, naming the table."""
    table = TableSnapshot("orders", "sales", sd=StorageDescriptor(location=f"file://{tmp_path}/t"),
                          parameters={"transactional": "true"})
    _acid_dirs(tmp_path / "t", ["base_0000003_v0000021", "delta_0000004_0000004_0000",
                                "delta_0000005_0000005_0000"])
    txns = _Txns(TxnSnapshot(100))
    source = HmsSourceCatalog(cast(Any, _Metastore(table, [], hive3=True)), txns=txns)
    with pytest.raises(UnsupportedSourceObjectError,
                       match=r"^transactional table sales\.orders: the source metastore is Hive 3\.0 or "):
        source.files("sales", "orders")
    with pytest.raises(UnsupportedSourceObjectError, match="write ids"):
        source.write_ids("sales", "orders")
    assert txns.calls == 0  # no transaction id was used to judge a write id


def test_a_delete_delta_the_dump_would_copy_is_refused_naming_the_table(tmp_path: Path) -> None:
    table = TableSnapshot("t", "db", sd=StorageDescriptor(location=f"file://{tmp_path}/t"),
                          parameters={"transactional": "true"})
    _acid_dirs(tmp_path / "t", ["delta_0000001_0000001_0000", "delete_delta_0000002_0000002_0000"])
    source = HmsSourceCatalog(cast(Any, _Metastore(table, [])), txns=_Txns(TxnSnapshot(2)))
    with pytest.raises(UnsupportedSourceObjectError, match=r"db\.t: delete_delta_0000002.*COMPACT 'major'"):
        source.files("db", "t")
