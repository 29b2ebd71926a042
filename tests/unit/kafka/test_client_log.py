"""librdkafka's lines through logging: one line per distinct message, repeats counted."""

from __future__ import annotations

import logging

import pytest

from streamer.kafka.client_log import ClientLog, line_key, with_client_log

FAIL = ("%s [%s] %s", "FAIL", "rdkafka#producer-{n}",
        "[thrd:10.0.0.9:9092/bootstrap]: 10.0.0.9:9092/bootstrap: Connect to ipv4#10.0.0.9:9092 failed: "
        "Connection refused (after {n}ms in state CONNECT)")


def _fail(log: ClientLog, n: int) -> None:
    fmt, fac, client, text = FAIL
    log.log(logging.ERROR, fmt, fac, client.format(n=n), text.format(n=n))


def test_a_flood_of_one_failure_is_logged_once_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    log = ClientLog(name="test.librdkafka")
    with caplog.at_level(logging.INFO, logger="test.librdkafka"):
        for n in range(1100):
            _fail(log, n)
    assert len(caplog.records) == 1
    assert caplog.records[0].levelno == logging.INFO  # librdkafka retries it; streamer reports it
    assert "Connection refused" in caplog.records[0].getMessage()
    assert list(log.summary().values()) == [1100]
    assert log.last_error is not None
    assert log.last_error.startswith("10.0.0.9:9092/bootstrap: Connect to")


def test_repeats_show_at_debug_with_a_growing_count(caplog: pytest.LogCaptureFixture) -> None:
    log = ClientLog(name="test.librdkafka.debug")
    with caplog.at_level(logging.DEBUG, logger="test.librdkafka.debug"):
        for n in range(1100):
            _fail(log, n)
    # 1, 2, 4, ... 1024: eleven lines for 1,100 occurrences
    assert len(caplog.records) == 11
    assert "seen 1024 times" in caplog.records[-1].getMessage()


def test_distinct_lines_are_each_logged(caplog: pytest.LogCaptureFixture) -> None:
    log = ClientLog(name="test.librdkafka.distinct", cap=logging.WARNING)
    with caplog.at_level(logging.INFO, logger="test.librdkafka.distinct"):
        log.log(logging.WARNING, "%s [%s] %s", "SSL", "rdkafka#consumer-1", "SSL handshake failed")
        log.log(logging.INFO, "%s [%s] %s", "CONFWARN", "rdkafka#consumer-1", "property ignored")
        _fail(log, 1)
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.INFO, logging.WARNING]
    assert log.last_error is not None and "Connection refused" in log.last_error


def test_lines_that_differ_only_in_numbers_are_the_same() -> None:
    assert line_key("after 0ms in state CONNECT") == line_key("after 12ms in state CONNECT")
    assert line_key("Connection refused") != line_key("Connection reset")


def test_the_config_gets_a_logger_and_keeps_the_rest() -> None:
    config = with_client_log({"bootstrap.servers": "k:1"})
    assert isinstance(config["logger"], ClientLog)
    assert config["bootstrap.servers"] == "k:1"
