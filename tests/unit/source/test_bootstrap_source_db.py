"""``streamer bootstrap`` refuses a source database that is not there, creating nothing."""

from pathlib import Path

from click.testing import CliRunner

from streamer.cli import cli
from streamer.source.source_db import SourceDatabaseError


def test_a_missing_warehouse_file_is_refused_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "typo.sqlite"
    result = CliRunner().invoke(cli, ["bootstrap", "--source-id", "s", "--bootstrap-servers", "127.0.0.1:1",
                                      "--warehouse", str(missing)])
    assert isinstance(result.exception, SourceDatabaseError), result.output
    assert "no such sqlite file" in str(result.exception) and str(missing) in str(result.exception)
    assert not missing.exists()
