"""What a failed target query stops the job with: data loss only when a reachable broker confirms it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import DataLossError, StreamerError
from streamer.kafka.errors import KafkaClientError
from streamer.target.job.failure import (
    Outcome,
    Recheck,
    failure_error,
    first_line,
    reported_offset,
    says_data_loss,
)

# what the SRE's job failed with when the broker stalled (shortened)
SAYS_LOSS = (
    "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform "
    "latestOffset: Traceback (most recent call last):\n  File \"spark_source.py\", line 207\n"
    "streamer.errors.DataLossError: data loss on topic 'events' partition 0: the query needs offset 1880 "
    "but the partition does not exist; the topic was deleted or recreated (e.g. the broker restarted "
    "without storage). Rebuild the target from a bootstrap with a new checkpoint.\n=== Streaming Query ==="
)
OTHER = "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Python worker exited unexpectedly (crashed)"
CONFIRMED = (
    "data loss on topic 'events' partition 0: the query needs offset 1880 but the partition holds "
    "offsets 0..3"
)
WHERE = "'events' partition 0"

LOST = Recheck(Outcome.LOST, CONFIRMED, 1880)
HELD = Recheck(Outcome.HELD, offset=1880, marks=(0, 2000))
UNREACHABLE = Recheck(
    Outcome.UNREACHABLE, "watermarks of events[0]: the broker did not answer within 60 s", 1880
)
UNCHECKED = Recheck(Outcome.UNCHECKED)


@pytest.mark.parametrize(
    ("failure", "recheck", "kind", "words"),
    [
        # the reported bug: a stall the query took for a loss, the broker still not answering
        pytest.param(SAYS_LOSS, UNREACHABLE, KafkaClientError,
                     ["unreachable", "restarting the job resumes from its checkpoint", "did not answer"],
                     id="says-loss, broker unreachable: transport error"),
        pytest.param(SAYS_LOSS, HELD, StreamerError, ["does not confirm", "holds offsets 0..2000", "resumes"],
                     id="says-loss, broker holds the offset: not a loss"),
        pytest.param(SAYS_LOSS, Recheck(Outcome.HELD, offset=0), StreamerError, ["does not exist"],
                     id="says-loss at offset 0 of no topic: nothing was read"),
        pytest.param(SAYS_LOSS, UNCHECKED, StreamerError, ["could not be checked", "resumes"],
                     id="says-loss, nothing to check"),
        pytest.param(SAYS_LOSS, LOST, DataLossError, [CONFIRMED, "the query failed with: DataLossError"],
                     id="says-loss, confirmed"),
        pytest.param(OTHER, LOST, DataLossError, [CONFIRMED, "Python worker exited"],
                     id="worker died, loss confirmed"),
        pytest.param(OTHER, UNREACHABLE, StreamerError, ["target query failed: " + OTHER],
                     id="other failure, broker unreachable: as it was"),
        pytest.param(OTHER, HELD, StreamerError, ["target query failed: " + OTHER], id="other failure, held"),
    ],
)
def test_failure_error(
    failure: str, recheck: Recheck, kind: type[StreamerError], words: list[str]
) -> None:
    error = failure_error(failure, recheck, WHERE)
    assert type(error) is kind
    for word in words:
        assert word in str(error)


outcomes = st.builds(
    Recheck,
    outcome=st.sampled_from(Outcome),
    detail=st.text(max_size=20),
    offset=st.one_of(st.none(), st.integers(0, 10)),
    marks=st.one_of(st.none(), st.tuples(st.integers(0, 10), st.integers(0, 10))),
)


@given(st.sampled_from([SAYS_LOSS, OTHER, "", "DataLossError"]), outcomes)
def test_data_loss_only_when_the_recheck_confirms_it(failure: str, recheck: Recheck) -> None:
    error = failure_error(failure, recheck, WHERE)
    assert isinstance(error, DataLossError) == (recheck.outcome is Outcome.LOST)
    if says_data_loss(failure) and recheck.outcome is Outcome.UNREACHABLE:
        assert isinstance(error, KafkaClientError)


def test_reported_offset_and_first_line() -> None:
    assert reported_offset(SAYS_LOSS, "events") == (0, 1880)
    assert reported_offset(SAYS_LOSS, "other") is None
    read = "DataLossError: data loss on topic 'events' partition 2: offset 17 is out of range while reading"
    assert reported_offset(read, "events") == (2, 17)
    assert reported_offset(OTHER, "events") is None
    assert first_line(SAYS_LOSS).startswith("DataLossError: data loss on topic 'events'")
    assert first_line(OTHER) == OTHER
    assert first_line("") == ""
