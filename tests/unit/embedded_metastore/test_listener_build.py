"""Building streamer's Java classes for the metastore: cache key, settings, missing JDK."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.embedded_metastore import javabuild, listener, localfs
from streamer.embedded_metastore.errors import MetastoreError


def test_settings_register_a_transactional_listener_and_dml_events() -> None:
    props = listener.site_properties()
    assert props["hive.metastore.transactional.event.listeners"] == listener.LISTENER_CLASS
    assert props["hive.metastore.dml.events"] == "true"
    assert listener.SOURCE.exists() and f"class {listener.LISTENER_CLASS.rsplit('.', 1)[1]}" in (
        listener.SOURCE.read_text())


def test_cache_key_follows_source_and_jars(tmp_path: Path) -> None:
    (tmp_path / "hive-metastore-2.3.10.jar").write_bytes(b"")
    key = javabuild.build_key(b"class A {}", tmp_path)
    assert key == javabuild.build_key(b"class A {}", tmp_path)
    assert key != javabuild.build_key(b"class B {}", tmp_path)
    (tmp_path / "hive-metastore-2.3.10.jar").rename(tmp_path / "hive-metastore-2.3.11.jar")
    assert key != javabuild.build_key(b"class A {}", tmp_path)


def test_missing_javac_names_the_jdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(javabuild.shutil, "which", lambda name: None)
    with pytest.raises(MetastoreError, match=r"notification listener.*openjdk-17-jdk-headless"):
        listener.listener_classes(tmp_path, cache=tmp_path / "cache")


def test_cached_build_is_reused_without_javac(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = javabuild.build_dir(tmp_path, cache=tmp_path / "cache") / "streamer" / "hms"
    built.mkdir(parents=True)
    (built / "StreamerNotificationListener.class").write_bytes(b"")
    monkeypatch.setattr(javabuild.shutil, "which", lambda name: None)
    assert listener.listener_classes(tmp_path, cache=tmp_path / "cache") == built.parent.parent


def test_a_changed_source_is_a_new_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = tmp_path / "java"
    java.mkdir()
    (java / "A.java").write_text("class A {}")
    monkeypatch.setattr(javabuild, "JAVA_DIR", java)
    before = javabuild.build_dir(tmp_path)
    (java / "B.java").write_text("class B {}")
    assert javabuild.build_dir(tmp_path) != before


def test_local_filesystem_replaces_file_scheme_and_its_source_exists() -> None:
    assert localfs.site_properties() == {"fs.file.impl": localfs.FS_CLASS}
    name = localfs.FS_CLASS.rsplit(".", 1)[1]
    assert f"class {name} " in (javabuild.JAVA_DIR / f"{name}.java").read_text()
