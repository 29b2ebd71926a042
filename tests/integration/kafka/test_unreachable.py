"""Kafka helpers against a closed port: one typed error naming the address, within the timeout."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from streamer.errors import ConfigError
from streamer.kafka.broker import free_port
from streamer.kafka.errors import KafkaUnreachableError
from streamer.kafka.reachability import CONNECT_TIMEOUT_ENV, check_reachable, connect_timeout
from streamer.kafka.topics import ensure_topic, read_tail

pytestmark = pytest.mark.integration

CALLS: dict[str, Callable[[dict[str, Any]], object]] = {
    "check_reachable": check_reachable,
    "ensure_topic": lambda config: ensure_topic(config, "never-created"),
    "read_tail": lambda config: read_tail(config, "any-topic"),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_closed_port_is_one_error_naming_it_within_the_timeout(
    call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONNECT_TIMEOUT_ENV, "2")
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(KafkaUnreachableError) as info:
        CALLS[call]({"bootstrap.servers": address})
    assert time.monotonic() - started < 8
    text = str(info.value)
    assert address in text and "--bootstrap-servers" in text and "Connection refused" in text


def test_the_timeout_must_be_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONNECT_TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigError, match=CONNECT_TIMEOUT_ENV):
        connect_timeout()
    assert connect_timeout(3) == 3.0
