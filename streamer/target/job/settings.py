"""The settings of one target job (``streamer target run``'s flags, validated there), grouped by what
they are about: where the events come from (``kafka``), the target metastore (``metastore``), where the
replica and the job's own state go (``layout``), what the target accepts from the source (``trust``),
how fast and how wide it applies (``scale``), the checks and syncs it runs beside the stream
(``verify``, ``external_sync``) and ``/metrics`` (``metrics``). The flags of each group are declared
once, in ``streamer.target.options``, and shared by every command that takes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamer.kafka.record_limit import DEFAULT_TARGET_MAX_RECORD_BYTES
from streamer.metastore.transport import HmsAuth
from streamer.metrics import MetricsEndpoint
from streamer.target.apply.sources import SourceRules


@dataclass(frozen=True)
class KafkaSettings:
    """Where the events come from (the topic, its brokers, and an archive of it for a position the
    topic no longer holds) and up to which one."""

    bootstrap_servers: str
    topic: str
    config: Mapping[str, str] = field(default_factory=dict)  # librdkafka settings (-X), validated
    # consumer group told the consumed offset, for Kafka lag tools only (streamer.kafka.group_commit):
    # None = streamer.kafka.naming.target_group, "" = none
    consumer_group: str | None = None
    # an event archive to catch up from when the position is older than the topic's first offset
    archive_dir: str | None = None  # (streamer.target.job.archive_catchup)
    until_event: int | None = None  # apply events up to this id, then stop (streamer.target.job.bounded)


@dataclass(frozen=True)
class MetastoreSettings:
    """The target metastore and how to log in to it."""

    uri: str  # thrift://host:port
    auth: HmsAuth = field(default_factory=HmsAuth)  # Kerberos to the target HMS (metastore.transport)


@dataclass(frozen=True)
class LayoutSettings:
    """Where the replica goes (databases, managed and external data, the watermark) and where the job
    keeps its own state."""

    warehouse_root: str
    state_dir: str
    checkpoint_dir: str
    external_base_dir: str | None = None
    external_layout: str = "authority"  # or "path", as replicas made before it (streamer.target.apply.layout)
    db_map: Mapping[str, str] = field(default_factory=dict)  # source database -> target database
    # database whose parameters publish the watermark (streamer.target.job.watermark); "" = metrics only,
    # None = streamer_watermark_<source id>
    watermark_db: str | None = None
    mark_readonly: bool = False  # also set Hive's readonly=true on replicated databases


@dataclass(frozen=True)
class TrustSettings:
    """What the target accepts from the source: which stores it reads (streamer.target.apply.sources,
    docs/security.md), files without a checksum, databases it did not create, records' size."""

    source_prefixes: tuple[str, ...] = ()  # --source-prefix: the source's stores; () = each object's own
    source_cmroots: tuple[str, ...] = ()  # --source-cmroot: where cmroot copies may be read
    allow_unverified_files: bool = False  # copy data files that carry no checksum
    allow_existing_db: bool = False  # apply into databases streamer did not create
    # a larger record stops the stream before it is decoded (streamer.kafka.record_limit)
    max_record_bytes: int = DEFAULT_TARGET_MAX_RECORD_BYTES

    def source_rules(self) -> SourceRules:
        """The read rules these settings declare."""
        return SourceRules(self.source_prefixes, self.source_cmroots, self.allow_unverified_files)


@dataclass(frozen=True)
class ScaleSettings:
    """How much the job reads and applies at once, and where: micro-batches, lanes, copies, Spark."""

    max_events_per_trigger: int = 5000
    trigger_seconds: float = 0.5
    kafka_reader: str = "driver"  # "driver" or "task"; see streamer.kafka.spark_source and trigger()
    batch_read: str = "driver"  # "driver" or "spark": how foreachBatch gets records (batch_source)
    batch_follow_seconds: float = 2.0  # a micro-batch applies later records for this long (batch_source)
    # scaling out (streamer.target.job.lanes, streamer.target.job.executor_copy)
    consistency: str = "global"  # global | database
    apply_lanes: int = 4  # connections (worker threads) of lanes: databases, a regrouped batch's tables
    copy_workers: int = 8
    executor_copy_min_bytes: int = 256 << 20  # a copy this large runs on Spark executors; 0 = never
    executor_copy_min_files: int = 256  # ... or with this many files; 0 = never
    markers_per_batch: bool = False  # a backlog's repl.last.id once per database per batch (Applier.batch)
    coalesce_backlog: bool = False  # a backlog's batch regrouped per table, fenced (apply.reorder)
    spark_master: str | None = None  # else SPARK_MASTER, else local[2] (spark-submit chooses its own)
    py_files: tuple[str, ...] = ()  # zips shipped to executors (SparkContext.addPyFile), like --py-files


@dataclass(frozen=True)
class VerifyLoopSettings:
    """Verification in the job's own process (streamer.target.dr.verify.VerifyLoop), and the check
    against the live source it may add (streamer.target.dr.source_check)."""

    every: float = 0.0  # --verify-every seconds; 0 = off
    source_hms_uri: str | None = None  # --verify-source-hms-uri: the source metastore's Thrift URI
    source_notification_db: str | None = None  # --verify-source-notification-db: a bundled warehouse
    source_auth: HmsAuth = field(default_factory=HmsAuth)  # Kerberos to the source HMS
    repair: bool = True  # --verify-repair: the check against the live source repairs what it can


@dataclass(frozen=True)
class ExternalSyncSettings:
    """The periodic directory sync of external tables and tables replicated by state
    (streamer.target.job.external_sync)."""

    seconds: float = 0.0  # 0 = off
    source_prefix: str = "file://"  # scheme and authority of the source filesystem


@dataclass(frozen=True)
class TargetSettings:
    """Everything one target needs; see ``streamer target run --help`` for each setting."""

    kafka: KafkaSettings
    metastore: MetastoreSettings
    layout: LayoutSettings
    source_id: str = "source"  # the source's identity: its topic's default name, the databases it owns
    trust: TrustSettings = field(default_factory=TrustSettings)
    scale: ScaleSettings = field(default_factory=ScaleSettings)
    verify: VerifyLoopSettings = field(default_factory=VerifyLoopSettings)
    external_sync: ExternalSyncSettings = field(default_factory=ExternalSyncSettings)
    metrics: MetricsEndpoint = field(default_factory=MetricsEndpoint)  # port 0: not served
