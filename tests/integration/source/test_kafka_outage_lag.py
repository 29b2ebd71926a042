"""An agent that cannot reach Kafka shows it: its lag grows with every event the source writes.

Issue 40 item 3: with the broker stopped, ``streamer_source_lag_events`` stayed at 0 while the
source moved on ~400 events (lag was refreshed only after a publish, which an outage never
reaches). The broker is stopped with SIGSTOP (``EmbeddedBroker.pause``): connections stay open and
nothing answers. Events written before the agent notices are read and not published; events written
while it retries are only in the metastore. Both must count, and lag goes back to 0 once the broker
answers and the agent has published them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from streamer import metrics
from streamer.kafka.broker import EmbeddedBroker
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.enrich import EnrichSettings
from streamer.source.reader import SqlNotificationReader
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _sample(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def _wait(condition: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_an_agent_cut_off_from_kafka_shows_growing_lag(sqlite_warehouse: Warehouse, tmp_path: Path) -> None:
    wh = sqlite_warehouse
    Workload(wh, seed=11).run(20)
    with EmbeddedBroker(log_path=tmp_path / "broker.log") as broker:
        config = AgentConfig("lagging", broker.client_settings(), poll_interval=0.2, gap_settle_seconds=0.2,
                             kafka_timeout=3.0, max_backoff=2.0,
                             enrich=EnrichSettings(cmroot=str(tmp_path / "cmroot")))
        agent = SourceAgent(config, SqlNotificationReader(wh.store.url))
        stop = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            try:
                agent.run(stop=stop)
            except BaseException as exc:  # reported by the test thread
                failed.append(exc)

        thread = threading.Thread(target=run, name="agent", daemon=True)
        thread.start()
        try:
            _wait(lambda: agent.last_id == wh.current_event_id(), "the first events published")
            assert _sample("streamer_source_lag_events") == 0
            published = agent.last_id
            kafka_errors = _sample("streamer_source_errors_total", kind="kafka")
            broker.pause()
            try:
                # read by the agent, then refused by the stalled broker
                Workload(wh, seed=12).run(30)
                _wait(lambda: _sample("streamer_source_errors_total", kind="kafka") > kafka_errors,
                      "the agent to report the outage")
                behind = wh.current_event_id() - published
                _wait(lambda: _sample("streamer_source_lag_events") == behind, f"lag to reach {behind}")
                # written while the agent retries: only the metastore knows them
                Workload(wh, seed=13).run(30)
                head = wh.current_event_id()
                _wait(lambda: _sample("streamer_source_lag_events") == head - published,
                      f"lag to reach {head - published} (it shows "
                      f"{_sample('streamer_source_lag_events'):.0f})")
                assert _sample("streamer_source_head_event_id") == head
                assert agent.last_id == published  # nothing was published meanwhile
            finally:
                broker.resume()
            _wait(lambda: agent.last_id == wh.current_event_id(), "the backlog published after the outage")
            _wait(lambda: _sample("streamer_source_lag_events") == 0, "lag back to 0")
            assert not failed, failed
        finally:
            stop.set()
            thread.join(timeout=60)
            agent.close()
            agent.reader.close()
