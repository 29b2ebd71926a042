"""The target side's flags, declared once per settings group (``streamer.target.job.settings``) and
shared by ``target run``, ``load``, ``verify``, ``status``, ``failover`` and ``failback``.

Each group is an ordered table of flags with ``target run``'s declaration. A command stacks a
group's decorator, naming the flags it takes (all of them by default) and changing, per flag, only
what differs for it (a help text that says why that command needs the flag, a default, ``required``);
every other attribute (name, type, metavar) stays the one declaration. The builders turn parsed
values (click's parameter names) into each group's settings, validated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from streamer.errors import ConfigError
from streamer.kafka.naming import DEFAULT_TOPIC_HELP, topic_or_default
from streamer.kafka.record_limit import (
    DEFAULT_TARGET_MAX_RECORD_BYTES,
    MAX_TARGET_MAX_RECORD_BYTES,
    MIN_TARGET_MAX_RECORD_BYTES,
)
from streamer.metastore.auth_options import auth_from_options, hms_auth_options
from streamer.target.state.dir_option import DEFAULT_HELP, state_dir_option

if TYPE_CHECKING:
    from streamer.metastore.transport import HmsAuth
    from streamer.metrics import MetricsEndpoint
    from streamer.target.job.settings import (
        ExternalSyncSettings,
        KafkaSettings,
        LayoutSettings,
        MetastoreSettings,
        ScaleSettings,
        TrustSettings,
        VerifyLoopSettings,
    )

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Flag:
    """One flag's declaration (``make(**changes)`` gives its decorator) and the parameter names it
    adds to a command (``hms_auth`` adds four)."""

    make: Callable[..., Callable[[Any], Any]]
    params: tuple[str, ...]
    help: str = ""


def _option(*decls: str, **attrs: Any) -> Flag:
    """A ``click.option``; a command's changes replace single attributes (help, default...)."""
    name = next(d for d in decls if d.startswith("--")).split("/")[0][2:].replace("-", "_")
    help_text = attrs.get("help", "")
    return Flag(lambda **changes: click.option(*decls, **{**attrs, **changes}), (name,), help_text)


def _stacked(decorators: list[Callable[[Any], Any]]) -> Callable[[F], F]:
    """The decorators as if written one above the other in this order (the first is first in --help)."""

    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


class Group:
    """An ordered table of flags: one settings group's. ``group(*names, help_prefix=..., **changes)``
    is the decorator of the flags ``names`` (all when none) in the table's order."""

    def __init__(self, name: str, flags: Mapping[str, Flag]) -> None:
        self.name = name
        self.flags = dict(flags)

    def __call__(self, *names: str, help_prefix: str = "", **changes: Mapping[str, Any]) -> Callable[[F], F]:
        unknown = sorted({*names, *changes} - set(self.flags))
        if unknown:
            raise ValueError(f"the {self.name} group has no flag {', '.join(unknown)}")
        chosen = [n for n in self.flags if n in names] if names else list(self.flags)
        decorators = []
        for n in chosen:
            change = dict(changes.get(n, {}))
            if help_prefix:
                change["help"] = help_prefix + change.get("help", self.flags[n].help)
            decorators.append(self.flags[n].make(**change))
        return _stacked(decorators)

    def params(self, *names: str) -> tuple[str, ...]:
        """The parameter names the flags ``names`` (all when none) add to a command."""
        return tuple(p for n, flag in self.flags.items() if not names or n in names for p in flag.params)


# --- kafka: where the events come from, and up to which one --------------------------------------------

kafka_options = Group("kafka", {
    "bootstrap_servers": _option("--bootstrap-servers", required=True,
                                 help="Kafka bootstrap servers (host:port,...)."),
    "kafka_setting": _option("--kafka-setting", "-X", multiple=True, metavar="KEY=VALUE",
                             help="librdkafka setting; repeatable."),
    "source_id": _option("--source-id", default="source", show_default=True,
                         help="Source id the agent publishes as."),
    "topic": _option("--topic", default=None, help=f"Topic to read. [default: {DEFAULT_TOPIC_HELP}]"),
    "consumer_group": _option(
        "--consumer-group", default=None,
        help="Kafka consumer group the job commits each applied micro-batch's offset to, so that Kafka lag "
        "tools see this target, stopped or running (never read back: the checkpoint positions the job); "
        "'' for none [default: streamer-target-<source-id>-<metastore host>-<hash of --hms-uri and "
        "--state-dir>].",
    ),
    "archive": _option(
        "--archive", default=None, metavar="DIR",
        help="An event archive of the topic (`streamer archive run --dir`): when the target's position is "
        "older than the topic's first offset, the archive's records from there are applied first (each "
        "file verified), then the topic is read; the event chain is checked across the switch "
        "(docs/dr.md).",
    ),
    "until_event": _option(
        "--until-event", default=None, type=click.IntRange(min=0),
        help="Apply source events up to this id, then stop (a later run continues with the next one).",
    ),
})

# --- metastore: the target metastore and how to log in ---------------------------------------------------

metastore_options = Group("metastore", {
    "hms_uri": _option("--hms-uri", required=True, help="Target metastore Thrift URI (thrift://host:port)."),
    "hms_auth": Flag(lambda: hms_auth_options(),
                     ("hms_auth", "hms_kerberos_principal", "hms_client_principal", "hms_client_keytab")),
})

# --- layout: where the replica and the job's state go ----------------------------------------------------

layout_options = Group("layout", {
    "warehouse_root": _option("--warehouse-root", required=True,
                              help="Target warehouse root (managed data goes here)."),
    "external_base_dir": _option("--external-base-dir", default=None,
                                 help="Base dir for external tables' data on the target."),
    "external_layout": _option(
        "--external-layout", type=click.Choice(["authority", "path"]), default="authority", show_default=True,
        help="Where external tables go below --external-base-dir: authority = <base>/<scheme>/<authority>/"
        "<source path>, so sources and namenodes never collide; path = <base>/<source path>, the layout of "
        "replicas made before (the base dir records its layout; a mismatch is refused at start).",
    ),
    "state_dir": Flag(lambda help_text=DEFAULT_HELP + " Created when missing.", create=True:
                      state_dir_option(help_text, create=create), ("state_dir",)),
    "checkpoint_dir": _option(
        "--checkpoint-dir", default=None,
        help="Spark checkpoint dir, any Hadoop URL (hdfs://, s3a://, file://) "
        "[default: <state-dir>/checkpoint].",
    ),
    "db_map": _option("--db-map", multiple=True, metavar="SRC:DST",
                      help="Rename a source database; repeatable."),
    "mark_readonly": _option(
        "--mark-readonly", is_flag=True,
        help="Also set readonly=true on replicated databases (Hive's EnforceReadOnlyDatabaseHook refuses "
        "writes to them); `streamer failover` removes it.",
    ),
    "watermark_db": _option(
        "--watermark-db", default=None,
        help="Target database whose parameters publish the replication watermark, read by "
        "streamer.read.snapshot and plain SQL readers ('' = metrics only). "
        "[default: streamer_watermark_<source-id>]",
    ),
})

# --- trust: what the target accepts from the source ------------------------------------------------------

trust_options = Group("trust", {
    "source_prefix": _option(
        "--source-prefix", multiple=True, metavar="URL",
        help="A store of the source (its warehouse, external dirs, function jars: "
        "hdfs://nn:8020/warehouse, s3a://bucket/wh); repeatable, or space-separated in the env "
        "var. Given any, every file is read only from below one of them. [default: each file "
        "only from below its own table's or partition's location, as the event names it; "
        "function resources only from below their database's recorded source location, its "
        "<root>/<db>.db warehouse root or a --source-cmroot]",
    ),
    "source_cmroot": _option(
        "--source-cmroot", multiple=True, metavar="URL",
        help="The source's change-manager root(s) (hive.repl.cmrootdir); repeatable. Given "
        "any, cmroot copies are read only from below them. [default: a copy named "
        "<cmroot>/<file name>_<checksum> on the file's own filesystem]",
    ),
    "allow_unverified_files": _option(
        "--allow-unverified-files", is_flag=True,
        help="Copy data files whose event carries no checksum (else their database "
        "halts). Function resources never carry one and are always copied unverified.",
    ),
    "allow_existing_db": _option("--allow-existing-db", is_flag=True,
                                 help="Apply into databases not created by streamer."),
    "max_record_bytes": _option(
        "--max-record-bytes", default=DEFAULT_TARGET_MAX_RECORD_BYTES, show_default=True,
        type=click.IntRange(MIN_TARGET_MAX_RECORD_BYTES, MAX_TARGET_MAX_RECORD_BYTES),
        help="Largest record (key and value, decompressed) the job reads; keep it at least the agent's "
        "--max-record-bytes. A larger one stops the stream at its offset before it is decoded. Sets the "
        "consumers' receive.message.max.bytes, where librdkafka stops decompressing a zstd batch.",
    ),
})

# --- scale: how much is read and applied at once, and where ----------------------------------------------

scale_options = Group("scale", {
    "max_events_per_trigger": _option("--max-events-per-trigger", default=5000, show_default=True,
                                      type=click.IntRange(min=1)),
    "trigger_seconds": _option(
        "--trigger-seconds", default=0.5, show_default=True, type=click.FloatRange(min=0),
        help="With --kafka-reader driver: the longest a micro-batch with nothing to read waits for records "
        "(a record ends the wait at once; triggers run back to back). With task: Spark's trigger interval.",
    ),
    "kafka_reader": _option(
        "--kafka-reader", type=click.Choice(["driver", "task"]), default="driver", show_default=True,
        help="driver: one long-lived consumer reads on the driver while Spark plans (no read task per "
        "micro-batch; lowest lag). task: a Spark task reads each micro-batch with new consumers.",
    ),
    "batch_read": _option(
        "--batch-read", type=click.Choice(["driver", "spark"]), default="driver", show_default=True,
        help="How a micro-batch's records reach the apply. driver: the job's driver reads the offset range "
        "Spark logged for the batch from Kafka itself (no Spark job per micro-batch; a checkpoint's first "
        "batch, or one whose checkpoint is not on a local filesystem, is collected through Spark). spark: "
        "every micro-batch's rows are collected through Spark.",
    ),
    "batch_follow": _option(
        "--batch-follow", default=2.0, show_default=True, type=click.FloatRange(min=0),
        help="With --batch-read driver: after its own records, a micro-batch goes on applying the records "
        "that arrive, for up to this many seconds, before Spark checkpoints it. A live record then waits "
        "for neither Spark's next micro-batch nor its fixed costs. A restart re-reads at most this span, "
        "skipping what was applied. 0: off.",
    ),
    "copy_workers": _option("--copy-workers", default=8, show_default=True, type=click.IntRange(min=1)),
    "consistency": _option(
        "--consistency", type=click.Choice(["global", "database"]), default="global", show_default=True,
        help="global: one lane, prefix consistency across all databases (read replicas). database: a lane "
        "per database, applied concurrently; prefix consistency per database only (DR catch-up).",
    ),
    "apply_lanes": _option(
        "--apply-lanes", default=4, show_default=True, type=click.IntRange(min=1),
        help="Lanes applied at once, each with its own metastore connection: databases with --consistency "
        "database, and in either mode the tables of a batch --coalesce-backlog regrouped (1: one step after "
        "another).",
    ),
    "executor_copy_min_bytes": _option(
        "--executor-copy-min-bytes", default=256 << 20, show_default=True, type=click.IntRange(min=0),
        help="A copy (one event's files of one object) of at least this many bytes runs as Spark tasks on "
        "the executors; 0 = never by size.",
    ),
    "executor_copy_min_files": _option(
        "--executor-copy-min-files", default=256, show_default=True, type=click.IntRange(min=0),
        help="... or of at least this many files; 0 = never by count.",
    ),
    "py_files": _option(
        "--py-files", multiple=True, metavar="ZIP",
        help="A zip of Python packages for the executors (as spark-submit --py-files), e.g. streamer itself "
        "when executors lack it; repeatable. See docs/deploy.md.",
    ),
    "spark_master": _option(
        "--spark-master", default=None,
        help="Spark master when not started by spark-submit (local[2], local-cluster[2,1,768], "
        "spark://host:7077). [default: $SPARK_MASTER or local[2]]",
    ),
    "markers_per_batch": _option(
        "--markers-per-batch", is_flag=True,
        help="Write a database's repl.last.id once per micro-batch of 8 or more events (a backlog), not "
        "after every step: fewer metastore calls while catching up, each step journaled in the state dir. "
        "Plain SQL readers (streamer.read.bracket) then cannot see steps inside a batch; "
        "streamer.read.snapshot readers stay exact (docs/design/consistency.md). [default: off]",
    ),
    "coalesce_backlog": _option(
        "--coalesce-backlog", is_flag=True,
        help="Implies --markers-per-batch. A micro-batch of 8 or more events is applied regrouped per "
        "table: each table's ADD_PARTITIONs in one call, its ALTERs and statistics as the last one, "
        "create..drop as the drop, across other tables' events between them; far fewer metastore calls "
        "while catching up. Meanwhile its databases carry streamer.apply.fence and readers "
        "(streamer.read, streamer.read.sql) read again until the batch's end (docs/design/apply.md, "
        "'Coalescing a backlog'). [default: off]",
    ),
})

# --- external sync: directories synced from the source beside the stream ---------------------------------

external_sync_options = Group("external_sync", {
    "external_sync_seconds": _option(
        "--external-sync-seconds", default=0.0, show_default=True, type=click.FloatRange(min=0),
        help="Sync the directories of external tables and of tables replicated by state (Spark datasource "
        "tables, Hive Parquet/ORC tables Spark writes with conversion on) from the source every N seconds "
        "(0 = off).",
    ),
    "external_source_prefix": _option(
        "--external-source-prefix", default="file://", show_default=True,
        help="Scheme and authority of the source filesystem, for the external sync (hdfs://nn:8020, s3://b).",
    ),
})

# --- verify: verification beside the stream, and `streamer verify`'s check against the live source --------

_SOURCE_HMS_HELP = ("The source metastore's Thrift URI (read-only; its Kerberos settings are the --hms-auth "
                    "ones).")
_SOURCE_DB_HELP = "Or the bundled warehouse's database URL, when the source is streamer's bundled warehouse."

verify_options = Group("verify", {
    "verify_every": _option(
        "--verify-every", default=0.0, show_default=True, type=click.FloatRange(min=0), metavar="SECONDS",
        help="Verify the replica against the source (as `streamer verify`) in this process, SECONDS after "
        "the previous verification ended; each database is read between micro-batches (0 = off).",
    ),
    "verify_source_hms_uri": _option("--verify-source-hms-uri", default=None,
                                     help="With --verify-every, also check against the live source: "
                                     + _SOURCE_HMS_HELP),
    "verify_source_notification_db": _option("--verify-source-notification-db", default=None,
                                             help="With --verify-every: " + _SOURCE_DB_HELP[3:]),
    "verify_repair": _option(
        "--verify-repair/--no-verify-repair", default=True, show_default=True,
        help="With --verify-source-*: repair what the check against the live source finds "
        "(files re-copied verified, missing tables and partitions created, stray files "
        "removed; only objects no event named since they were checked, within the "
        "target roots and --source-prefix). What cannot be repaired is logged as an "
        "ERROR and stays in streamer_verify_source_drift_objects.",
    ),
    # `streamer verify --against-source`: the same check, once
    "against_source": _option(
        "--against-source", is_flag=True,
        help="Compare with the source's metastore and storage now (file lists, sizes, sha256), for objects "
        "the source has not changed since the replica's position: finds what the events themselves "
        "carry. With --repair, diverged files are re-synced from the source and tables and "
        "partitions the replica lacks are created from it (objects only the replica has are "
        "reported, never removed).",
    ),
    "source_hms_uri": _option("--source-hms-uri", default=None, help=_SOURCE_HMS_HELP),
    "source_notification_db": _option("--source-notification-db", default=None, help=_SOURCE_DB_HELP),
})
IN_PROCESS_VERIFY = (
    "verify_every", "verify_source_hms_uri", "verify_source_notification_db", "verify_repair",
)
AGAINST_SOURCE = ("against_source", "source_hms_uri", "source_notification_db")


def verify_source_options(f: Any) -> Any:
    """``--verify-source-hms-uri`` / ``--verify-source-notification-db`` / ``--verify-repair``
    (``streamer target run``)."""
    return verify_options(*IN_PROCESS_VERIFY[1:])(f)


def against_source_options(f: Any) -> Any:
    """``--against-source`` and where the source is read (``streamer verify``)."""
    return verify_options(*AGAINST_SOURCE)(f)


# --- metrics: /metrics ----------------------------------------------------------------------------------

metrics_options = Group("metrics", {
    "metrics_port": _option("--metrics-port", default=9402, show_default=True, type=int,
                            help="0 disables /metrics."),
    "metrics_addr": _option("--metrics-addr", default="127.0.0.1", show_default=True,
                            help="Bind address of /metrics."),
    "metrics_tls_cert": _option("--metrics-tls-cert", default=None,
                                help="Serve /metrics over TLS with this certificate (PEM)."),
    "metrics_tls_key": _option("--metrics-tls-key", default=None,
                               help="Private key (PEM) of --metrics-tls-cert."),
    "metrics_basic_auth_user": _option("--metrics-basic-auth-user", default=None,
                                       help="Require HTTP basic auth on /metrics."),
    "metrics_basic_auth_password": _option("--metrics-basic-auth-password", default=None,
                                           help="Password for --metrics-basic-auth-user."),
})

GROUPS = (kafka_options, metastore_options, layout_options, trust_options, scale_options,
          external_sync_options, verify_options, metrics_options)


# --- builders: parsed values (click's parameter names) -> each group's settings ---------------------------

def _pairs(values: tuple[str, ...], what: str, sep: str) -> dict[str, str]:
    """``KEY<sep>VALUE`` items as a mapping (``--db-map SRC:DST``); a malformed one is a ConfigError."""
    out: dict[str, str] = {}
    for item in values:
        key, found, value = item.partition(sep)
        if not found or not key or not value:
            raise ConfigError(f"{what}: expected KEY{sep}VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_db_map(values: tuple[str, ...]) -> dict[str, str]:
    """``--db-map``'s values: source database -> target database."""
    return _pairs(values, "--db-map", ":")


def kafka_config(bootstrap_servers: str, values: tuple[str, ...]) -> dict[str, Any]:
    """librdkafka settings from ``KEY=VALUE`` pairs, validated (unknown keys are named and refused)."""
    from streamer.kafka.settings import config_from_options

    config = config_from_options(bootstrap_servers, values)
    config.pop("bootstrap.servers", None)
    return config


def hms_auth(o: Mapping[str, Any]) -> HmsAuth:
    """The ``--hms-auth`` flags' setting, validated."""
    return auth_from_options(o["hms_auth"], o["hms_kerberos_principal"], o["hms_client_principal"],
                             o["hms_client_keytab"])


def kafka_settings(o: Mapping[str, Any]) -> KafkaSettings:
    from streamer.target.job.settings import KafkaSettings

    return KafkaSettings(
        bootstrap_servers=o["bootstrap_servers"],
        topic=topic_or_default(o["topic"], o["source_id"]),
        config=kafka_config(o["bootstrap_servers"], o["kafka_setting"]),
        consumer_group=o["consumer_group"],
        archive_dir=o.get("archive"),
        until_event=o["until_event"],
    )


def metastore_settings(o: Mapping[str, Any]) -> MetastoreSettings:
    from streamer.target.job.settings import MetastoreSettings

    return MetastoreSettings(uri=o["hms_uri"], auth=hms_auth(o))


def layout_settings(o: Mapping[str, Any]) -> LayoutSettings:
    from streamer.target.job.settings import LayoutSettings

    state_dir = Path(o["state_dir"])
    return LayoutSettings(
        warehouse_root=o["warehouse_root"],
        state_dir=str(state_dir),
        checkpoint_dir=o["checkpoint_dir"] or str(state_dir / "checkpoint"),
        external_base_dir=o["external_base_dir"],
        external_layout=o["external_layout"],
        db_map=parse_db_map(o["db_map"]),
        watermark_db=o["watermark_db"],
        mark_readonly=o["mark_readonly"],
    )


def trust_settings(o: Mapping[str, Any]) -> TrustSettings:
    from streamer.target.job.settings import TrustSettings

    return TrustSettings(
        source_prefixes=tuple(o["source_prefix"]),
        source_cmroots=tuple(o["source_cmroot"]),
        allow_unverified_files=o["allow_unverified_files"],
        allow_existing_db=o["allow_existing_db"],
        max_record_bytes=o["max_record_bytes"],
    )


def scale_settings(o: Mapping[str, Any]) -> ScaleSettings:
    from streamer.target.job.settings import ScaleSettings

    return ScaleSettings(
        max_events_per_trigger=o["max_events_per_trigger"],
        trigger_seconds=o["trigger_seconds"],
        kafka_reader=o["kafka_reader"],
        batch_read=o["batch_read"],
        batch_follow_seconds=o["batch_follow"],
        consistency=o["consistency"],
        apply_lanes=o["apply_lanes"],
        copy_workers=o["copy_workers"],
        executor_copy_min_bytes=o["executor_copy_min_bytes"],
        executor_copy_min_files=o["executor_copy_min_files"],
        markers_per_batch=o["markers_per_batch"] or o["coalesce_backlog"],  # coalescing implies it
        coalesce_backlog=o["coalesce_backlog"],
        spark_master=o["spark_master"],
        py_files=tuple(o["py_files"]),
    )


def external_sync_settings(o: Mapping[str, Any]) -> ExternalSyncSettings:
    from streamer.target.job.settings import ExternalSyncSettings

    return ExternalSyncSettings(seconds=o["external_sync_seconds"], source_prefix=o["external_source_prefix"])


def verify_loop_settings(o: Mapping[str, Any], source_auth: HmsAuth) -> VerifyLoopSettings:
    """The in-process verification; the live source is logged in to as the target (``source_auth``)."""
    from streamer.target.job.settings import VerifyLoopSettings

    if (o["verify_source_hms_uri"] or o["verify_source_notification_db"]) and not o["verify_every"]:
        raise click.UsageError("--verify-source-hms-uri/--verify-source-notification-db need --verify-every")
    return VerifyLoopSettings(
        every=o["verify_every"],
        source_hms_uri=o["verify_source_hms_uri"],
        source_notification_db=o["verify_source_notification_db"],
        source_auth=source_auth,
        repair=o["verify_repair"],
    )


def metrics_settings(o: Mapping[str, Any]) -> MetricsEndpoint:
    from streamer.metrics import MetricsEndpoint

    return MetricsEndpoint(o["metrics_port"], o["metrics_addr"], o["metrics_tls_cert"], o["metrics_tls_key"],
                           o["metrics_basic_auth_user"], o["metrics_basic_auth_password"])
