"""Policy changes (REPLACE) of a real Hive Metastore, read through its Thrift API as ``streamer bootstrap``
reads it: the embedded metastore with streamer's listener, the session's broker, a target fed from the
topic. A bootstrap, then the policy widened (a table bootstrapped at E1) and narrowed (a table dropped);
the target equals the source under each new policy, and the source is exactly as it was (no event, no
object changed by the changes). A Hive metastore's database without its Thrift URI is refused before
anything is opened for writing."""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.codec import EventDeserializer
from streamer.events.model import (
    BootstrapKind,
    BootstrapObjectPayload,
    Column,
    DatabaseSnapshot,
    Event,
    PartitionSnapshot,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.topics import read_tail
from streamer.metastore.memory import MemoryCatalog
from streamer.metastore.thrift import HmsCatalog
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.bootstrap_commands import run_bootstrap
from streamer.source.hms_source_catalog import HmsSourceCatalog
from streamer.source.policy import PolicySet
from streamer.source.replace import PolicyChangeError, policy_change_catalog, replace_if_changed
from streamer.source.thrift_reader import ThriftNotificationReader
from tests.unit.source.logdb import sqlite_logdb
from tests.unit.source.test_bootstrap_records import _applier, _run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

COLS = [Column("id", "bigint"), Column("name", "string")]


def _external(db: str, name: str, location: Path, keys: list[Column] | None = None) -> TableSnapshot:
    return TableSnapshot(name=name, db=db, table_type="EXTERNAL_TABLE", parameters={"EXTERNAL": "TRUE"},
                         sd=StorageDescriptor(location=location.as_uri(), columns=COLS),
                         partition_keys=keys or [])


def _source_state(hms: HmsCatalog, db: str) -> dict[str, Any]:
    """Everything of the source the test can see: its newest event id and every object of ``db``."""
    tables = {}
    for name in sorted(hms.list_tables(db)):
        table = hms.get_table(db, name)
        assert table is not None
        params = {k: v for k, v in table.parameters.items() if k != "transient_lastDdlTime"}
        tables[name] = (dataclasses.replace(table, parameters=params),
                        sorted(tuple(p.values) for p in hms.list_partitions(db, name)))
    return {"event_id": hms.current_notification_event_id(), "databases": hms.list_databases(),
            "db": hms.get_database(db), "tables": tables}


def _events(config: AgentConfig) -> list[Event]:
    deserialize = EventDeserializer()
    return [deserialize(r.value) for r in read_tail(config.kafka, config.topic_name, n=100_000) if r.value]


def _publish(config: AgentConfig, uri: str, policy: PolicySet) -> None:
    agent = SourceAgent(config, ThriftNotificationReader(uri), policy)
    try:
        agent.run(once=True)
    finally:
        agent.close()


def test_policy_widened_and_narrowed_over_thrift(
    hms_notifying: EmbeddedMetastore, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    uri = hms_notifying.uri
    db = f"rep_{tmp_path.name[-8:].lower().replace('-', '_')}"
    hms = HmsCatalog(uri)
    reader = ThriftNotificationReader(uri)
    config = AgentConfig("rephms", broker.client_settings(), topic=f"streamer.rephms.{db}",
                         gap_settle_seconds=0.5, poll_interval=0.2)
    try:
        hms.create_database(DatabaseSnapshot(name=db, location=(tmp_path / "db").as_uri()))
        for name in ("a1", "c1"):
            (tmp_path / name).mkdir()
            (tmp_path / name / "part-0.parquet").write_bytes(name.encode())
            hms.create_table(_external(db, name, tmp_path / name))
        part = tmp_path / "b1" / "dt=d1"
        part.mkdir(parents=True)
        (part / "part-0.parquet").write_bytes(b"b1")
        hms.create_table(_external(db, "b1", tmp_path / "b1", [Column("dt", "string")]))
        hms.add_partitions(db, "b1", [PartitionSnapshot(values=["d1"], sd=StorageDescriptor(
            location=f"file://{part}", columns=COLS))])

        first = PolicySet.parse([f"{db}.['a1']"])
        source = HmsSourceCatalog(HmsCatalog(uri))
        try:
            run_bootstrap(config, reader, source, first)
        finally:
            source.close()
        _publish(config, uri, first)
        a1 = hms.get_table(db, "a1")
        assert a1 is not None
        hms.alter_table(db, "a1", dataclasses.replace(a1, parameters={**a1.parameters, "note": "one"}))

        wider = PolicySet.parse([f"{db}.['a1', 'b1']"])
        before = _source_state(hms, db)
        e1 = replace_if_changed(config, reader, wider, hms_uri=uri)
        assert e1 == before["event_id"]
        assert _source_state(hms, db) == before  # no event, no object changed at the source
        added = [e.payload for e in _events(config) if isinstance(e.payload, BootstrapObjectPayload)
                 and e.payload.bootstrap_id == e1]
        assert [(p.kind, p.table.name if p.table else None) for p in added] == [(BootstrapKind.TABLE, "b1")]
        assert replace_if_changed(config, reader, wider, hms_uri=uri) is None  # recorded now: no change

        _publish(config, uri, wider)
        b1 = hms.get_table(db, "b1")
        assert b1 is not None
        hms.alter_table(db, "b1", dataclasses.replace(b1, parameters={**b1.parameters, "note": "two"}))
        narrower = PolicySet.parse([f"{db}.['b1']"])
        before = _source_state(hms, db)
        e2 = replace_if_changed(config, reader, narrower, hms_uri=uri)
        assert e2 == before["event_id"] and _source_state(hms, db) == before
        dropped = [e.payload for e in _events(config) if isinstance(e.payload, BootstrapObjectPayload)
                   and e.payload.bootstrap_id == e2]
        assert [(p.kind, p.table.name if p.table else None) for p in dropped] == [
            (BootstrapKind.DROP_TABLE, "a1")]
        _publish(config, uri, narrower)

        # a target fed from the whole topic equals the source under the newest policy
        target = MemoryCatalog()
        applier, state = _applier(tmp_path / "target", target)
        _run(applier, state, _events(config))
        assert target.list_tables(db) == ["b1"]
        got, want = target.get_table(db, "b1"), hms.get_table(db, "b1")
        assert got is not None and want is not None
        assert got.parameters.get("note") == "two" == want.parameters.get("note")
        assert [p.values for p in target.list_partitions(db, "b1")] == [["d1"]]
    finally:
        reader.close()
        hms.close()


def test_a_hive_database_without_its_thrift_uri_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "metastore.sqlite"
    with sqlite_logdb(str(path)) as logdb:
        logdb.add(1)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(PolicyChangeError, match="give --hms-uri"), policy_change_catalog(
            "s", notification_db=str(path)):
        pass
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    names = [r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert not [n for n in names if n.startswith("WH_")], names
