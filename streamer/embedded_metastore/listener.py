"""streamer's notification listener for the embedded metastore: its settings and its build.

PySpark's jars lack Hive's ``DbNotificationListener``, so ``java/StreamerNotificationListener.java``
(built by ``streamer.embedded_metastore.javabuild``) writes ``NOTIFICATION_LOG``; ``site_properties``
registers it as a *transactional* listener and turns on INSERT events. See docs/design/metastore.md.
"""

from __future__ import annotations

from pathlib import Path

from streamer.embedded_metastore import javabuild

LISTENER_CLASS = "streamer.hms.StreamerNotificationListener"  # the Java package of java/*.java
SOURCE = javabuild.JAVA_DIR / "StreamerNotificationListener.java"


def site_properties() -> dict[str, str]:
    """hive-site.xml properties that make the metastore log its changes for `get_next_notification`."""
    return {
        "hive.metastore.transactional.event.listeners": LISTENER_CLASS,
        "hive.metastore.dml.events": "true",  # fire_listener_event(INSERT) reaches the listener
    }


def listener_classes(jars_dir: Path, cache: Path | None = None) -> Path:
    """The directory holding the compiled listener (compiled now if the cache has no build of it)."""
    return javabuild.classes_dir(jars_dir, "the metastore's notification listener", cache)
