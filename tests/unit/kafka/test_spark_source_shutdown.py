"""`streamer_kafka`'s readers end quietly when Spark hangs up their source-runner process, and only then."""

from __future__ import annotations

import sys
import types
from typing import Any, cast

import pytest
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper

from streamer.kafka import spark_source
from streamer.kafka.spark_source import KafkaDataSource, KafkaDriverReader, KafkaStreamReader

OPTIONS = {"bootstrap.servers": "127.0.0.1:9", "topic": "t"}


class Exited(Exception):
    """What ``os._exit`` raises here instead of ending the test process."""


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    codes: list[int] = []

    def fake_exit(code: int) -> None:
        codes.append(code)
        raise Exited

    monkeypatch.setattr(spark_source.os, "_exit", fake_exit)
    return codes


@pytest.fixture
def in_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process looks like PySpark's streaming source runner (``python -m <runner>``)."""
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name=spark_source._RUNNER_MODULE)  # type: ignore[assignment]
    monkeypatch.setitem(sys.modules, "__main__", main)


def _reader(kind: str) -> Any:
    return KafkaDataSource({**OPTIONS, "reader": kind}).streamReader(None)  # type: ignore[arg-type]


def test_the_driver_reader_gets_spark_s_stop() -> None:
    """PySpark's own adapter of a simple reader drops ``stop()``; streamer's passes it on."""
    reader = _reader("driver")
    assert isinstance(reader, _SimpleStreamReaderWrapper)
    assert isinstance(reader.simple_reader, KafkaDriverReader)
    closed: list[str] = []
    consumer = types.SimpleNamespace(close=lambda: closed.append("read"))
    reader.simple_reader._clients = {"read": cast(Any, consumer)}
    reader.stop()
    assert closed == ["read"]
    assert isinstance(_reader("task"), KafkaStreamReader)


@pytest.mark.usefixtures("in_runner")
@pytest.mark.parametrize("kind", ["driver", "task"])
@pytest.mark.parametrize("hang_up", [EOFError, BrokenPipeError, ConnectionResetError])
def test_a_hung_up_runner_exits_quietly(kind: str, hang_up: type[BaseException], exits: list[int]) -> None:
    reader = _reader(kind)
    with pytest.raises(Exited):
        try:
            raise hang_up()
        except BaseException:
            reader.stop()  # what the runner's `finally` does while the exception propagates
    assert exits == [0]


@pytest.mark.usefixtures("in_runner")
def test_other_errors_still_go_back_to_spark(exits: list[int]) -> None:
    reader = _reader("driver")
    try:
        raise ValueError("a reader's own failure")
    except ValueError:
        reader.stop()
    reader.stop()  # no exception at all: a plain stop
    assert exits == []


def test_outside_the_runner_stop_never_exits(exits: list[int]) -> None:
    reader = _reader("driver")
    try:
        raise EOFError
    except EOFError:
        reader.stop()
    assert exits == []
