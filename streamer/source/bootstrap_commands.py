"""``streamer bootstrap``: dump a source's policy as of one event id into its topic, with progress bars."""

from __future__ import annotations

import logging
import time
from typing import Any

import click

log = logging.getLogger(__name__)


def _env(name: str) -> dict[str, Any]:
    return {"envvar": f"STREAMER_{name}", "show_envvar": True}


@click.command("bootstrap")
@click.option("--source-id", required=True, **_env("SOURCE_ID"),
              help="Name of the source; names the topic and the agent's transactional id.")
@click.option("--warehouse", "warehouse_url", required=True, **_env("WAREHOUSE"),
              help="The bundled source warehouse's metastore URL (sqlite path or postgresql://...); "
                   "its notification log is read too.")
@click.option("--policy", "policies", multiple=True, **_env("POLICY"),
              help="Replication policy in Hive's syntax; repeatable. Default: every database. "
                   "Give the agent the same policies.")
@click.option("--bootstrap-servers", required=True, **_env("BOOTSTRAP_SERVERS"),
              help="Kafka bootstrap servers, host:port[,host:port].")
@click.option("--kafka-setting", "-X", "kafka_settings", multiple=True, metavar="KEY=VALUE",
              **_env("KAFKA_SETTING"), help="librdkafka property passed through; repeatable.")
@click.option("--topic", **_env("TOPIC"), help="Topic to publish to. Default: streamer.<source-id>.events.")
@click.option("--checksum-algorithm", default="sha256", show_default=True, **_env("CHECKSUM_ALGORITHM"),
              help="What the source filesystem's file checksums are.")
@click.option("--cmroot", **_env("CMROOT"), help="The source's change-manager root.")
@click.option("--records-per-transaction", default=200, show_default=True, type=click.IntRange(1),
              **_env("RECORDS_PER_TRANSACTION"), help="Bootstrap records per Kafka transaction.")
@click.option("--partitions-per-record", default=200, show_default=True, type=click.IntRange(1),
              **_env("PARTITIONS_PER_RECORD"), help="Partitions of one table carried by one record.")
@click.option("--max-rounds", default=20, show_default=True, type=click.IntRange(1), **_env("MAX_ROUNDS"),
              help="Re-reads of tables that changed while being read before giving up.")
def bootstrap(
    source_id: str,
    warehouse_url: str,
    policies: tuple[str, ...],
    bootstrap_servers: str,
    kafka_settings: tuple[str, ...],
    topic: str | None,
    checksum_algorithm: str,
    cmroot: str | None,
    records_per_transaction: int,
    partitions_per_record: int,
    max_rounds: int,
) -> None:
    """Dump every object of the policy as of one event id E1 into the topic, then a marker.

    Writers keep running: the events that happen during the dump are consolidated into it (renames
    included). Stop the source agent first (this command fences it); start it again afterwards: it
    continues after E1. Targets apply the dump, then the incremental events; a target that already
    has one of the databases refuses unless it runs with --allow-existing-db.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from streamer.kafka.settings import client_config, parse_pairs
    from streamer.source.agent import AgentConfig, SourceAgent
    from streamer.source.bootstrap import RecordLimits, enrich_records, records, snapshot
    from streamer.source.enrich import EnrichSettings
    from streamer.source.policy import PolicySet
    from streamer.source.policy_record import policy_record
    from streamer.source.publish_bootstrap import publish_records
    from streamer.source.reader import SqlNotificationReader
    from streamer.source.warehouse_catalog import WarehouseCatalog
    from streamer.warehouse import Warehouse

    scope = PolicySet.parse(policies)
    enrich = EnrichSettings(checksum_algorithm=checksum_algorithm, cmroot=cmroot)
    kafka = client_config(bootstrap_servers, parse_pairs(kafka_settings))
    config = AgentConfig(source_id=source_id, kafka=kafka, topic=topic, enrich=enrich)
    reader = SqlNotificationReader(warehouse_url)
    wh = Warehouse.open(warehouse_url, source_id=source_id)
    try:
        published = SourceAgent(config, reader, scope).recover_last_id()
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, transient=False) as bars:
            dumping = bars.add_task("dump objects", total=None)
            state = snapshot(WarehouseCatalog(wh), reader, scope, source_id, enrich=enrich,
                             at_least=published, max_rounds=max_rounds,
                             on_object=lambda kind, name: bars.advance(dumping))
            bars.update(dumping, total=bars.tasks[dumping].completed)
            recs = records(state, source_id, policy=policy_record(scope), event_time=int(time.time()),
                           limits=RecordLimits(partitions=partitions_per_record))
            recs = enrich_records(recs, enrich)
            sending = bars.add_task("publish records", total=len(recs))
            publish_records(config, recs, head=reader.head_event_id(), policy=policy_record(scope),
                            per_transaction=records_per_transaction,
                            on_published=lambda n: bars.advance(sending, n))
    finally:
        wh.close()
        reader.close()
    dump = state.dump
    partitions = sum(len(t.partitions) for t in dump.tables.values())
    click.echo(f"bootstrap of {source_id} as of event {state.event_id}: {len(dump.databases)} databases, "
               f"{len(dump.tables)} tables, {partitions} partitions, "
               f"{len(recs) - 1} records to {config.topic_name}; the agent continues after {state.event_id}")
