"""Policy changes with Hive's REPLACE semantics, without stopping the stream: the tables whose
membership changes are dumped and published at one event id E1, after the old policies' events up to
E1. The steps and why a change at the newest bootstrap's id is refused: ``docs/design/source.md``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from streamer.errors import CodecError, StreamerError
from streamer.events.codec import EventDeserializer
from streamer.events.model import BootstrapMarkerPayload, BootstrapScope, ProgressPayload, TableSnapshot
from streamer.kafka.topics import read_tail
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.bootstrap import SourceCatalog, enrich_records, records, snapshot
from streamer.source.consolidate import Consolidated, Dump
from streamer.source.policy import PolicySet
from streamer.source.policy_record import policy_record
from streamer.source.publish_bootstrap import publish_records
from streamer.source.reader import NotificationReader
from streamer.source.source_db import is_bundled_warehouse, shown

log = logging.getLogger(__name__)

TAIL = 32  # records read back for the newest bootstrap: only PROGRESS records (one per start) follow it


class PolicyChangeError(StreamerError):
    """A policy change cannot be published now (the message says why and when it can)."""


def recorded_policy(config: AgentConfig) -> str | None:
    """The policies the topic's newest PROGRESS record names (None: empty topic or not recorded)."""
    tail = read_tail(config.kafka, config.topic_name, n=1, timeout=config.kafka_timeout)
    if not tail or tail[-1].value is None:
        return None
    try:
        event = EventDeserializer()(tail[-1].value)
    except CodecError:
        return None
    return event.payload.policy if isinstance(event.payload, ProgressPayload) else None


def last_bootstrap_id(config: AgentConfig) -> int | None:
    """The id of the topic's newest bootstrap when only PROGRESS records follow it (else None)."""
    tail = read_tail(config.kafka, config.topic_name, n=TAIL, timeout=config.kafka_timeout)
    for record in reversed(tail):
        if record.value is None:
            return None
        try:
            payload = EventDeserializer()(record.value).payload
        except CodecError:
            return None
        if isinstance(payload, BootstrapMarkerPayload):
            return payload.bootstrap_id
        if not isinstance(payload, ProgressPayload):
            return None
    return None


class _Changed:
    """Tables whose membership differs between two policy sets (databases: those of the new one)."""

    def __init__(self, old: PolicySet, new: PolicySet) -> None:
        self.old, self.new = old, new

    def includes_db(self, db: str) -> bool:
        return self.new.includes_db(db) or self.old.includes_db(db)

    def includes_table(self, db: str, table: str) -> bool:
        return self.old.includes_table(db, table) != self.new.includes_table(db, table)


def split(state: Consolidated, old: PolicySet, new: PolicySet) -> tuple[Consolidated, list[TableSnapshot]]:
    """(the newly included part of the state, the newly excluded tables to drop). Pure."""
    added = Dump(
        databases={k: v for k, v in state.dump.databases.items() if new.includes_db(k)},
        tables={k: t for k, t in state.dump.tables.items() if new.includes_table(*k)},
        functions={
            k: f for k, f in state.dump.functions.items()
            if new.includes_db(k[0]) and not old.includes_db(k[0])
        },
    )
    drops = [t.table for k, t in sorted(state.dump.tables.items()) if not new.includes_table(*k)]
    return replace(state, dump=added), drops


def replace_policy(
    config: AgentConfig,
    reader: NotificationReader,
    source: SourceCatalog,
    old: PolicySet,
    new: PolicySet,
) -> int:
    """Publish a policy change (module docstring); returns E1, after which the new agent continues."""
    previous = last_bootstrap_id(config)
    if previous is not None and reader.head_event_id() <= previous:
        raise PolicyChangeError(
            f"cannot publish the change of policies {old} -> {new} yet: the topic's last bootstrap or "
            f"policy change is at event {previous} and the source has no event after it, so targets "
            "could not tell the two apart; start the agent again after the source's next event"
        )
    catch_up = SourceAgent(config, reader, old)
    catch_up.start()
    try:
        state = snapshot(source, reader, _Changed(old, new), config.source_id, enrich=config.enrich,
                         at_least=catch_up.last_id, catalog_name=config.catalog)
        e1 = state.event_id
        while catch_up.last_id < e1:  # the old policy's events up to E1, exactly
            catch_up.config = replace(config, batch_size=min(config.batch_size, e1 - catch_up.last_id))
            if catch_up.run_once() == 0 and catch_up.last_id < e1:
                time.sleep(config.poll_interval)
    finally:
        catch_up.close()
    added, drops = split(state, old, new)
    new_dbs = {db for db in added.dump.databases if not old.includes_db(db)}
    recs = records(added, config.source_id, scope=BootstrapScope.TABLES, drops=drops,
                   policy=policy_record(new), event_time=int(time.time()), databases=new_dbs)
    publish_records(config, enrich_records(recs, config.enrich), head=reader.head_event_id(),
                    policy=policy_record(new))
    log.info("policy %s replaced by %s at event %d: %d tables dropped, %d added", old, new, e1, len(drops),
             len(added.dump.tables))
    return e1


@contextlib.contextmanager
def policy_change_catalog(source_id: str, *, notification_db: str | None = None, hms_uri: str | None = None,
                          auth: Any = None) -> Iterator[SourceCatalog]:
    """The catalog a policy change dumps from, as ``streamer bootstrap`` reads it: a Hive metastore
    through its Thrift API (whatever reader carries its log), never writing to it; the bundled
    warehouse, which streamer writes itself, through its own connection. A Hive metastore's database
    without ``hms_uri`` is refused before anything is opened for writing."""
    if hms_uri:
        from streamer.source.hms_source_catalog import HmsSourceCatalog

        hms = HmsSourceCatalog.connect(hms_uri, auth=auth)
        try:
            yield hms
        finally:
            hms.close()
        return
    if not notification_db or not is_bundled_warehouse(notification_db):
        raise PolicyChangeError(
            f"the policies changed, and dumping the newly included tables of the Hive metastore whose "
            f"database is {shown(str(notification_db))!r} needs its Thrift API: give --hms-uri "
            "thrift://host:port as well (streamer only reads the metastore's database), or start the "
            "agent with the topic's recorded policies"
        )
    from streamer.source.warehouse_catalog import WarehouseCatalog
    from streamer.warehouse import Warehouse

    with Warehouse.open(notification_db, source_id=source_id) as wh:
        yield WarehouseCatalog(wh)


def replace_if_changed(config: AgentConfig, reader: NotificationReader, policy: PolicySet, *,
                       notification_db: str | None = None, hms_uri: str | None = None,
                       auth: Any = None) -> int | None:
    """At start-up: when the topic records other policies than ``policy``, publish the change
    (``replace_policy``) and return its E1; None when nothing changed."""
    from streamer.source.policy_record import parse_policy_record

    previous = recorded_policy(config)
    if previous is None or previous == policy_record(policy):
        return None
    with policy_change_catalog(config.source_id, notification_db=notification_db, hms_uri=hms_uri,
                               auth=auth) as catalog:
        return replace_policy(config, reader, catalog, parse_policy_record(previous), policy)
