from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.errors import EventGapError
from streamer.metrics import SOURCE_GAP
from streamer.source.errors import LogOrderError, LogResetError
from streamer.source.gaps import (
    FIRST_RECHECK_SECONDS,
    MAX_RECHECK_SECONDS,
    Contiguity,
    ContiguousReader,
    check_contiguity,
)
from streamer.source.reader import SqlNotificationReader
from tests.unit.source.logdb import LogDb, sqlite_logdb


def test_contiguous_batch_is_ready() -> None:
    assert check_contiguity(4, [5, 6, 7]) == Contiguity(3)


def test_hole_in_the_middle_holds_back_the_rest() -> None:
    assert check_contiguity(4, [5, 6, 9, 10]) == Contiguity(2, (7, 8))


def test_hole_at_the_front() -> None:
    assert check_contiguity(4, [8]) == Contiguity(0, (5, 7))


def test_empty_read_below_head_is_a_hole() -> None:
    assert check_contiguity(4, [], head=6) == Contiguity(0, (5, 6))
    assert check_contiguity(4, [], head=4) == Contiguity(0)


def test_head_below_last_id_is_a_reset() -> None:
    with pytest.raises(LogResetError, match="head 3 is below the last published event id 4"):
        check_contiguity(4, [], head=3)


@pytest.mark.parametrize("ids", [[5, 5], [6, 5], [4]])
def test_disorder_is_an_error(ids: list[int]) -> None:
    with pytest.raises(LogOrderError):
        check_contiguity(4, ids)


@settings(deadline=None)
@given(last=st.integers(0, 10**9), present=st.sets(st.integers(1, 60), max_size=40))
def test_ready_prefix_is_exactly_the_contiguous_run(last: int, present: set[int]) -> None:
    ids = sorted(last + i for i in present)
    result = check_contiguity(last, ids)
    run = 0
    while last + run + 1 in set(ids):
        run += 1
    assert result.ready == run
    assert ids[: result.ready] == list(range(last + 1, last + 1 + run))
    if run < len(ids):
        assert result.gap == (last + run + 1, ids[run] - 1)
    else:
        assert result.gap is None


@pytest.fixture
def logdb(tmp_path: Path) -> LogDb:
    with sqlite_logdb(str(tmp_path / "metastore.db")) as db:
        yield db  # type: ignore[misc]


def test_gap_that_fills_during_settle_is_not_an_error(logdb: LogDb) -> None:
    for i in (1, 2, 4):
        logdb.add(i)
    reader = ContiguousReader(SqlNotificationReader(logdb.url), settle_seconds=1.0,
                              sleep=lambda _: logdb.add(3))
    assert [r.event_id for r in reader.read_after(0, 10)] == [1, 2]  # prefix before the hole
    assert [r.event_id for r in reader.read_after(2, 10)] == [3, 4]  # settled: 3 committed late
    assert SOURCE_GAP._value.get() == 0


def test_gap_that_stays_halts_with_event_gap_error(logdb: LogDb) -> None:
    for i in range(1, 8):
        logdb.add(i)
    logdb.delete(3, 5)
    waits, clock, sleep = _fake_time()
    reader = ContiguousReader(SqlNotificationReader(logdb.url), settle_seconds=0.5, sleep=sleep, clock=clock)
    assert [r.event_id for r in reader.read_after(0, 10)] == [1, 2]
    with pytest.raises(EventGapError) as info:
        reader.read_after(2, 10)
    assert (info.value.first_missing, info.value.last_missing) == (3, 5)
    assert sum(waits) == pytest.approx(0.5)  # the whole settle time, no more
    assert waits[0] == FIRST_RECHECK_SECONDS
    assert all(w <= MAX_RECHECK_SECONDS for w in waits)
    assert SOURCE_GAP._value.get() == 1


def test_a_hole_that_fills_soon_costs_only_the_rechecks_before_it(logdb: LogDb) -> None:
    """The agent re-reads a hole at short, growing intervals: events behind a late commit wait for
    that commit, not for the whole settle time."""
    for i in (1, 2, 4):
        logdb.add(i)
    waits, clock, fake_sleep = _fake_time()

    def sleep(seconds: float) -> None:
        fake_sleep(seconds)
        if len(waits) == 3:
            logdb.add(3)  # the lower id commits while the agent waits

    reader = ContiguousReader(SqlNotificationReader(logdb.url), settle_seconds=5.0, sleep=sleep, clock=clock)
    assert [r.event_id for r in reader.read_after(2, 10)] == [3, 4]
    assert waits == [FIRST_RECHECK_SECONDS, 2 * FIRST_RECHECK_SECONDS, 4 * FIRST_RECHECK_SECONDS]


def _fake_time() -> tuple[list[float], Callable[[], float], Callable[[float], None]]:
    """A clock that moves only when the reader sleeps, and the list of its sleeps."""
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)

    return waits, lambda: sum(waits), sleep


def test_cleaned_tail_is_a_gap_through_the_sequence(logdb: LogDb) -> None:
    for i in range(1, 4):
        logdb.add(i)
    logdb.delete(1, 3)
    reader = ContiguousReader(SqlNotificationReader(logdb.url), settle_seconds=0, sleep=lambda _: None)
    with pytest.raises(EventGapError, match=r"3\.\.3"):
        reader.read_after(2, 10)
    assert reader.read_after(3, 10) == []  # fully caught up: nothing missing
