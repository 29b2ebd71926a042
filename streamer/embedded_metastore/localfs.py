"""The embedded metastore's ``file://`` filesystem: Hadoop's, without a process per permission.

PySpark ships no native Hadoop library, so Hadoop's local filesystem runs ``chmod`` and ``ls -ld``
in a subprocess for every permission it sets or reads: measured on the 2-core machine of
bench/scale.py, ~20 processes a second from the metastore, a third of the machine's CPU in the
kernel, and most of an ADD PARTITION's time. A production metastore has the native library or a
warehouse on HDFS and never pays this, so the embedded one (demo, tests, benchmarks) uses
``java/StreamerLocalFileSystem.java``: the same filesystem, checksums included, with permissions
through ``java.nio``. Without a JDK to build it (and no cached build) the metastore runs on Hadoop's
own, slower but the same.
"""

from __future__ import annotations

FS_CLASS = "streamer.hms.StreamerLocalFileSystem"  # the Java package (java/*.java), not a Python one


def site_properties() -> dict[str, str]:
    """Properties that make the metastore's ``file://`` paths use streamer's local filesystem."""
    return {"fs.file.impl": FS_CLASS}
