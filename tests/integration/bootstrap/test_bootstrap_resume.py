"""An interrupted source-side bootstrap resumes without redoing finished work (real broker, bundled
warehouse): the dumped records are kept in the work dir, a failure between two publish transactions
stops the first run, and the second run publishes only the records the topic lacks. Every record is
then in the topic exactly once, a third run publishes nothing, and a target fed from the topic
equals the source."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from streamer.events.codec import EventDeserializer
from streamer.events.model import BootstrapMarkerPayload, BootstrapObjectPayload, Column, Event, EventType
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.topics import read_tail
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.bootstrap_commands import run_bootstrap
from streamer.source.enrich import EnrichSettings
from streamer.source.errors import UnfinishedBootstrapError
from streamer.source.policy import PolicySet
from streamer.source.publish_bootstrap import BootstrapResumeError, BootstrapWork
from streamer.source.reader import SqlNotificationReader
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.target.state.chain import check_chain
from streamer.warehouse import Warehouse
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from streamer.warehouse.workload import COLUMNS, Workload
from tests.unit.source.test_bootstrap_records import _applier, _run

pytestmark = pytest.mark.integration

SOURCE = "resume"


class Interrupted(Exception):
    """Injected between two publish transactions."""


def _topic_events(config: AgentConfig) -> list[Event]:
    deserialize = EventDeserializer()
    return [deserialize(r.value) for r in read_tail(config.kafka, config.topic_name, n=100_000) if r.value]


def test_interrupted_bootstrap_publishes_each_record_once(
    broker: EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    url = str(tmp_path / "m.sqlite")
    wh = Warehouse.open(url, root=tmp_path / "wh", cmroot=tmp_path / "cm", source_id=SOURCE)
    reader = SqlNotificationReader(url)
    try:
        Workload(wh, seed=11).run(80)
        db = wh.databases()[0]
        wh.create_table(db, "many", COLUMNS, [Column("dt", "string")])
        wh.add_partitions(db, "many", [{"dt": str(i)} for i in range(9)])
        settings = EnrichSettings(checksum_algorithm=CHECKSUM_ALGORITHM, cmroot=str(tmp_path / "cm"))
        config = AgentConfig(SOURCE, broker.client_settings(), topic=topic, enrich=settings)
        scope = PolicySet.parse(["*"])
        work = BootstrapWork(tmp_path / "work", SOURCE, config.topic_name)
        catalog = WarehouseCatalog(wh)
        transactions = 0

        def fail_after_two(n: int) -> None:
            nonlocal transactions
            transactions += 1
            if transactions == 2:
                raise Interrupted

        with pytest.raises(Interrupted):
            run_bootstrap(config, reader, catalog, scope, work=work, records_per_transaction=3,
                          partitions_per_record=2, on_published=fail_after_two)
        kept = work.load()
        assert kept is not None and not kept.finished
        total = len(kept.records)
        assert total > 10, total
        first = _topic_events(config)
        assert [e.payload.sequence for e in first if isinstance(e.payload, BootstrapObjectPayload)] == [
            1, 2, 3, 4, 5, 6]

        wh.insert(db, "many", [{"id": 1, "name": "late", "amount": 1.0, "ok": True}], {"dt": "0"})
        # an agent started now would publish incremental events after a partial dump: refused
        with pytest.raises(UnfinishedBootstrapError, match=f"inside bootstrap {kept.bootstrap_id}"):
            SourceAgent(config, reader, scope).start()
        # a re-run with another policy would mix two bootstraps: refused before publishing anything
        with pytest.raises(BootstrapResumeError, match="has policy"):
            run_bootstrap(config, reader, catalog, PolicySet.parse(["other"]), work=work)
        published: list[int] = []
        summary = run_bootstrap(config, reader, catalog, scope, work=work, records_per_transaction=3,
                                on_published=published.append)
        assert "resumed after record 6" in summary, summary
        assert sum(published) == total - 6  # only the rest, the marker included; nothing was re-dumped

        events = _topic_events(config)
        seqs = Counter(e.payload.sequence for e in events if isinstance(e.payload, BootstrapObjectPayload))
        assert seqs == Counter(range(1, total)), seqs  # every record exactly once
        markers = [e for e in events if isinstance(e.payload, BootstrapMarkerPayload)]
        assert len(markers) == 1 and markers[0].event_id == kept.bootstrap_id

        again = run_bootstrap(config, reader, catalog, scope, work=work)
        assert "published completely before" in again
        assert len(_topic_events(config)) == len(events)  # a finished bootstrap is not published again

        # a target fed from the topic equals the source as of the bootstrap (the late insert follows
        # as an incremental event, not part of this bootstrap)
        target = MemoryCatalog()
        applier, state = _applier(tmp_path / "target", target)
        kinds = BootstrapObjectPayload | BootstrapMarkerPayload
        bootstrap = [e for e in events if isinstance(e.payload, kinds)]
        _run(applier, state, bootstrap)
        for name in wh.databases():
            snap = target.get_database(name)
            assert snap is not None and snap.parameters[LAST_ID_PARAM] == str(kept.bootstrap_id)
            assert sorted(target.list_tables(name)) == sorted(wh.tables(name))
            for table in wh.tables(name):
                assert sorted(p.values for p in target.list_partitions(name, table)) == sorted(
                    p.values for p in wh.partition_snapshots(name, table)), f"{name}.{table}"
        agent = SourceAgent(config, reader, scope)
        try:
            agent.start()  # the bootstrap is whole now: the agent continues after it
            assert agent.last_id == kept.bootstrap_id
        finally:
            agent.close()
        # the interrupted and the resumed publishing, and the agent after them, form one event chain
        chain = _topic_events(config)
        assert chain[0].prev_event_id == 0 and chain[-1].event_type is EventType.PROGRESS
        assert check_chain(topic, list(enumerate(chain)), None).error is None
    finally:
        reader.close()
        wh.close()
