"""A policy change of a Hive metastore whose notification log the agent reads from the metastore's
PostgreSQL database (the SQL reader) and whose tables it dumps over Thrift (``--hms-uri``): the newly
included table is bootstrapped at E1, and the metastore's database -- schema and every row of every
table -- is exactly as it was before the change. Hive 2.3's embedded server has no notification
listener on PostgreSQL, so the test logs its changes as ``test_bootstrap_hms.HiveSource`` does."""

from __future__ import annotations

from typing import Any

import pytest

from streamer.events.model import BootstrapKind, BootstrapObjectPayload, CreateTablePayload, EventType
from streamer.kafka.broker import EmbeddedBroker
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.bootstrap_commands import run_bootstrap
from streamer.source.hms_source_catalog import HmsSourceCatalog
from streamer.source.policy import PolicySet
from streamer.source.reader import SqlNotificationReader
from streamer.source.replace import replace_if_changed
from tests.integration.bootstrap.test_bootstrap_hms import HiveSource, hive, write_parquet
from tests.integration.bootstrap.test_bootstrap_resume import _topic_events

__all__ = ["hive"]  # the fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _url(source: HiveSource) -> str:
    info = source.db.info
    return f"postgresql://{info.host}:{info.port}/{info.dbname}?user={info.user}"


def _dump(source: HiveSource) -> dict[str, Any]:
    """The metastore database's schema and every row of every table, as text."""
    db = source.db
    columns = db.execute(
        "SELECT table_name, column_name, data_type, ordinal_position FROM information_schema.columns "
        "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position").fetchall()
    out: dict[str, Any] = {"schema": columns}
    for (table,) in db.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                               "'public' ORDER BY table_name").fetchall():
        rows = db.execute(f'SELECT t::text FROM "{table}" t').fetchall()
        out[table] = sorted(r[0] for r in rows)
    return out


def test_a_policy_change_leaves_the_metastore_database_as_it_was(
    hive: HiveSource, broker: EmbeddedBroker, topic: str, prefix: str
) -> None:
    db = f"{prefix}rep"
    url = _url(hive)
    hive.create_database(db)
    for name in ("a1", "b1"):
        table = hive.create_table(db, name)
        assert table.sd.location
        write_parquet(table.sd.location, "000000_0", 0)
        hive.log(EventType.CREATE_TABLE, CreateTablePayload(table), db, name)
    config = AgentConfig(hive.source_id, broker.client_settings(), topic=topic, gap_settle_seconds=0.5,
                         poll_interval=0.2)
    first = PolicySet.parse([f"{db}.['a1']"])
    reader = SqlNotificationReader(url)
    catalog = HmsSourceCatalog.connect(hive.hms.uri)
    try:
        run_bootstrap(config, reader, catalog, first)
        agent = SourceAgent(config, reader, first)
        try:
            agent.run(once=True)
        finally:
            agent.close()
        later = hive.create_table(db, "c1")  # a source event after the bootstrap
        hive.log(EventType.CREATE_TABLE, CreateTablePayload(later), db, "c1")

        before = _dump(hive)
        wider = PolicySet.parse([f"{db}.['a1', 'b1']"])
        e1 = replace_if_changed(config, reader, wider, notification_db=url, hms_uri=hive.hms.uri)
        assert _dump(hive) == before
    finally:
        catalog.close()
        reader.close()
    added = [e.payload for e in _topic_events(config) if isinstance(e.payload, BootstrapObjectPayload)
             and e.payload.bootstrap_id == e1]
    assert [(p.kind, p.table.name if p.table else None, len(p.files)) for p in added] == [
        (BootstrapKind.TABLE, "b1", 1)]
