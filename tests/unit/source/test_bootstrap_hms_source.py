"""The Hive source catalog's file listing (a local directory tree) and ``streamer bootstrap``'s choice of
source: exactly one of --warehouse and --hms-uri."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from streamer.cli import cli
from streamer.source.hms_source_catalog import list_files


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
