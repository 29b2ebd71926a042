"""Hadoop's own file checksums, from ``HdfsChecksum.java`` compiled against PySpark's jars.

The harness builds each value the way HDFS does: the writer's chunk CRCs (DataChecksum), the
datanode's block digests, the client's combination (DataOutputBuffer + MD5Hash, or CrcComposer) and
the FileChecksum classes' bytes, hex-encoded as Hive records them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from streamer import checksums
from streamer.embedded_metastore.server import pyspark_jars_dir

HARNESS = Path(__file__).with_name("HdfsChecksum.java")
MODES = {
    checksums.HDFS_MD5_CRC32C: ("MD5MD5CRC", "CRC32C"),
    checksums.HDFS_MD5_CRC32: ("MD5MD5CRC", "CRC32"),
    checksums.HDFS_COMPOSITE_CRC32C: ("COMPOSITE_CRC", "CRC32C"),
    checksums.HDFS_COMPOSITE_CRC32: ("COMPOSITE_CRC", "CRC32"),
}


def compile_harness(out: Path) -> str:
    """Compile the harness into ``out``; the classpath to run it with."""
    if shutil.which("javac") is None:
        raise RuntimeError("javac is needed to build the Hadoop reference harness (install a JDK)")
    jars = f"{pyspark_jars_dir()}/*"
    subprocess.run(["javac", "-d", str(out), "-cp", jars, str(HARNESS)], check=True, timeout=120)
    return f"{out}:{jars}"


def reference(classpath: str, algorithm: str, bpc: int, block: int, files: list[Path]) -> list[str]:
    """Hadoop's value of ``algorithm`` for each file (one JVM for all of them)."""
    mode, crc = MODES[algorithm]
    result = subprocess.run(
        ["java", "-cp", classpath, "HdfsChecksum", mode, crc, str(bpc), str(block), *map(str, files)],
        check=True, capture_output=True, text=True, timeout=120,
    )
    return result.stdout.split()
