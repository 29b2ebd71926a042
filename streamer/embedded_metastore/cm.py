"""Hive's change management for the embedded metastore (``streamer hms run --cmroot DIR``).

With ``hive.repl.cm.enabled`` Hive 2.3's metastore (``ReplChangeManager``) moves every file it
deletes, when a table or partition is dropped, into ``hive.repl.cmrootdir`` first, named by the
file's checksum (2.3: ``<cmroot>/<checksum>``, no file name; Hive 3+: ``<name>_<checksum>``), and
removes it after ``hive.repl.cm.retain`` (24 h). It cannot keep a file without a checksum: Hadoop's
local filesystem has none, so streamer's (``localfs``) computes the MD5 of the bytes when
``streamer.fs.file.checksum=MD5``. Files an INSERT OVERWRITE replaces are deleted by the writer
(Spark, Hive 2.3's client), not the metastore, and are not kept. See docs/features.md.
"""

from __future__ import annotations

from pathlib import Path

CM_ENABLED = "hive.repl.cm.enabled"
CM_ROOT = "hive.repl.cmrootdir"
CHECKSUM_KEY = "streamer.fs.file.checksum"  # StreamerLocalFileSystem.Raw.CHECKSUM_KEY
CHECKSUM = "MD5"  # streamer's `md5` algorithm: the plain digest of the bytes


def cmroot_uri(cmroot: Path) -> str:
    """Hadoop's form of the folder: ``Path.as_uri()`` would percent-encode what Hadoop keeps literally."""
    return f"file://{cmroot.resolve()}"


def site_properties(cmroot: Path) -> dict[str, str]:
    """hive-site.xml properties that turn change management on, into ``cmroot``."""
    return {CM_ENABLED: "true", CM_ROOT: cmroot_uri(cmroot), CHECKSUM_KEY: CHECKSUM}
