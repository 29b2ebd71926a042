"""A commit that failed because the broker refused a record as too large names that record's event."""

from __future__ import annotations

from typing import cast

from confluent_kafka import KafkaError

from streamer.source.prepare import Prepared
from streamer.source.producer import TransactionalProducer
from streamer.source.publish import refused_as_too_large


class Refusals:
    """What ``TransactionalProducer.refused`` reports after a failed commit: (index sent, error)."""

    def __init__(self, *refused: tuple[int, int]) -> None:
        self._refused = [(index, KafkaError(code)) for index, code in refused]

    def refused(self) -> list[tuple[int, KafkaError]]:
        return self._refused


BATCH = [
    Prepared(10, "CREATE_TABLE", b"db", b"a" * 10, obj="db.a"),
    Prepared(11, "ALTER_TABLE", None, None, passed="policy"),  # filtered: not sent
    Prepared(12, "ADD_PARTITION", b"db", b"p" * 5000, obj="db.p"),
]


def _refused(*refused: tuple[int, int]) -> object:
    return refused_as_too_large(cast(TransactionalProducer, Refusals(*refused)), BATCH)


def test_the_refused_index_maps_to_the_event_sent_at_it() -> None:
    error = _refused((1, KafkaError.MSG_SIZE_TOO_LARGE))  # index 1: the second record sent, event 12
    assert error is not None
    assert "event 12 (ADD_PARTITION db.p)" in str(error) and "5,002 bytes" in str(error)
    assert "max.message.bytes" in str(error)


def test_other_refusals_are_left_to_the_retry() -> None:
    assert _refused((0, KafkaError._MSG_TIMED_OUT)) is None
    assert _refused() is None


def test_the_progress_record_after_the_batch_counts_too() -> None:
    error = _refused((2, KafkaError.MSG_SIZE_TOO_LARGE))
    assert error is not None and "PROGRESS" in str(error)
