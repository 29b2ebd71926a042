"""``streamer demo --keep``: the agent's and the target job's /metrics, served and printed."""

from __future__ import annotations

import contextlib
import urllib.request

import pytest

from streamer.demo import _print_connection, serve_metrics


def test_keep_serves_each_roles_metrics_and_prints_where(capsys: pytest.CaptureFixture[str]) -> None:
    with contextlib.ExitStack() as stack:
        urls = serve_metrics(stack)
        pages = {}
        for name, url in urls.items():
            with urllib.request.urlopen(url, timeout=5) as response:
                pages[name] = response.read().decode()
        _print_connection("127.0.0.1:9092", "thrift://127.0.0.1:9083", "/wh", "/state", urls,
                          "/src/metastore.db", "/src/warehouse")
    assert set(urls) == {"agent", "target"}
    assert "streamer_source_last_event_id" in pages["agent"] and "streamer_target_" not in pages["agent"]
    assert "streamer_target_watermark_event_id" in pages["target"]
    assert "streamer_source_" not in pages["target"]
    printed = capsys.readouterr().out
    assert f"agent /metrics       {urls['agent']}" in printed
    assert f"target /metrics      {urls['target']}" in printed
    assert "source warehouse     /src/metastore.db" in printed  # issue 40: where to write to the source
    assert "streamer warehouse --url /src/metastore.db insert" in printed
    with pytest.raises(OSError):  # stopped with the demo
        urllib.request.urlopen(urls["agent"], timeout=2)


def test_keep_re_reads_released_events_while_it_waits() -> None:
    """Issue 40: after `streamer target retry` on the demo's idle stream nothing was re-read for
    ~100 s; its wait now does what `target run` does between batches, about once a second."""
    import os
    import signal

    from streamer.demo import _wait_for_interrupt

    ticks: list[int] = []

    def tick() -> None:
        ticks.append(1)
        if len(ticks) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the demo's handler sets its stop event
        if len(ticks) == 1:
            raise RuntimeError("a failed re-read does not end the wait")

    _wait_for_interrupt(tick=tick)
    assert len(ticks) == 2
