"""Building streamer's metastore notification listener: cache key, settings, missing JDK."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.hms import listener
from streamer.hms.errors import MetastoreError


def test_settings_register_a_transactional_listener_and_dml_events() -> None:
    props = listener.site_properties()
    assert props["hive.metastore.transactional.event.listeners"] == listener.LISTENER_CLASS
    assert props["hive.metastore.dml.events"] == "true"
    assert listener.SOURCE.exists() and f"class {listener.LISTENER_CLASS.rsplit('.', 1)[1]}" in (
        listener.SOURCE.read_text())


def test_cache_key_follows_source_and_jars(tmp_path: Path) -> None:
    (tmp_path / "hive-metastore-2.3.10.jar").write_bytes(b"")
    key = listener.build_key(b"class A {}", tmp_path)
    assert key == listener.build_key(b"class A {}", tmp_path)
    assert key != listener.build_key(b"class B {}", tmp_path)
    (tmp_path / "hive-metastore-2.3.10.jar").rename(tmp_path / "hive-metastore-2.3.11.jar")
    assert key != listener.build_key(b"class A {}", tmp_path)


def test_missing_javac_names_the_jdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listener.shutil, "which", lambda name: None)
    with pytest.raises(MetastoreError, match="openjdk-17-jdk-headless"):
        listener.listener_classes(tmp_path, cache=tmp_path / "cache")


def test_cached_build_is_reused_without_javac(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = listener.build_key(listener.SOURCE.read_bytes(), tmp_path)
    built = tmp_path / "cache" / "hms-listener" / key / "streamer" / "hms"
    built.mkdir(parents=True)
    (built / "StreamerNotificationListener.class").write_bytes(b"")
    monkeypatch.setattr(listener.shutil, "which", lambda name: None)
    assert listener.listener_classes(tmp_path, cache=tmp_path / "cache") == built.parent.parent
