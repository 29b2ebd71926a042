"""Operator commands refuse a wrong --state-dir or --source-id before any work, in one line (exit 2):
a typo must not read as "nothing halted", "no drift" or an empty status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamer.cli import main
from streamer.target.state.state_file import TargetState
from tests.unit.cli_options import cli_options

OPTIONS = cli_options(lambda param: "--state-dir" in param.opts)
READERS = sorted(set(OPTIONS) - {"target run"})


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    err = capsys.readouterr().err
    return int(exited.value.code or 0), [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize("command", READERS)
def test_a_missing_state_dir_is_one_line_before_any_work(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-state"
    code, lines = _run(capsys, *command.split(), "--state-dir", str(missing))
    assert code == 2
    assert lines == [f"error: --state-dir {missing}: no such directory; give the --state-dir of the target "
                     "job (`streamer target run` creates it on its first start)"]
    assert not missing.exists()


def test_retry_in_a_missing_state_dir_does_not_say_not_halted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _run(capsys, "target", "retry", "--state-dir", str(tmp_path / "typo"), "--db", "a")
    assert code == 2 and "not halted" not in "".join(lines) and "no such directory" in lines[0]


def _catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamer.metastore.thrift_catalog as thrift_catalog
    from streamer.events.model import DatabaseSnapshot
    from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM
    from streamer.metastore.memory_catalog import MemoryCatalog

    catalog = MemoryCatalog()
    for name, owner in {"a1": "a", "b1": "b"}.items():
        catalog.create_database(DatabaseSnapshot(name=name, parameters={REPL_SOURCE_PARAM: owner,
                                                                        LAST_ID_PARAM: "5"}))
    monkeypatch.setattr(thrift_catalog, "HmsCatalog", lambda uri, **_: catalog)


def _never(*_: Any, **__: Any) -> Any:
    raise AssertionError("read the topic or verified with an unknown source id")


def test_status_refuses_an_unknown_source_id_before_reading_the_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import streamer.target.state.status as status

    _catalog(monkeypatch)
    monkeypatch.setattr(status, "source_head_from_options", _never)
    code, lines = _run(capsys, "status", "--hms-uri", "thrift://target:9083", "--state-dir", str(tmp_path),
                       "--bootstrap-servers", "127.0.0.1:1", "--source-id", "zzz")
    assert code == 2
    assert lines == ["error: --source-id zzz: no database on this target is replicated from source 'zzz' "
                     "(sources found: a, b)"]


def test_verify_refuses_an_unknown_source_id_instead_of_reporting_no_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import streamer.target.dr.verify as verify

    _catalog(monkeypatch)
    monkeypatch.setattr(verify, "verify", _never)
    TargetState(tmp_path).halt("a1", 6, "x")  # a state dir of a real job
    code, lines = _run(capsys, "verify", "--hms-uri", "thrift://target:9083", "--state-dir", str(tmp_path),
                       "--bootstrap-servers", "127.0.0.1:1")
    assert code == 2
    assert lines == ["error: --source-id source: no database on this target is replicated from source "
                     "'source' (sources found: a, b)"]


@pytest.mark.parametrize(("flags", "says"), [
    (["--against-source"], "--against-source needs --source-hms-uri or --source-notification-db"),
    (["--source-hms-uri", "thrift://127.0.0.1:1"], "apply with --against-source"),
])
def test_verify_against_the_source_needs_its_source_and_only_then(
    flags: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """`verify --against-source` without a source, or a source without the flag, is a usage error before
    the target or the topic is read (the source-id check is what would read first)."""
    import streamer.target.commands as commands

    monkeypatch.setattr(commands, "_check_source_id", lambda *a: None)
    (tmp_path / "state").mkdir()
    code, lines = _run(capsys, "verify", "--hms-uri", "thrift://127.0.0.1:1", "--state-dir",
                       str(tmp_path / "state"), "--bootstrap-servers", "127.0.0.1:1", *flags)
    assert code == 2
    assert any(says in line for line in lines), lines


def test_target_run_takes_the_source_check_only_with_verify_every(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _run(capsys, "target", "run", "--source-id", "s", "--bootstrap-servers", "127.0.0.1:1",
                       "--hms-uri", "thrift://127.0.0.1:1", "--warehouse-root", str(tmp_path / "wh"),
                       "--state-dir", str(tmp_path / "state"), "--verify-source-hms-uri", "thrift://h:1")
    assert code == 2
    assert any("need --verify-every" in line for line in lines), lines
