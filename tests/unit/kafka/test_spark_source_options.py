from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import ConfigError, DataLossError
from streamer.kafka.spark_source_options import (
    batch_end,
    check_start,
    offset_dict,
    offset_of,
    parse_options,
    read_cap,
)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(
            {"bootstrap.servers": "h:1", "topic": "events", "kafka.security.protocol": "SSL",
             "maxEventsPerTrigger": "5"},
            {"topic": "events", "partition": 0, "max_events": 5, "starting": "earliest",
             "fail_on_data_loss": True, "reader": "task", "wait_s": 0.0,
             "config": {"bootstrap.servers": "h:1", "security.protocol": "SSL"}},
            id="defaults-and-passthrough",
        ),
        pytest.param(
            {"bootstrap.servers": "h:1", "topic": "t", "reader": "Driver", "waitMs": "250"},
            {"reader": "driver", "wait_s": 0.25},
            id="reader-and-wait",
        ),
        pytest.param(
            {"kafka.bootstrap.servers": "h:1", "TOPIC": "t", "startingoffsets": "LATEST",
             "FAILONDATALOSS": "False"},
            {"starting": "latest", "fail_on_data_loss": False},
            id="source-options-case-insensitive",
        ),
        pytest.param(
            {"bootstrap.servers": "h:1", "topic": "t", "commitGroup": " streamer-target-s-h-1 "},
            {"commit_group": "streamer-target-s-h-1"},
            id="commit-group",
        ),
        pytest.param(
            {"bootstrap.servers": "h:1", "topic": "t", "commitGroup": ""},
            {"commit_group": None},
            id="empty-commit-group-commits-nothing",
        ),
    ],
)
def test_parse_options(options: dict[str, str], expected: dict[str, object]) -> None:
    opts = parse_options(options)
    assert {name: getattr(opts, name) for name in expected} == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bootstrap.servers": "h:1"}, "topic is required"),
        ({"topic": "t"}, "bootstrap-servers"),
        (
            {"bootstrap.servers": "h:1", "topic": "t", "kafka.no.such": "1"},
            "Unrecognized properties: no.such",
        ),
        ({"bootstrap.servers": "h:1", "topic": "t", "maxEventsPerTrigger": "0"}, "positive integer"),
        ({"bootstrap.servers": "h:1", "topic": "t", "startingOffsets": "middle"}, "earliest, latest"),
        ({"bootstrap.servers": "h:1", "topic": "t", "failOnDataLoss": "yes"}, "true or false"),
        ({"bootstrap.servers": "h:1", "topic": "t", "reader": "executor"}, "one of task, driver"),
        ({"bootstrap.servers": "h:1", "topic": "t", "waitMs": "-1"}, "non-negative integer"),
        (
            {"bootstrap.servers": "h:1", "topic": "t", "subscribe": "x"},
            "Unrecognized source options: subscribe",
        ),
    ],
)
def test_parse_options_rejects_bad_input(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options(options)


def test_offsets_round_trip_and_refuse_another_topic() -> None:
    opts = parse_options({"bootstrap.servers": "h:1", "topic": "t"})
    assert offset_of(opts, offset_dict(opts, 42)) == 42
    other = parse_options({"bootstrap.servers": "h:1", "topic": "u"})
    with pytest.raises(ConfigError, match="new checkpoint"):
        offset_of(other, offset_dict(opts, 42))


def test_check_start_detects_purged_and_recreated_partitions() -> None:
    assert check_start("t", 0, 5, (0, 10), True) == 5
    assert check_start("t", 0, 10, (0, 10), True) == 10
    assert check_start("t", 0, 0, None, True) == 0  # topic not created yet, nothing read yet
    with pytest.raises(
        DataLossError, match=r"topic 't' partition 0: the query needs offset 3 .*holds offsets 5\.\.9"
    ):
        check_start("t", 0, 3, (5, 9), True)
    with pytest.raises(DataLossError, match="recreated"):
        check_start("t", 0, 12, (0, 4), True)
    with pytest.raises(DataLossError, match="does not exist"):
        check_start("t", 0, 12, None, True)
    assert check_start("t", 0, 3, (5, 9), False) == 5
    assert check_start("t", 0, 12, (0, 4), False) == 0


@given(
    start=st.integers(0, 10**6),
    committed=st.integers(0, 10**6),
    max_rows=st.none() | st.integers(1, 1000),
    target=st.none() | st.integers(0, 10**6),
)
def test_batch_end_never_goes_back_and_honours_limits(
    start: int, committed: int, max_rows: int | None, target: int | None
) -> None:
    end = batch_end(start, committed, max_rows, target)
    assert end >= start
    assert end <= max(start, committed)
    if max_rows is not None:
        assert end - start <= max_rows
    if target is not None:
        assert end <= max(start, target)
    if max_rows is None and target is None:
        assert end == max(start, committed)


@given(
    start=st.integers(0, 10**6),
    max_rows=st.none() | st.integers(1, 10**4),
    target=st.none() | st.integers(0, 2 * 10**6),
)
def test_read_cap_bounds_a_driver_read_like_batch_end(
    start: int, max_rows: int | None, target: int | None
) -> None:
    cap = read_cap(start, max_rows, target)
    if max_rows is None and target is None:
        assert cap is None
        return
    assert cap is not None and cap >= start
    # the driver reader's batch ends where the task reader's would, given the same records available
    assert cap == batch_end(start, 10**9, max_rows, target)
