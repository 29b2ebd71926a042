"""The start-up warning for an existing topic with a smaller size limit than the agent's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamer.source.topic_limit import limit_warning


@given(st.one_of(st.none(), st.integers(0, 10**9)), st.integers(1024, 10**9))
def test_a_warning_exactly_when_the_topic_takes_less_than_the_agent(topic_limit: int | None,
                                                                     agent_limit: int) -> None:
    warning = limit_warning("streamer.s.events", topic_limit, agent_limit)
    assert (warning is not None) == (topic_limit is not None and topic_limit < agent_limit)
    if warning is not None:
        assert "streamer.s.events" in warning and "max.message.bytes" in warning
        assert f"{topic_limit:,}" in warning and "--max-record-bytes" in warning
