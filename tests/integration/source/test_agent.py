"""The source agent end to end: bundled warehouse → agent → embedded Tansu broker (real services)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from streamer.errors import DecodeError, EventGapError
from streamer.events.codec import decode_event
from streamer.events.model import CreateTablePayload, Event, EventType, ProgressPayload
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.settings import with_overrides
from streamer.kafka.topics import end_offsets, iter_range
from streamer.source.agent import AgentConfig, ProducerFencedError, SourceAgent
from streamer.source.enrich import EnrichSettings
from streamer.source.policy import PolicySet
from streamer.source.reader import SqlNotificationReader
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

STREAMER = str(Path(sys.executable).with_name("streamer"))


def topic_events(config: dict[str, Any], topic: str) -> list[Event]:
    """Every committed record of the topic, decoded (read_committed, explicit assignment)."""
    high = end_offsets(config, topic).get(0, 0)
    consumer = Consumer(with_overrides(config, group_id="unused", isolation_level="read_committed",
                                       enable_auto_commit=False, auto_offset_reset="earliest"))
    try:
        return [decode_event(m.value()) for m in iter_range(consumer, topic, 0, 0, high, idle_timeout=20)]
    finally:
        consumer.close()


_OPEN: list[SourceAgent] = []


@pytest.fixture(autouse=True)
def _close_agents() -> Iterator[None]:
    yield
    while _OPEN:
        agent = _OPEN.pop()
        agent.close()
        agent.reader.close()


def _agent(broker: EmbeddedBroker, url: str, topic: str, tmp_path: Path, policy: PolicySet | None = None,
           **kw: Any) -> SourceAgent:
    config = AgentConfig("src", broker.client_settings(), topic=topic, gap_settle_seconds=0.2,
                         enrich=EnrichSettings(cmroot=str(tmp_path / "cmroot")), **kw)
    agent = SourceAgent(config, SqlNotificationReader(url), policy)
    _OPEN.append(agent)
    return agent


def assert_chained(events: list[Event], first_prev: int = 0) -> None:
    """Every record names the event id of the record before it in the topic (targets check this)."""
    prev = first_prev
    for offset, event in enumerate(events):
        assert event.prev_event_id == prev, f"record {offset} (event {event.event_id}) follows {prev}"
        prev = event.event_id


def _data_events(events: list[Event]) -> list[Event]:
    return [e for e in events if e.event_type is not EventType.PROGRESS]


def test_workload_arrives_exactly_once_in_order(
    broker: EmbeddedBroker, warehouse: Warehouse, topic: str, tmp_path: Path
) -> None:
    stats = Workload(warehouse, seed=7).run(1000)
    assert stats.events >= 1000
    url = warehouse_url(warehouse)
    agent = _agent(broker, url, topic, tmp_path, batch_size=300)
    agent.run(once=True)
    assert agent.last_id == stats.last_event_id

    events = topic_events(broker.client_settings(), topic)
    data = _data_events(events)
    assert [e.event_id for e in data] == list(range(1, stats.last_event_id + 1))
    assert {e.source.source_id for e in events} == {"src"}
    assert len({e.event_type for e in data}) >= 8  # a real mix
    # every file reference leaves the agent verifiable
    for e in data:
        for ref in getattr(e.payload, "files", []):
            assert ref.checksum and ref.checksum_algorithm == "sha256" and ref.cm_uri, (e.event_id, ref)
    progress = [e.payload for e in events if isinstance(e.payload, ProgressPayload)]
    # one at start-up (announces the head), then one per batch of 300
    assert len(progress) == 5 and progress[-1].last_event_id == stats.last_event_id
    assert progress[0].last_event_id == 0 and progress[0].source_head_event_id == stats.last_event_id

    # a restarted agent learns where it stopped from the topic alone, and publishes nothing twice
    again = _agent(broker, url, topic, tmp_path)
    again.start()
    assert again.last_id == stats.last_event_id
    assert again.run_once() == 0
    Workload(warehouse, seed=8).run(5)
    again.run(once=True)
    events = topic_events(broker.client_settings(), topic)
    data = _data_events(events)
    assert [e.event_id for e in data] == list(range(1, warehouse.current_event_id() + 1))
    assert_chained(events)


def warehouse_url(warehouse: Warehouse) -> str:
    return warehouse.store.url


def test_policy_filters_and_progress_advances(
    broker: EmbeddedBroker, sqlite_warehouse: Warehouse, topic: str, tmp_path: Path
) -> None:
    wh = sqlite_warehouse
    wh.create_database("sales")
    wh.create_database("hr")
    from streamer.events.model import Column

    for db, name in [("sales", "orders"), ("sales", "tmp_x"), ("hr", "people")]:
        wh.create_table(db, name, [Column("id", "bigint")])
    policy = PolicySet.parse(["sales.['.*'].['tmp_.*']"])
    agent = _agent(broker, warehouse_url(wh), topic, tmp_path, policy=policy)
    agent.run(once=True)
    events = topic_events(broker.client_settings(), topic)
    tables = [(e.db, e.payload.table.name) for e in events if isinstance(e.payload, CreateTablePayload)]
    assert tables == [("sales", "orders")]
    assert all(e.db != "hr" for e in _data_events(events))
    assert isinstance(events[-1].payload, ProgressPayload)
    assert events[-1].payload.last_event_id == wh.current_event_id()  # filtered tail still counts


def test_gap_halts_with_event_gap_error(
    broker: EmbeddedBroker, sqlite_warehouse: Warehouse, topic: str, tmp_path: Path
) -> None:
    wh = sqlite_warehouse
    Workload(wh, seed=3).run(20)
    url = warehouse_url(wh)
    agent = _agent(broker, url, topic, tmp_path, batch_size=5)
    assert agent.run_once() == 5
    import sqlite3

    with sqlite3.connect(url) as conn:
        conn.execute('DELETE FROM "NOTIFICATION_LOG" WHERE "EVENT_ID" IN (7, 8)')
    assert agent.run_once() == 1  # event 6, the rows before the hole
    with pytest.raises(EventGapError) as info:
        agent.run(once=True)
    assert (info.value.first_missing, info.value.last_missing) == (7, 8)
    data = _data_events(topic_events(broker.client_settings(), topic))
    assert [e.event_id for e in data] == [1, 2, 3, 4, 5, 6]


def test_undecodable_event_halts_at_that_event(
    broker: EmbeddedBroker, sqlite_warehouse: Warehouse, topic: str, tmp_path: Path
) -> None:
    wh = sqlite_warehouse
    Workload(wh, seed=4).run(10)
    url = warehouse_url(wh)
    import sqlite3

    with sqlite3.connect(url) as conn:
        conn.execute('UPDATE "NOTIFICATION_LOG" SET "MESSAGE" = \'{not json\' WHERE "EVENT_ID" = 4')
    agent = _agent(broker, url, topic, tmp_path)
    with pytest.raises(DecodeError) as info:
        agent.run(once=True)
    assert info.value.event_id == 4
    assert "event 4" in str(info.value)
    data = _data_events(topic_events(broker.client_settings(), topic))
    assert [e.event_id for e in data] == [1, 2, 3]


def test_sigkill_at_random_points_loses_and_duplicates_nothing(
    broker: EmbeddedBroker, sqlite_warehouse_url: str, topic: str, tmp_path: Path
) -> None:
    url = sqlite_warehouse_url
    Warehouse.open(url, root=tmp_path / "warehouse", cmroot=tmp_path / "cmroot").close()
    stop = threading.Event()

    def workload() -> None:  # a steady stream of events for as long as the agent is being killed
        wh = Warehouse.open(url)
        try:
            load = Workload(wh, seed=11)
            while not stop.is_set():
                load.run(10)
                time.sleep(0.02)
        finally:
            wh.close()

    writer = threading.Thread(target=workload, daemon=True)
    writer.start()
    command = [STREAMER, "source", "run", "--source-id", "src", "--notification-db", url,
               "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, "--batch-size", "7",
               "--poll-interval", "0.05", "--gap-settle-seconds", "0.5", "--cmroot", str(tmp_path / "cmroot")]
    rng = random.Random(5)
    kills = 0
    env = dict(os.environ)
    offset = 0
    while kills < 12:
        log_path = tmp_path / f"agent-{kills}.log"
        with log_path.open("w") as log_file:
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log_file)
            # kill only a working agent: once it has published something, at a random moment after
            deadline = time.monotonic() + 60
            while end_offsets(broker.client_settings(), topic).get(0, 0) == offset:
                assert time.monotonic() < deadline, "the agent published nothing for 60 s"
                if proc.poll() is not None:
                    pytest.fail(f"the agent died on its own: {log_path.read_text()[-3000:]}")
                time.sleep(0.05)
            time.sleep(rng.uniform(0, 0.4))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        kills += 1
        offset = end_offsets(broker.client_settings(), topic).get(0, 0)
    stop.set()
    writer.join()
    final = subprocess.run([*command, "--once"], env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr[-3000:]

    wh = Warehouse.open(url)
    last = wh.current_event_id()
    wh.close()
    events = topic_events(broker.client_settings(), topic)
    ids = [e.event_id for e in _data_events(events)]
    assert last >= 200
    assert ids == list(range(1, last + 1)), f"{kills} kills; duplicates or holes in the topic"
    assert_chained(events)  # aborted transactions leave no trace in the chain either


def test_a_second_agent_fences_the_first(
    broker: EmbeddedBroker, sqlite_warehouse: Warehouse, topic: str, tmp_path: Path
) -> None:
    wh = sqlite_warehouse
    Workload(wh, seed=5).run(5)
    url = warehouse_url(wh)
    first = _agent(broker, url, topic, tmp_path)
    first.run(once=True)
    second = _agent(broker, url, topic, tmp_path)
    second.start()  # same transactional id: the first producer is fenced
    Workload(wh, seed=6).run(3)
    with pytest.raises(ProducerFencedError):
        first.run_once()
    second.run(once=True)
    data = _data_events(topic_events(broker.client_settings(), topic))
    assert [e.event_id for e in data] == list(range(1, wh.current_event_id() + 1))
