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
READERS = sorted(set(OPTIONS) - {"target run", "load"})  # the two that create it


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
    import streamer.metastore.thrift as metastore_thrift
    from streamer.events.model import DatabaseSnapshot
    from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM
    from streamer.metastore.memory import MemoryCatalog

    catalog = MemoryCatalog()
    for name, owner in {"a1": "a", "b1": "b"}.items():
        catalog.create_database(DatabaseSnapshot(name=name, parameters={REPL_SOURCE_PARAM: owner,
                                                                        LAST_ID_PARAM: "5"}))
    monkeypatch.setattr(metastore_thrift, "HmsCatalog", lambda uri, **_: catalog)


def _never(*_: Any, **__: Any) -> Any:
    raise AssertionError("read the topic or verified with an unknown source id")


def test_status_refuses_an_unknown_source_id_before_reading_the_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import streamer.target.state.status as status

    _catalog(monkeypatch)
    monkeypatch.setattr(status, "source_head_from_options", _never)
    TargetState(tmp_path).halt("a1", 6, "x")  # a state dir of a real job
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


def test_verify_with_an_unreachable_broker_is_one_line_after_the_connect_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40 item 6: it took 58 s and six lines."""
    import time

    import streamer.target.dr.verify as verify

    _catalog(monkeypatch)
    monkeypatch.setattr(verify, "verify", _never)
    monkeypatch.setenv("STREAMER_KAFKA_CONNECT_TIMEOUT", "2")
    TargetState(tmp_path).halt("a1", 6, "x")
    started = time.monotonic()
    code, lines = _run(capsys, "verify", "--hms-uri", "thrift://target:9083", "--state-dir", str(tmp_path),
                       "--bootstrap-servers", "127.0.0.1:1", "--source-id", "a")
    assert code == 1 and len(lines) == 1 and "127.0.0.1:1" in lines[0], lines
    assert time.monotonic() - started < 20


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
    TargetState(tmp_path / "state").halt("a1", 6, "x")
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


# --- a state dir of another target (issue 40 item 5) ----------------------------------------------


def _bound_to_a(state_dir: Path) -> None:
    """The state dir of source a's job (topic t.a) on thrift://target:9083, a1 applied through 5."""
    from streamer.metastore.memory import MemoryCatalog
    from streamer.target.state.binding import bind
    from streamer.target.state.status import write_progress

    bind(state_dir, "a", "t.a", "thrift://target:9083", MemoryCatalog())
    write_progress(state_dir, {"a1": (5, 1700)}, 5)


OTHER_SOURCE = ("error: --source-id {s}: --state-dir {d} belongs to another target (source 'a', topic t.a, "
                "metastore thrift://target:9083); give this target's own --state-dir, or --source-id a")


@pytest.mark.parametrize("command", [
    ["status", "--hms-uri", "thrift://target:9083", "--source-id", "b"],
    ["verify", "--hms-uri", "thrift://target:9083", "--bootstrap-servers", "127.0.0.1:1", "--source-id", "b"],
    ["failover", "--hms-uri", "thrift://target:9083", "--source-id", "b"],
    ["verify", "--hms-uri", "thrift://target:9083", "--bootstrap-servers", "127.0.0.1:1", "--source-id",
     "source"],  # what was its default: spelled out, it is refused too
])
def test_a_state_dir_of_another_source_is_one_line_before_any_work(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`failover` with another target's state dir would fence no job and record a cut of nothing."""
    import streamer.metastore.thrift as metastore_thrift

    monkeypatch.setattr(metastore_thrift, "HmsCatalog", _never)  # refused before the metastore is asked
    _bound_to_a(tmp_path)
    code, lines = _run(capsys, *command, "--state-dir", str(tmp_path))
    assert code == 2
    assert lines == [OTHER_SOURCE.format(s=command[command.index("--source-id") + 1], d=tmp_path)]
    assert not (tmp_path / "failover.json").exists()


@pytest.mark.parametrize("command", [
    ["verify", "--hms-uri", "thrift://target:9083", "--bootstrap-servers", "127.0.0.1:1"],
    ["failover", "--hms-uri", "thrift://target:9083"],
])
def test_verify_and_failover_without_a_source_id_take_the_state_dirs(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No `--source-id source` default against a target of source a (a failover run again included)."""
    import streamer.target.state.status as status

    asked: list[str] = []

    def check(catalog: Any, source_id: str) -> None:
        asked.append(source_id)
        raise SystemExit(3)  # far enough: the command would go on to the metastore and the topic

    monkeypatch.setattr(status, "check_source_id", check)
    _catalog(monkeypatch)
    _bound_to_a(tmp_path)
    assert _run(capsys, *command, "--state-dir", str(tmp_path))[0] == 3
    assert asked == ["a"]


def test_status_of_another_metastore_is_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The spoke's metastore with the hub's state dir: its halts would show on the spoke's rows."""
    _catalog(monkeypatch)  # holds a1 of source a at event 5, as the hub's progress: but another address
    _bound_to_a(tmp_path)
    from streamer.target.state.status import write_progress

    write_progress(tmp_path, {"a1": (9, 1700)}, 9)  # the hub is further on than this metastore
    code, lines = _run(capsys, "status", "--hms-uri", "thrift://spoke:9083", "--state-dir", str(tmp_path))
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: --hms-uri thrift://spoke:9083: --state-dir {tmp_path} belongs to "
                               "another target")
    assert "a1 at event 5 there, 9 recorded here" in lines[0]


def test_status_reads_the_head_of_the_topic_the_state_dir_is_bound_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import streamer.target.state.status as status

    _catalog(monkeypatch)
    _bound_to_a(tmp_path)
    asked: list[Any] = []

    def head(*args: Any) -> tuple[int, int]:
        asked.append(args)
        return 9, 1700

    monkeypatch.setattr(status, "source_head_from_options", head)
    main(["status", "--hms-uri", "thrift://target:9083", "--state-dir", str(tmp_path), "--bootstrap-servers",
          "127.0.0.1:1"])  # exits 0: returns
    assert asked[0][2] == "t.a"  # not streamer.source.events


# --- retry and skip of a name the state does not know (issue 40 item 6) ----------------------------


def test_retry_and_skip_of_an_unknown_database_say_so_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = TargetState(tmp_path)
    state.record_applied("sales", 4)
    state.halt("hr", 6, "x")
    expected = (f"Error: no database 'nosuchdb' in this target's state (--state-dir {tmp_path} records hr, "
                "sales); check the name; halted: hr")
    state_dir = ("--state-dir", str(tmp_path))
    assert _run(capsys, "target", "retry", *state_dir, "--db", "nosuchdb") == (1, [expected])
    assert _run(capsys, "target", "skip", *state_dir, "--db", "nosuchdb", "--event", "6") == (1, [expected])
    assert _run(capsys, "target", "retry", *state_dir, "--db", "sales") == (
        1, ["Error: database 'sales' is not halted; halted: hr"])
    assert _run(capsys, "target", "skip", *state_dir, "--db", "sales", "--event", "6") == (
        1, ["Error: database 'sales' is not halted; only a halted event can be skipped; halted: hr"])
