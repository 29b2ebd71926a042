"""The agent's start-up check against real metastores (Hive 2.3 from PySpark's jars), over Thrift.

PySpark ships no hcatalog, so no embedded metastore can load DbNotificationListener; one started
with ``notifications=True`` logs through streamer's listener under Hive's
``hive.metastore.transactional.event.listeners``, and the check knows it. The other settings are
read as the server has them.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.kafka.broker import EmbeddedBroker
from streamer.source.prerequisites import (
    CM_ENABLED,
    CM_ROOT,
    DML_EVENTS,
    LISTENER_CLASS,
    STREAMER_LISTENER_CLASS,
    TRANSACTIONAL_LISTENERS,
    check_prerequisites,
)
from streamer.source.thrift_reader import ThriftNotificationReader

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hms_replication_ready(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EmbeddedMetastore, Path]]:
    """A metastore with DML events and change management on."""
    work = tmp_path_factory.mktemp("hms-repl")
    cmroot = work / "cmroot"
    overrides = {DML_EVENTS: "true", CM_ENABLED: "true", CM_ROOT: cmroot.as_uri()}
    with EmbeddedMetastore(work_dir=work, warehouse_dir=work / "warehouse", site_overrides=overrides) as srv:
        yield srv, cmroot


def _check(uri: str, cmroot: str | None = None) -> list[str]:
    reader = ThriftNotificationReader(uri)
    try:
        return check_prerequisites(reader.config_value, cmroot=cmroot)
    finally:
        reader.close()


def test_a_default_metastore_is_warned_about_each_setting(hms: EmbeddedMetastore) -> None:
    warnings = _check(hms.uri)
    assert len(warnings) == 3
    assert warnings[0].startswith(TRANSACTIONAL_LISTENERS) and LISTENER_CLASS in warnings[0]
    assert warnings[1].startswith(f"{DML_EVENTS} is 'false'")
    assert warnings[2].startswith(f"{CM_ENABLED} is 'false'")


def test_settings_that_are_on_are_not_warned_about(
    hms_replication_ready: tuple[EmbeddedMetastore, Path],
) -> None:
    server, cmroot = hms_replication_ready
    (only,) = _check(server.uri, cmroot=cmroot.as_uri())
    assert only.startswith(TRANSACTIONAL_LISTENERS)
    (_listener, other_root) = _check(server.uri, cmroot="hdfs://elsewhere/cm")
    assert f"differs from the metastore's {CM_ROOT}={cmroot.as_uri()}" in other_root


def test_a_metastore_with_streamers_listener_and_a_cmroot_is_ready(hms_cm: EmbeddedMetastore) -> None:
    """``streamer hms run --notifications --cmroot DIR``: every prerequisite met, nothing to warn about."""
    reader = ThriftNotificationReader(hms_cm.uri)
    try:
        assert reader.config_value(TRANSACTIONAL_LISTENERS, "") == STREAMER_LISTENER_CLASS
    finally:
        reader.close()
    assert hms_cm.cmroot is not None
    assert _check(hms_cm.uri, cmroot=f"file://{hms_cm.cmroot}") == []
    (other_root,) = _check(hms_cm.uri, cmroot="hdfs://elsewhere/cm")
    assert other_root.startswith("--cmroot hdfs://elsewhere/cm differs")


@pytest.mark.parametrize("command", [["source", "run", "--once"], ["bootstrap", "--policy", "no_such_db"]])
def test_the_agent_and_bootstrap_warn_at_start_up(
    hms: EmbeddedMetastore, broker: EmbeddedBroker, command: list[str]
) -> None:
    """``streamer source run|bootstrap --hms-uri`` name each setting that is off in the log, then run."""
    argv = [str(Path(sys.executable).with_name("streamer")), *command, "--source-id", "prereq",
            "--hms-uri", hms.uri, "--bootstrap-servers", broker.bootstrap_servers,
            "--topic", f"prereq-{uuid.uuid4().hex[:8]}"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    for setting in (TRANSACTIONAL_LISTENERS, DML_EVENTS, CM_ENABLED):
        assert f"source prerequisite: {setting}" in result.stderr
    assert f"add {LISTENER_CLASS} to {TRANSACTIONAL_LISTENERS}" in result.stderr  # what to set
