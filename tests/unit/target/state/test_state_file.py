"""Halts, retries, skips and off-catalog progress survive a restart (atomic JSON file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamer import metrics
from streamer.target.state.files import StateFileError
from streamer.target.state.state_file import STATE_FILE, HaltKind, StateError, TargetState


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


def test_a_halt_placed_before_its_failed_event_keeps_both_as_fields(tmp_path: Path) -> None:
    """A halt at a voiding run's start or a regrouped batch's first event names the event that
    failed in fields of its own: the job and ``skip`` read them, never the cause's text."""
    state = TargetState(tmp_path)
    state.halt("a", 10, "whatever the cause says", kind=HaltKind.VOIDING_RUN, failed_event_id=14)
    state.halt("b", 20, "event 99 failed in a batch regrouped per table", kind=HaltKind.REGROUPED,
               failed_event_id=23)
    state.halt("c", 30, "event 31 failed while a voiding run was pending")  # text alone decides nothing
    again = TargetState(tmp_path).halts()
    assert (again["a"].kind, again["a"].failed) == (HaltKind.VOIDING_RUN, 14)
    assert (again["b"].kind, again["b"].failed) == (HaltKind.REGROUPED, 23)
    assert (again["c"].kind, again["c"].failed) == (HaltKind.EVENT, 30)
    with pytest.raises(StateError, match="out of event-id order"):
        TargetState(tmp_path).skip("b", 20)
    TargetState(tmp_path).skip("c", 30)  # a plain halt is skipped at its event


def test_a_state_file_from_before_structured_halts_is_read_with_its_kinds(tmp_path: Path) -> None:
    halts = [
        {"db": "a", "event_id": 10, "event_type": "INSERT", "object": "a.t", "time": "t",
         "cause": "event 14 failed while a voiding run was pending (run): gone"},
        {"db": "b", "event_id": 20, "event_type": "INSERT", "object": "b.t", "time": "t",
         "cause": "event 23 failed in a batch regrouped per table (re-read from event 20): gone"},
        {"db": "c", "event_id": 30, "event_type": "INSERT", "object": "c.t", "time": "t", "cause": "gone"},
    ]
    (tmp_path / STATE_FILE).write_text(json.dumps({"halts": halts}))
    read = TargetState(tmp_path).halts()
    assert [(h.kind, h.failed) for h in (read["a"], read["b"], read["c"])] == [
        (HaltKind.VOIDING_RUN, 14), (HaltKind.REGROUPED, 23), (HaltKind.EVENT, 30),
    ]


def test_an_unknown_halt_kind_is_a_clear_error(tmp_path: Path) -> None:
    halt = {"db": "a", "event_id": 1, "cause": "x", "time": "t", "kind": "sideways"}
    (tmp_path / STATE_FILE).write_text(json.dumps({"halts": [halt]}))
    with pytest.raises(StateFileError, match="kind must be one of"):
        TargetState(tmp_path)
