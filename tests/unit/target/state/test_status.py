"""Lag arithmetic of ``streamer status`` and the lag metric: a caught-up database shows no lag even
when its own last event is far behind the head."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.target.state.files import StateFileError
from streamer.target.state.status import (
    lag_events,
    read_progress,
    replicated_through,
    write_mode,
    write_progress,
)


def test_a_quiet_database_is_caught_up_once_the_job_consumed_the_head() -> None:
    # sales' last event is 10; events 11..40 were other databases' or transaction markers
    assert lag_events(40, {"sales": 10, "hr": 40}, consumed_event_id=40, stuck=()) == 0


def test_a_halted_database_lags_from_its_own_last_applied_event() -> None:
    assert lag_events(40, {"sales": 10, "hr": 40}, consumed_event_id=40, stuck={"sales"}) == 30
    assert replicated_through({"sales": 10, "hr": 40}, 40, {"sales"}) == {"sales": 10, "hr": 40}


def test_lag_counts_what_the_job_has_not_consumed_yet() -> None:
    assert lag_events(50, {"sales": 10}, consumed_event_id=45, stuck=()) == 5


def test_nothing_replicated_means_no_lag_figure_of_databases() -> None:
    assert lag_events(50, {}, consumed_event_id=0, stuck=()) == 0


@given(
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 1000), min_size=1),
    st.integers(0, 1000),
    st.sets(st.sampled_from("abcdef")),
    st.integers(0, 2000),
)
def test_lag_is_bounded_by_the_plain_definition(
    applied: dict[str, int], consumed: int, stuck: set[str], head: int
) -> None:
    plain = max(0, head - min(applied.values()))  # head minus the furthest-behind applied id
    lag = lag_events(head, applied, consumed, stuck)
    assert 0 <= lag <= plain
    if set(applied) <= stuck:
        assert lag == plain


def test_progress_round_trips_and_reads_the_old_format(tmp_path: Path) -> None:
    write_progress(tmp_path, {"sales": (12, 1700)}, consumed_event_id=30)
    assert read_progress(tmp_path) == ({"sales": {"event_id": 12, "event_time": 1700}}, 30)
    (tmp_path / "progress.json").write_text(json.dumps({"sales": {"event_id": 3, "event_time": 9}}))
    assert read_progress(tmp_path) == ({"sales": {"event_id": 3, "event_time": 9}}, 0)
    (tmp_path / "progress.json").write_text("not json")  # never "no progress": a replay would re-apply
    with pytest.raises(StateFileError, match=r"progress\.json is not valid JSON"):
        read_progress(tmp_path)


def _status(tmp_path: Path, monkeypatch: Any, *args: str) -> Any:
    """``streamer status`` on a target holding databases of sources a and b, a failed-over one of b,
    and one streamer does not replicate."""
    from click.testing import CliRunner

    import streamer.metastore.thrift as metastore_thrift
    from streamer.cli import cli
    from streamer.events.model import DatabaseSnapshot
    from streamer.metastore.catalog import FAILOVER_CUT_PARAM, FENCE_PARAM, LAST_ID_PARAM, REPL_SOURCE_PARAM
    from streamer.metastore.memory import MemoryCatalog

    catalog = MemoryCatalog()
    for name, params in {"a1": {REPL_SOURCE_PARAM: "a", LAST_ID_PARAM: "5"},
                         "b1": {REPL_SOURCE_PARAM: "b", LAST_ID_PARAM: "7"},
                         "b_dr": {REPL_SOURCE_PARAM: "b", LAST_ID_PARAM: "6", FAILOVER_CUT_PARAM: "6"},
                         "mine": {},
                         "a_mid": {REPL_SOURCE_PARAM: "a", LAST_ID_PARAM: "4", FENCE_PARAM: "5"}}.items():
        catalog.create_database(DatabaseSnapshot(name=name, parameters=params))
    monkeypatch.setattr(metastore_thrift, "HmsCatalog", lambda uri, **_: catalog)
    if not (tmp_path / "job-mode.json").exists():
        write_mode(tmp_path, "global", 4)  # a state dir a job wrote
    return CliRunner().invoke(cli, ["status", "--hms-uri", "thrift://target:9083", "--state-dir",
                                    str(tmp_path), *args])


def test_status_of_one_source_lists_only_its_databases(tmp_path: Path, monkeypatch: Any) -> None:
    """Issue 28.4: ``--source-id a`` shows a's databases, not b's (failed over or not)."""
    result = _status(tmp_path, monkeypatch, "--source-id", "a", "--output", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["databases"]
    assert [r["db"] for r in rows] == ["a1", "a_mid"] and rows[0]["source_id"] == "a"
    text = _status(tmp_path, monkeypatch, "--source-id", "b")
    assert text.exit_code == 0 and "b1" in text.output and "b_dr" in text.output and "a1" not in text.output


def test_status_without_a_source_lists_every_source(tmp_path: Path, monkeypatch: Any) -> None:
    result = _status(tmp_path, monkeypatch, "--output", "json")
    assert result.exit_code == 0, result.output
    assert [r["db"] for r in json.loads(result.output)["databases"]] == ["a1", "a_mid", "b1", "b_dr"]


def test_a_database_left_mid_batch_out_of_order_is_shown_fenced_and_replicated_only_through_its_marker(
    tmp_path: Path, monkeypatch: Any
) -> None:
    write_progress(tmp_path, {}, 9)  # the job consumed through 9: a quiet database counts as through 9
    listed = json.loads(_status(tmp_path, monkeypatch, "--output", "json").output)["databases"]
    rows = {r["db"]: r for r in listed}
    assert rows["a_mid"]["fenced_from_event_id"] == 5 and rows["a1"]["fenced_from_event_id"] is None
    assert rows["a_mid"]["replicated_through_event_id"] == 4  # its tables are a mix past its marker
    assert rows["a1"]["replicated_through_event_id"] == 9
    text = _status(tmp_path, monkeypatch).output
    assert "fenced: a batch from event 5 applied it out of order" in text


def _halted_under_a_map(tmp_path: Path) -> None:
    """The job of ``tmp_path`` maps source ``hr`` to target ``a1``, and ``hr`` halted at event 6
    (the state keys halts by source database; the catalog holds ``a1``)."""
    from streamer.target.state.state_file import TargetState
    from streamer.target.state.status import write_mode

    write_mode(tmp_path, "global", 4, {"hr": "a1"})
    TargetState(tmp_path).halt("hr", 6, "no copy matches the event", event_type="INSERT", obj="hr.t")


def test_under_a_db_map_a_halt_shows_on_its_target_database_and_status_exits_1(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 40.4: the halt of source ``hr`` (replicated into ``a1``) is a1's row, not an extra row
    under the source name beside a1 saying not halted; and a halted target is not exit code 0."""
    _halted_under_a_map(tmp_path)
    result = _status(tmp_path, monkeypatch, "--source-id", "a", "--output", "json")
    assert result.exit_code == 1, result.output
    rows = {r["db"]: r for r in json.loads(result.output)["databases"]}
    assert set(rows) == {"a1", "a_mid"}
    assert rows["a1"]["halted"]["event_id"] == 6 and rows["a1"]["source_db"] == "hr"
    assert rows["a_mid"]["halted"] is None
    text = _status(tmp_path, monkeypatch, "--source-id", "a")
    assert text.exit_code == 1 and "event 6: no copy matches the event" in text.output


def test_a_target_without_halts_exits_0(tmp_path: Path, monkeypatch: Any) -> None:
    assert _status(tmp_path, monkeypatch, "--output", "json").exit_code == 0


@pytest.mark.parametrize("name", ["a1", "hr", "A1"])
def test_retry_takes_the_target_name_status_shows_or_the_source_name(tmp_path: Path, name: str) -> None:
    from click.testing import CliRunner

    from streamer.cli import cli
    from streamer.target.state.state_file import TargetState

    _halted_under_a_map(tmp_path)
    result = CliRunner().invoke(cli, ["target", "retry", "--state-dir", str(tmp_path), "--db", name])
    assert result.exit_code == 0, result.output
    assert "halt at event 6 cleared" in result.output and TargetState(tmp_path).halts() == {}


def test_skip_takes_the_target_name_and_a_wrong_name_lists_what_is_halted(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from streamer.cli import cli
    from streamer.target.state.state_file import TargetState

    _halted_under_a_map(tmp_path)
    wrong = CliRunner().invoke(cli, ["target", "retry", "--state-dir", str(tmp_path), "--db", "nosuchdb"])
    assert wrong.exit_code == 1
    assert wrong.output.startswith("Error: no database 'nosuchdb' in this target's state")
    assert "records a1, hr); check the name; halted: a1 (source hr)" in wrong.output
    also = CliRunner().invoke(cli, ["target", "skip", "--state-dir", str(tmp_path), "--db", "nosuchdb",
                                    "--event", "6"])
    assert also.exit_code == 1 and also.output.startswith("Error: ")
    assert "halted: a1 (source hr)" in also.output
    done = CliRunner().invoke(cli, ["target", "skip", "--state-dir", str(tmp_path), "--db", "a1",
                                    "--event", "6"])
    assert done.exit_code == 0, done.output
    assert TargetState(tmp_path).halts() == {}


def test_a_database_bearing_a_source_name_the_map_sends_elsewhere_is_no_row(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Left by a run without the map, it replicates nothing of this job: never 'up to date'."""
    from streamer.target.state.status import write_mode

    write_mode(tmp_path, "global", 4, {"a_mid": "a_mid7"})
    result = _status(tmp_path, monkeypatch, "--source-id", "a", "--output", "json")
    assert [r["db"] for r in json.loads(result.output)["databases"]] == ["a1"]


def test_a_name_that_means_two_halted_databases_is_refused(tmp_path: Path) -> None:
    """``--db-map a:b --db-map b:c``: ``b`` is a's target name and a source name."""
    from click.testing import CliRunner

    from streamer.cli import cli
    from streamer.target.state.state_file import TargetState
    from streamer.target.state.status import write_mode

    write_mode(tmp_path, "global", 4, {"a": "b", "b": "c"})
    state = TargetState(tmp_path)
    state.halt("a", 6, "x")
    state.halt("b", 7, "y")
    both = CliRunner().invoke(cli, ["target", "retry", "--state-dir", str(tmp_path), "--db", "b"])
    assert both.exit_code != 0 and "names the halted databases ['a', 'b']" in both.output
    assert set(TargetState(tmp_path).halts()) == {"a", "b"}
    by_target = CliRunner().invoke(cli, ["target", "retry", "--state-dir", str(tmp_path), "--db", "c"])
    assert by_target.exit_code == 0 and set(TargetState(tmp_path).halts()) == {"a"}
