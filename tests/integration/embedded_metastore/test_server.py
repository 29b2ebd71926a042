"""The embedded metastore process: configuration, start-up, failure reporting, PostgreSQL backend."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamer.embedded_metastore import cm
from streamer.embedded_metastore.commands import hms as hms_group
from streamer.embedded_metastore.errors import MetastoreError, MetastoreStartError
from streamer.embedded_metastore.launch import ServerOptions, server_properties
from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.embedded_metastore.site import MetastoreSettings, derby_url, render_site_xml, site_properties
from streamer.events.model import Column, DatabaseSnapshot, PartitionSnapshot, TableSnapshot
from streamer.metastore.thrift import HmsCatalog

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_site_xml_for_derby_is_valid_and_complete(tmp_path: Path) -> None:
    settings = MetastoreSettings(warehouse_dir=tmp_path / "wh", jdbc_url=derby_url(tmp_path))
    root = ET.fromstring(render_site_xml(site_properties(settings)))
    props = {p.findtext("name"): p.findtext("value") for p in root.iter("property")}
    assert (
        props["javax.jdo.option.ConnectionURL"]
        == f"jdbc:derby:;databaseName={tmp_path}/metastore_db;create=true"
    )
    assert props["javax.jdo.option.ConnectionDriverName"] == "org.apache.derby.jdbc.EmbeddedDriver"
    assert props["datanucleus.schema.autoCreateAll"] == "true"
    assert props["hive.metastore.schema.verification"] == "false"
    assert props["hive.metastore.warehouse.dir"] == (tmp_path / "wh").as_uri()
    assert "javax.jdo.option.ConnectionUserName" not in props


def test_site_xml_for_postgres_escapes_values(tmp_path: Path) -> None:
    settings = MetastoreSettings(
        warehouse_dir=tmp_path, jdbc_url="jdbc:postgresql://h/db?a=1&b=2", jdbc_user="u", jdbc_password="p<&>"
    )
    props = {
        p.findtext("name"): p.findtext("value")
        for p in ET.fromstring(render_site_xml(site_properties(settings))).iter("property")
    }
    assert props["javax.jdo.option.ConnectionDriverName"] == "org.postgresql.Driver"
    assert props["javax.jdo.option.ConnectionURL"] == "jdbc:postgresql://h/db?a=1&b=2"
    assert props["javax.jdo.option.ConnectionPassword"] == "p<&>"


def test_running_metastore_answers(hms: EmbeddedMetastore) -> None:
    assert hms.uri == f"thrift://127.0.0.1:{hms.port}"
    assert hms.running
    assert "default" in hms.ping()
    assert hms.warehouse_dir.is_dir()
    assert hms.start_seconds is not None
    print(f"\nmetastore start took {hms.start_seconds:.1f} s")


def test_start_timeout_reports_the_log_tail_and_stops_the_process(tmp_path: Path) -> None:
    server = EmbeddedMetastore(work_dir=tmp_path, start_timeout=0.5)
    with pytest.raises(MetastoreStartError, match="did not answer") as info:
        server.start()
    assert "log tail" in str(info.value)
    assert not server.running
    assert (tmp_path / "conf" / "hive-site.xml").exists()


def test_postgres_backed_metastore_starts_and_answers(hms_postgres: EmbeddedMetastore) -> None:
    print(f"\npostgres-backed metastore start took {hms_postgres.start_seconds:.1f} s")
    with HmsCatalog(hms_postgres.uri) as catalog:
        db = f"pg_{uuid.uuid4().hex[:8]}"
        catalog.create_database(DatabaseSnapshot(name=db))
        catalog.create_table(TableSnapshot(name="t", db=db, partition_keys=[Column("k", "string")]))
        catalog.add_partitions(db, "t", [PartitionSnapshot(values=[str(i)]) for i in range(3)])
        assert sorted(p.values[0] for p in catalog.list_partitions(db, "t")) == ["0", "1", "2"]
        catalog.drop_database(db)
        assert catalog.get_database(db) is None


def test_cli_run_help_lists_the_options() -> None:
    result = CliRunner().invoke(hms_group, ["run", "--help"])
    assert result.exit_code == 0
    for option in ("--port", "--warehouse-dir", "--jdbc-url", "--work-dir", "--notifications", "--cmroot"):
        assert option in result.output
    assert "hive.repl.cm.enabled" in result.output and "INSERT OVERWRITE" in result.output


def test_a_cmroot_turns_on_hives_change_management_with_checksums(tmp_path: Path) -> None:
    settings = MetastoreSettings(warehouse_dir=tmp_path / "wh", jdbc_url=derby_url(tmp_path))
    props = server_properties(ServerOptions(settings, cmroot=tmp_path / "cm"), local_fs=True)
    assert props["hive.repl.cm.enabled"] == "true"
    assert props["hive.repl.cmrootdir"] == f"file://{tmp_path / 'cm'}"
    assert props[cm.CHECKSUM_KEY] == "MD5"  # Hive's change manager fails on a file without a checksum
    assert props["fs.file.impl"] == "streamer.hms.StreamerLocalFileSystem"
    plain = server_properties(ServerOptions(settings), local_fs=True)
    assert not {"hive.repl.cm.enabled", "hive.repl.cmrootdir", cm.CHECKSUM_KEY} & set(plain)
    overridden = ServerOptions(settings, cmroot=tmp_path / "cm", site_overrides={"hive.repl.cm.retain": "1h"})
    assert server_properties(overridden, local_fs=True)["hive.repl.cm.retain"] == "1h"


def test_a_cmroot_without_streamers_local_filesystem_is_refused(tmp_path: Path) -> None:
    server = EmbeddedMetastore(work_dir=tmp_path, cmroot=tmp_path / "cm", streamer_local_fs=False)
    with pytest.raises(MetastoreError, match="checksum"):
        server.start()
    assert not server.running
    assert server.cmroot == (tmp_path / "cm").resolve()
