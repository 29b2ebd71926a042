"""The metastore call counter behind the benches' figures: summed waits and wall-clock busy time."""

from __future__ import annotations

import pytest

from streamer.metastore.thrift import connection
from streamer.metastore.thrift.connection import CallCounter


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]
    monkeypatch.setattr(connection.time, "perf_counter", lambda: now[0])
    return now


def test_overlapping_calls_are_summed_but_busy_once(clock: list[float]) -> None:
    calls = CallCounter()
    a = calls.begin()  # 0 .. 3
    clock[0] = 1.0
    b = calls.begin()  # 1 .. 4
    clock[0] = 3.0
    calls.end(a)
    clock[0] = 4.0
    calls.end(b)
    clock[0] = 10.0
    c = calls.begin()  # 10 .. 12, alone
    clock[0] = 12.0
    calls.end(c)
    assert calls.calls == 3
    assert calls.seconds == pytest.approx(2 + 3 + 3)
    assert calls.busy_seconds == pytest.approx(4 + 2)  # 0..4 and 10..12


def test_a_call_in_flight_counts_as_busy_until_now_and_reset_starts_over(clock: list[float]) -> None:
    calls = CallCounter()
    started = calls.begin()
    clock[0] = 5.0
    assert calls.busy_seconds == pytest.approx(5.0)
    assert calls.reset() == 1 and calls.seconds == 0.0
    clock[0] = 7.0
    calls.end(started)
    assert calls.busy_seconds == pytest.approx(2.0)  # only what followed the reset
