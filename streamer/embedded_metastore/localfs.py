"""The embedded metastore's ``file://`` filesystem: Hadoop's, without a process per permission.

``java/StreamerLocalFileSystem.java`` is Hadoop's local filesystem, checksums included, with
permissions through ``java.nio`` instead of a ``chmod``/``ls`` subprocess each (PySpark ships no
native Hadoop library). Without a JDK to build it the metastore runs on Hadoop's own. Measurements
and why: docs/design/metastore.md. With ``streamer.fs.file.checksum=MD5`` (set for a cmroot, see
``cm``) a file's ``getFileChecksum`` is the MD5 of its bytes, which Hive's change manager needs.
"""

from __future__ import annotations

FS_CLASS = "streamer.hms.StreamerLocalFileSystem"  # the Java package (java/*.java), not a Python one


def site_properties() -> dict[str, str]:
    """Properties that make the metastore's ``file://`` paths use streamer's local filesystem."""
    return {"fs.file.impl": FS_CLASS}
