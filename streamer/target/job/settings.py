"""The settings of one target job (``streamer target run``'s flags, validated there)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamer.kafka.record_limit import DEFAULT_TARGET_MAX_RECORD_BYTES
from streamer.metastore.transport import HmsAuth
from streamer.target.apply.sources import SourceRules


@dataclass(frozen=True)
class TargetSettings:
    """Everything one target needs; see ``streamer target run --help`` for each setting."""

    bootstrap_servers: str
    topic: str
    hms_uri: str
    warehouse_root: str
    state_dir: str
    checkpoint_dir: str
    source_id: str = "source"
    external_base_dir: str | None = None
    external_layout: str = "authority"  # or "path", as replicas made before it (streamer.target.apply.layout)
    kafka_settings: Mapping[str, str] = field(default_factory=dict)
    db_map: Mapping[str, str] = field(default_factory=dict)
    allow_existing_db: bool = False
    max_events_per_trigger: int = 5000
    # a larger record stops the stream before it is decoded (streamer.kafka.record_limit)
    max_record_bytes: int = DEFAULT_TARGET_MAX_RECORD_BYTES
    trigger_seconds: float = 0.5
    kafka_reader: str = "driver"  # "driver" or "task"; see streamer.kafka.spark_source and trigger()
    # consumer group told the consumed offset, for Kafka lag tools only (streamer.kafka.group_commit):
    # None = streamer.kafka.naming.target_group, "" = none
    consumer_group: str | None = None
    copy_workers: int = 8
    external_sync_seconds: float = 0.0  # 0 = off; see streamer.target.job.external_sync
    external_source_prefix: str = "file://"
    hms_auth: HmsAuth = field(default_factory=HmsAuth)  # Kerberos to the target HMS (metastore.transport)
    verify_every: float = 0.0  # 0 = off; see streamer.target.dr.verify.VerifyLoop
    # with --verify-every, also check against the live source (streamer.target.dr.source_check)
    verify_source_hms_uri: str | None = None  # --source-hms-uri: the source metastore's Thrift URI
    verify_source_notification_db: str | None = None  # --source-notification-db: a bundled warehouse
    verify_source_auth: HmsAuth = field(default_factory=HmsAuth)  # Kerberos to the source HMS
    verify_repair: bool = True  # --verify-repair: the check against the live source repairs what it can
    until_event: int | None = None  # apply events up to this id, then stop (streamer.target.job.bounded)
    mark_readonly: bool = False  # also set Hive's readonly=true on replicated databases
    markers_per_batch: bool = False  # a backlog's repl.last.id once per database per batch (Applier.batch)
    coalesce_backlog: bool = False  # a backlog's batch regrouped per table, fenced (apply.reorder)
    # database whose parameters publish the watermark (streamer.target.job.watermark); "" = metrics only,
    # None = streamer_watermark_<source id>
    watermark_db: str | None = None
    # scaling out (streamer.target.job.lanes, streamer.target.job.executor_copy)
    consistency: str = "global"  # global | database
    apply_lanes: int = 4  # metastore connections (worker threads) of database-mode lanes
    executor_copy_min_bytes: int = 256 << 20  # a copy this large runs on Spark executors; 0 = never
    executor_copy_min_files: int = 256  # ... or with this many files; 0 = never
    spark_master: str | None = None  # else SPARK_MASTER, else local[2] (spark-submit chooses its own)
    py_files: tuple[str, ...] = ()  # zips shipped to executors (SparkContext.addPyFile), like --py-files
    # what the target reads (streamer.target.apply.sources, docs/security.md)
    source_prefixes: tuple[str, ...] = ()  # --source-prefix: the source's stores; () = each object's own
    source_cmroots: tuple[str, ...] = ()  # --source-cmroot: where cmroot copies may be read
    allow_unverified_files: bool = False  # copy data files that carry no checksum
    # an event archive to catch up from when the position is older than the topic's first offset
    archive_dir: str | None = None  # (streamer.target.job.archive_catchup)

    def source_rules(self) -> SourceRules:
        """The read rules these settings declare."""
        return SourceRules(self.source_prefixes, self.source_cmroots, self.allow_unverified_files)
