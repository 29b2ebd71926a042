"""Halts, retries, skips and off-catalog progress survive a restart (atomic JSON file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamer import metrics
from streamer.target.state.files import StateFileError
from streamer.target.state.state_file import STATE_FILE, StateError, TargetState


def test_halt_is_durable_and_first_halt_wins(tmp_path: Path) -> None:
    state = TargetState(tmp_path)
    state.halt("a", 10, "boom", event_type="INSERT", obj="a.t")
    state.halt("a", 12, "later")
    reopened = TargetState(tmp_path)
    halt = reopened.halts()["a"]
    assert (halt.event_id, halt.cause, halt.event_type, halt.object) == (10, "boom", "INSERT", "a.t")
    assert reopened.is_halted("a") and not reopened.is_halted("b")
    assert metrics.TARGET_HALTED.labels(db="a")._value.get() == 1
    assert not list(tmp_path.glob(f".{STATE_FILE}*"))


def test_retry_clears(tmp_path: Path) -> None:
    state = TargetState(tmp_path)
    state.halt("a", 10, "boom")
    assert state.retry("a") is not None
    assert not TargetState(tmp_path).is_halted("a")
    assert metrics.TARGET_HALTED.labels(db="a")._value.get() == 0
    assert state.retry("a") is None


def test_skip_passes_exactly_the_halted_event(tmp_path: Path) -> None:
    state = TargetState(tmp_path)
    with pytest.raises(StateError, match="not halted"):
        state.skip("a", 10)
    state.halt("a", 10, "boom")
    with pytest.raises(StateError, match="halted at event 10"):
        state.skip("a", 11)
    state.skip("a", 10)
    reopened = TargetState(tmp_path)
    assert reopened.applied() == {"a": 10} and not reopened.is_halted("a")
    assert [s.event_id for s in reopened.skips()] == [10]


def test_record_applied_never_goes_backwards(tmp_path: Path) -> None:
    state = TargetState(tmp_path)
    state.record_applied("<global>", 5)
    state.record_applied("<global>", 3)
    assert TargetState(tmp_path).applied() == {"<global>": 5}
    assert json.loads((tmp_path / STATE_FILE).read_text())["applied"] == {"<global>": 5}


def test_malformed_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text("{not json")
    with pytest.raises(StateFileError, match=r"target-state\.json is not valid JSON"):
        TargetState(tmp_path)
