"""A stalled or unreachable broker is never a missing topic: `presence.verdict` on observed answers."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st

from streamer.kafka.presence import (
    UNKNOWN,
    UNREACHABLE,
    Answers,
    Kind,
    Metadata,
    error_name,
    needs_metadata,
    verdict,
)

E = KafkaError
LISTED = Metadata(brokers=1, partitions=frozenset({0}))


@pytest.mark.parametrize(
    ("answers", "kind"),
    [
        pytest.param(Answers(marks=(0, 7)), Kind.HELD, id="watermarks-read"),
        pytest.param(Answers(marks=(0, 0)), Kind.HELD, id="empty-partition-is-held"),
        # no broker answered the watermark request
        pytest.param(Answers(marks_error=E._TIMED_OUT), Kind.UNREACHABLE, id="stalled-broker-times-out"),
        pytest.param(Answers(marks_error=E._TRANSPORT), Kind.UNREACHABLE, id="transport-error"),
        pytest.param(Answers(marks_error=E._ALL_BROKERS_DOWN), Kind.UNREACHABLE, id="all-brokers-down"),
        pytest.param(Answers(marks_error=E._DESTROY_BROKER), Kind.UNREACHABLE, id="broker-destroyed"),
        pytest.param(Answers(), Kind.UNREACHABLE, id="no-answer-at-all"),
        # "unknown partition" from the client's own (emptied) metadata cache
        pytest.param(Answers(marks_error=E._UNKNOWN_PARTITION), Kind.UNREACHABLE, id="unknown-unconfirmed"),
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION, metadata_error=E._TRANSPORT),
            Kind.UNREACHABLE, id="the-sre-stall: unknown, metadata unanswered",
        ),
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION, metadata_error=E._TIMED_OUT),
            Kind.UNREACHABLE, id="unknown, metadata timed out",
        ),
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION, metadata=Metadata(brokers=0)),
            Kind.UNREACHABLE, id="unknown, metadata without brokers",
        ),
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION,
                    metadata=Metadata(brokers=0, topic_error=E.UNKNOWN_TOPIC_OR_PART)),
            Kind.UNREACHABLE, id="unknown-topic without brokers is no answer",
        ),
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION, metadata=Metadata(brokers=1, listed=False)),
            Kind.UNREACHABLE, id="unknown, topic not in the answer",
        ),
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION, metadata=LISTED),
            Kind.UNREACHABLE, id="unknown, but the broker lists it: stale cache",
        ),
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION,
                    metadata=Metadata(brokers=1, topic_error=E.LEADER_NOT_AVAILABLE)),
            Kind.UNREACHABLE, id="unknown, leader being elected",
        ),
        # a reachable broker confirms
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION,
                    metadata=Metadata(brokers=1, topic_error=E.UNKNOWN_TOPIC_OR_PART)),
            Kind.ABSENT, id="topic-deleted",
        ),
        pytest.param(
            Answers(marks_error=E.UNKNOWN_TOPIC_OR_PART,
                    metadata=Metadata(brokers=3, topic_error=E.UNKNOWN_TOPIC_OR_PART)),
            Kind.ABSENT, id="broker-said-unknown-topic, confirmed",
        ),
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION,
                    metadata=Metadata(brokers=1, partitions=frozenset({1}))),
            Kind.ABSENT, id="topic-without-the-partition",
        ),
        pytest.param(
            Answers(marks_error=E._UNKNOWN_PARTITION, metadata=Metadata(brokers=1)),
            Kind.ABSENT, id="topic-without-partitions",
        ),
        # an error asking again will not cure
        pytest.param(Answers(marks_error=E.TOPIC_AUTHORIZATION_FAILED), Kind.FAILED, id="not-authorized"),
        pytest.param(Answers(marks_error=E._INVALID_ARG), Kind.FAILED, id="invalid-argument"),
    ],
)
def test_verdict(answers: Answers, kind: Kind) -> None:
    found = verdict(0, answers)
    assert found.kind is kind, found.why
    assert found.why
    assert (found.marks is not None) == (kind is Kind.HELD)


codes = st.one_of(
    st.none(),
    st.sampled_from(sorted(UNKNOWN | UNREACHABLE | {E.LEADER_NOT_AVAILABLE, E.TOPIC_AUTHORIZATION_FAILED})),
    st.integers(-200, 100),
)
metadata = st.builds(
    Metadata,
    brokers=st.integers(0, 3),
    listed=st.booleans(),
    topic_error=st.one_of(st.none(), st.sampled_from([E.UNKNOWN_TOPIC_OR_PART, E.LEADER_NOT_AVAILABLE])),
    partitions=st.frozensets(st.integers(0, 3), max_size=4),
)
answers = st.builds(
    Answers,
    marks=st.one_of(st.none(), st.tuples(st.integers(0, 10), st.integers(0, 10))),
    marks_error=codes,
    metadata=st.one_of(st.none(), metadata),
    metadata_error=codes,
)


@given(answers, st.integers(0, 3))
def test_absent_only_from_a_reachable_brokers_metadata_answer(seen: Answers, partition: int) -> None:
    found = verdict(partition, seen)
    if found.kind is Kind.ABSENT:
        md = seen.metadata
        assert seen.marks is None and needs_metadata(seen.marks_error)
        assert md is not None and md.brokers > 0 and md.listed
        assert md.topic_error == E.UNKNOWN_TOPIC_OR_PART or (
            md.topic_error is None and partition not in md.partitions
        )


@given(answers, st.integers(0, 3))
def test_held_exactly_when_watermarks_were_read(seen: Answers, partition: int) -> None:
    found = verdict(partition, seen)
    assert (found.kind is Kind.HELD) == (seen.marks is not None)
    assert found.marks == seen.marks


@given(answers, st.integers(0, 3))
def test_an_unanswered_request_is_asked_again_never_concluded(seen: Answers, partition: int) -> None:
    """No watermarks and no metadata answer (a stall, a transport error): always UNREACHABLE."""
    if seen.marks is None and seen.metadata is None and (seen.marks_error is None or seen.marks_error in
                                                         UNREACHABLE | UNKNOWN):
        assert verdict(partition, seen).kind is Kind.UNREACHABLE


def test_error_names() -> None:
    assert error_name(E._TIMED_OUT) == "_TIMED_OUT"
    assert error_name(E.UNKNOWN_TOPIC_OR_PART) == "UNKNOWN_TOPIC_OR_PART"
    assert error_name(None) == "no error"
    assert error_name(-100_000)  # a code this librdkafka does not know still gets a name
