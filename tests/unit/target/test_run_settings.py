"""``target run``'s flags reach the job's settings with the values they always had (issue 37: the
settings were regrouped; every flag's name, default and effect stay the same)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamer.metastore.transport import HmsAuth

# every setting by the name it had as a flat TargetSettings field -> where it lives now (the values the
# tests below expect were written against the flat settings, before they were grouped)
PATHS = {
    "source_id": "source_id",
    **{k: f"kafka.{k}" for k in ("bootstrap_servers", "topic", "consumer_group", "archive_dir",
                                 "until_event")},
    "kafka_settings": "kafka.config", "hms_uri": "metastore.uri", "hms_auth": "metastore.auth",
    **{k: f"layout.{k}" for k in ("warehouse_root", "state_dir", "checkpoint_dir", "external_base_dir",
                                  "external_layout", "db_map", "watermark_db", "mark_readonly")},
    **{k: f"trust.{k}" for k in ("source_prefixes", "source_cmroots", "allow_unverified_files",
                                 "allow_existing_db", "max_record_bytes")},
    **{k: f"scale.{k}" for k in ("max_events_per_trigger", "trigger_seconds", "kafka_reader", "consistency",
                                 "apply_lanes", "copy_workers", "executor_copy_min_bytes",
                                 "executor_copy_min_files", "markers_per_batch", "coalesce_backlog",
                                 "spark_master", "py_files")},
    "verify_every": "verify.every", "verify_source_hms_uri": "verify.source_hms_uri",
    "verify_source_notification_db": "verify.source_notification_db",
    "verify_source_auth": "verify.source_auth",
    "verify_repair": "verify.repair", "external_sync_seconds": "external_sync.seconds",
    "external_source_prefix": "external_sync.source_prefix",
}


def flat(settings: Any) -> dict[str, Any]:
    """The settings by their flat names."""
    out = {}
    for name, path in PATHS.items():
        value = settings
        for part in path.split("."):
            value = getattr(value, part)
        out[name] = value
    return out


def _settings(argv: list[str]) -> Any:
    from streamer.target.commands import run_cmd, run_settings

    with run_cmd.make_context("run", list(argv)) as ctx:
        return run_settings(ctx.params)


def test_every_flag_given_reaches_its_setting(tmp_path: Path) -> None:
    state = tmp_path / "state"
    kerberos = ["--hms-auth", "kerberos", "--hms-kerberos-principal", "hive/_HOST@EX.COM",
                "--hms-client-principal", "me@EX.COM", "--hms-client-keytab", str(tmp_path / "me.keytab")]
    argv = [
        "--bootstrap-servers", "k1:9092,k2:9092", "-X", "client.id=c1", "--source-id", "east",
        "--topic", "t.events", "--hms-uri", "thrift://hms:9083", *kerberos,
        "--warehouse-root", "file:///wh", "--external-base-dir", "file:///ext", "--external-layout", "path",
        "--source-prefix", "hdfs://nn:8020/wh", "--source-prefix", "s3a://b/x", "--source-cmroot", "hdfs://nn/cm",
        "--allow-unverified-files", "--state-dir", str(state), "--checkpoint-dir", "hdfs://nn/ck",
        "--db-map", "a:b", "--db-map", "c : d", "--allow-existing-db", "--max-events-per-trigger", "77",
        "--max-record-bytes", str(4 << 20), "--trigger-seconds", "1.5", "--kafka-reader", "task",
        "--consumer-group", "grp", "--copy-workers", "3", "--consistency", "database", "--apply-lanes", "6",
        "--executor-copy-min-bytes", "1000", "--executor-copy-min-files", "9", "--py-files", "a.zip",
        "--py-files", "b.zip", "--spark-master", "local[1]", "--external-sync-seconds", "30",
        "--external-source-prefix", "hdfs://nn:8020", "--verify-every", "120",
        "--verify-source-hms-uri", "thrift://src:9083", "--no-verify-repair", "--until-event", "500",
        "--coalesce-backlog", "--mark-readonly", "--watermark-db", "wm", "--archive", "/arch",
        "--metrics-port", "0",
    ]
    auth = HmsAuth(mechanism="kerberos", principal="hive/_HOST@EX.COM", client_principal="me@EX.COM",
                   client_keytab=str(tmp_path / "me.keytab"))
    assert flat(_settings(argv)) == {
        "bootstrap_servers": "k1:9092,k2:9092", "topic": "t.events", "hms_uri": "thrift://hms:9083",
        "warehouse_root": "file:///wh", "state_dir": str(state), "checkpoint_dir": "hdfs://nn/ck",
        "source_id": "east", "external_base_dir": "file:///ext", "external_layout": "path",
        "kafka_settings": {"client.id": "c1"}, "db_map": {"a": "b", "c": "d"}, "allow_existing_db": True,
        "max_events_per_trigger": 77, "max_record_bytes": 4 << 20, "trigger_seconds": 1.5,
        "kafka_reader": "task", "consumer_group": "grp", "copy_workers": 3, "external_sync_seconds": 30.0,
        "external_source_prefix": "hdfs://nn:8020", "hms_auth": auth, "verify_every": 120.0,
        "verify_source_hms_uri": "thrift://src:9083", "verify_source_notification_db": None,
        "verify_source_auth": auth, "verify_repair": False, "until_event": 500, "mark_readonly": True,
        "markers_per_batch": True, "coalesce_backlog": True, "watermark_db": "wm", "consistency": "database",
        "apply_lanes": 6, "executor_copy_min_bytes": 1000, "executor_copy_min_files": 9,
        "spark_master": "local[1]", "py_files": ("a.zip", "b.zip"),
        "source_prefixes": ("hdfs://nn:8020/wh", "s3a://b/x"), "source_cmroots": ("hdfs://nn/cm",),
        "allow_unverified_files": True, "archive_dir": "/arch",
    }


def test_the_defaults_are_the_ones_they_were(tmp_path: Path) -> None:
    state = tmp_path / "state"
    argv = ["--bootstrap-servers", "k:9092", "--hms-uri", "thrift://hms:9083", "--warehouse-root", "/wh",
            "--state-dir", str(state)]
    assert flat(_settings(argv)) == {
        "bootstrap_servers": "k:9092", "topic": "streamer.source.events", "hms_uri": "thrift://hms:9083",
        "warehouse_root": "/wh", "state_dir": str(state), "checkpoint_dir": str(state / "checkpoint"),
        "source_id": "source", "external_base_dir": None, "external_layout": "authority",
        "kafka_settings": {}, "db_map": {}, "allow_existing_db": False, "max_events_per_trigger": 5000,
        "max_record_bytes": 64 << 20, "trigger_seconds": 0.5, "kafka_reader": "driver",
        "consumer_group": None, "copy_workers": 8, "external_sync_seconds": 0.0, "external_source_prefix": "file://",
        "hms_auth": HmsAuth(), "verify_every": 0.0, "verify_source_hms_uri": None,
        "verify_source_notification_db": None, "verify_source_auth": HmsAuth(), "verify_repair": True,
        "until_event": None, "mark_readonly": False, "markers_per_batch": False, "coalesce_backlog": False,
        "watermark_db": None, "consistency": "global", "apply_lanes": 4, "executor_copy_min_bytes": 256 << 20,
        "executor_copy_min_files": 256, "spark_master": None, "py_files": (), "source_prefixes": (),
        "source_cmroots": (), "allow_unverified_files": False, "archive_dir": None,
    }


def test_a_load_runs_with_the_settings_it_always_had(tmp_path: Path) -> None:
    from streamer.archive.commands import load_cmd, load_settings

    state = tmp_path / "state"
    argv = ["--from", "/arch", "--hms-uri", "thrift://hms:9083", "--warehouse-root", "/wh",
            "--state-dir", str(state), "--copy-workers", "2", "--markers-per-batch"]
    with load_cmd.make_context("load", argv) as ctx:
        params = dict(ctx.params)
    params.pop("from_dir"), params.pop("fs_option"), params.pop("hdfs_driver")
    got = flat(load_settings(params, "t.events", "east"))
    assert {k: got[k] for k in ("bootstrap_servers", "topic", "source_id", "consumer_group", "copy_workers",
                                "markers_per_batch", "executor_copy_min_bytes", "executor_copy_min_files",
                                "checkpoint_dir", "archive_dir", "verify_every")} == {
        "bootstrap_servers": "", "topic": "t.events", "source_id": "east", "consumer_group": "",
        "copy_workers": 2, "markers_per_batch": True, "executor_copy_min_bytes": 0,
        "executor_copy_min_files": 0, "checkpoint_dir": str(state / "checkpoint"), "archive_dir": None,
        "verify_every": 0.0,
    }


def test_verify_sources_without_verify_every_are_refused(tmp_path: Path) -> None:
    import click
    import pytest

    argv = ["--bootstrap-servers", "k:9092", "--hms-uri", "thrift://h:1", "--warehouse-root", "/wh",
            "--state-dir", str(tmp_path / "s"), "--verify-source-notification-db", "jdbc:x"]
    with pytest.raises(click.UsageError, match="need --verify-every"):
        _settings(argv)
