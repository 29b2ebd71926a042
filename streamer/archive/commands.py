"""``streamer archive run|status|verify`` and ``streamer load``: the event archive's commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from streamer.fs_options import fs_options, fs_settings
from streamer.kafka.naming import DEFAULT_TOPIC_HELP, topic_or_default
from streamer.kafka.record_limit import DEFAULT_TARGET_MAX_RECORD_BYTES
from streamer.target.commands import run_cmd, run_settings
from streamer.target.state.dir_option import state_dir_option

ARCHIVE_DIR_HELP = "The archive: a local directory, hdfs://... or s3a://... (created when missing)."


@click.group()
def archive() -> None:
    """Keep the topic past Kafka's retention as Avro files (REPL DUMP, streamed); inspect an archive."""


@archive.command("run")
@click.option("--bootstrap-servers", required=True, help="Kafka bootstrap servers (host:port,...).")
@click.option(
    "--kafka-setting", "-X", multiple=True, metavar="KEY=VALUE", help="librdkafka setting; repeatable."
)
@click.option("--source-id", default="source", show_default=True, help="Source id the agent publishes as.")
@click.option("--topic", default=None, help=f"Topic to archive. [default: {DEFAULT_TOPIC_HELP}]")
@click.option("--dir", "archive_dir", required=True, help=ARCHIVE_DIR_HELP)
@fs_options()
@click.option("--max-records-per-file", default=10_000, show_default=True, type=click.IntRange(min=1),
              help="A file is cut once it holds this many records.")
@click.option("--roll-seconds", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="At the topic's end, a file holds what there is once this long passed since the last "
                   "file (the archive's own lag behind the topic, at most).")
@click.option("--poll-seconds", default=1.0, show_default=True, type=click.FloatRange(min=0.01),
              help="How long to wait before asking the topic again when nothing was archived.")
@click.option("--max-record-bytes", default=DEFAULT_TARGET_MAX_RECORD_BYTES, show_default=True,
              type=click.IntRange(min=1024), help="Largest record read (keep it the target's).")
@click.option("--once", is_flag=True, help="Archive up to the topic's end as it is now, then exit.")
@click.option("--metrics-port", default=9404, show_default=True, type=int, help="0 disables /metrics.")
@click.option("--metrics-addr", default="127.0.0.1", show_default=True, help="Bind address of /metrics.")
def run_cmd_archive(**o: Any) -> None:
    """Consume the topic into Avro Object Container Files and a manifest, exactly once across restarts."""
    from streamer.archive.archiver import Archiver, ArchiveSettings
    from streamer.archive.metrics import serve
    from streamer.kafka.settings import config_from_options

    kafka = config_from_options(o["bootstrap_servers"], o["kafka_setting"])
    kafka.pop("bootstrap.servers", None)
    settings = ArchiveSettings(
        bootstrap_servers=o["bootstrap_servers"], topic=topic_or_default(o["topic"], o["source_id"]),
        source_id=o["source_id"], archive_dir=o["archive_dir"], kafka_settings=kafka,
        max_records_per_file=o["max_records_per_file"], roll_seconds=o["roll_seconds"],
        poll_seconds=o["poll_seconds"], max_record_bytes=o["max_record_bytes"],
    )
    serve(o["metrics_port"], o["metrics_addr"])
    manifest = Archiver(settings).run(once=o["once"])
    click.echo(f"archive {o['archive_dir']}: {len(manifest.files)} files, {manifest.records} records, "
               f"through event {manifest.last_event_id}")


@archive.command("verify")
@click.option("--dir", "archive_dir", required=True, help=ARCHIVE_DIR_HELP)
@fs_options()
def verify_cmd(archive_dir: str) -> None:
    """Check every file against the manifest (size, sha256, records, chain); exit 1 at the first bad one."""
    from streamer.archive.reading import pending, read_archive, verified_records
    from streamer.events.codec import EventDeserializer

    store, manifest = read_archive(archive_dir)
    decode = EventDeserializer(check_envelope=False)
    for before, entry, _ in pending(manifest, None):
        verified_records(store, manifest, before, entry, decode)
    click.echo(f"archive {archive_dir}: {len(manifest.files)} files, {manifest.records} records verified")


@archive.command("status")
@click.option("--dir", "archive_dir", required=True, help=ARCHIVE_DIR_HELP)
@fs_options()
@state_dir_option("The state dir of the target (`streamer load` or `target run`) whose place in the archive "
                  "to show.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of lines.")
def status_cmd(archive_dir: str, state_dir: Path, as_json: bool) -> None:
    """What an archive holds and how far a target (its state dir) has applied it."""
    from streamer.archive.reading import pending, read_archive
    from streamer.target.state.chain import read_anchor

    _, manifest = read_archive(archive_dir)
    anchor = read_anchor(state_dir)
    files = list(pending(manifest, anchor))
    done = sum(1 for _, _, d in files if d)
    body: dict[str, Any] = {
        "archive": archive_dir, "topic": manifest.topic, "source_id": manifest.source_id,
        "files": len(manifest.files), "records": manifest.records,
        "first_event_id": manifest.files[0].first_event_id if manifest.files else None,
        "last_event_id": manifest.last_event_id,
        "first_offset": manifest.files[0].first_offset if manifest.files else None,
        "last_offset": manifest.files[-1].last_offset if manifest.files else None,
    }
    body["target"] = {
        "state_dir": str(state_dir),
        "offset": anchor.offset if anchor is not None else None,
        "event_id": anchor.event_id if anchor is not None else None,
        "files_applied": done, "files_left": len(files) - done,
    }
    if as_json:
        click.echo(json.dumps(body, sort_keys=True))
        return
    for key, value in body.items():
        if key != "target":
            click.echo(f"{key}: {value}")
    for key, value in body.get("target", {}).items():
        click.echo(f"target {key}: {value}")


# --- streamer load -------------------------------------------------------------------------------

# target run's settings a load has no use for (no broker, no Spark), with the values it runs with
_NOT_FOR_LOAD: dict[str, Any] = {
    "bootstrap_servers": "no-broker:9", "kafka_setting": (), "topic": None, "source_id": "source",
    "checkpoint_dir": None, "max_record_bytes": DEFAULT_TARGET_MAX_RECORD_BYTES, "trigger_seconds": 0.5,
    "kafka_reader": "driver", "batch_read": "driver", "batch_follow": 0.0, "consumer_group": "",
    "executor_copy_min_bytes": 0, "executor_copy_min_files": 0,
    "py_files": (), "spark_master": None, "external_sync_seconds": 0.0, "external_source_prefix": "file://",
    "verify_every": 0.0, "verify_source_hms_uri": None, "verify_source_notification_db": None,
    "metrics_port": 0, "metrics_addr": "127.0.0.1", "metrics_tls_cert": None, "metrics_tls_key": None,
    "metrics_basic_auth_user": None, "metrics_basic_auth_password": None, "archive": None,
}


def load_settings(options: dict[str, Any], topic: str, source_id: str) -> Any:
    """``target run``'s settings for a load of the archive of ``topic`` by ``source_id``."""
    import dataclasses

    merged = {**_NOT_FOR_LOAD, **options, "topic": topic, "source_id": source_id}
    settings = run_settings(merged)
    return dataclasses.replace(settings, kafka=dataclasses.replace(settings.kafka, bootstrap_servers=""))


def _load(**o: Any) -> None:
    from streamer.archive.load import load
    from streamer.archive.reading import read_archive
    from streamer.filesystems import configure
    from streamer.metastore.thrift import HmsCatalog

    archive_dir = o.pop("from_dir")
    configure(fs_settings(o.pop("fs_option"), o.pop("hdfs_driver")))
    _, manifest = read_archive(archive_dir)
    settings = load_settings(o, manifest.topic, manifest.source_id)
    catalog = HmsCatalog(settings.metastore.uri, auth=settings.metastore.auth)
    try:
        report = load(settings, archive_dir, catalog)
    finally:
        catalog.close()
    where = f"offset {report.anchor.offset}, event {report.anchor.event_id}" if report.anchor else "nothing"
    click.echo(f"loaded {report.files} files ({report.records} records) from {archive_dir}; "
               f"{report.skipped_files} applied before; the target is at {where}"
               + (f"; {report.stopped}" if report.stopped else ""))
    if report.halted:
        halted = ", ".join(f"{db} at event {event}" for db, event in sorted(report.halted.items()))
        raise click.ClickException(f"halted: {halted} (see `streamer status`, `streamer target retry`)")


load_cmd = click.Command(
    "load",
    callback=_load,
    params=[
        click.Option(["--from", "from_dir"], required=True,
                     help="The archive to apply (a directory written by `streamer archive run`)."),
        *[p for p in run_cmd.params if p.name not in _NOT_FOR_LOAD],
    ],
    help="Apply an archive to a target with no broker (REPL LOAD): target run's apply, state dir and flags; "
    "resumable, every file verified whole (sha256, records, chain) before any of it is applied.",
)
