"""streamer.checksums against Hadoop's own classes (the jars PySpark ships).

``HdfsChecksum.java`` builds each value the way HDFS does: the writer's chunk CRCs (DataChecksum),
the datanode's block digests, the client's combination (DataOutputBuffer + MD5Hash, or CrcComposer)
and the FileChecksum classes' bytes, hex-encoded as Hive records them. It is compiled once per
session; one JVM run per parameter set covers every file size.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from streamer import checksums
from streamer.hms.server import pyspark_jars_dir

pytestmark = pytest.mark.integration

HARNESS = Path(__file__).with_name("HdfsChecksum.java")
MODES = {
    checksums.HDFS_MD5_CRC32C: ("MD5MD5CRC", "CRC32C"),
    checksums.HDFS_MD5_CRC32: ("MD5MD5CRC", "CRC32"),
    checksums.HDFS_COMPOSITE_CRC32C: ("COMPOSITE_CRC", "CRC32C"),
    checksums.HDFS_COMPOSITE_CRC32: ("COMPOSITE_CRC", "CRC32"),
}


@pytest.fixture(scope="session")
def harness(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The classpath of the compiled harness plus Hadoop's jars."""
    if shutil.which("javac") is None:
        pytest.fail("javac is needed to build the Hadoop reference harness (install a JDK)")
    out = tmp_path_factory.mktemp("hdfs-checksum")
    jars = f"{pyspark_jars_dir()}/*"
    subprocess.run(["javac", "-d", str(out), "-cp", jars, str(HARNESS)], check=True, timeout=120)
    return f"{out}:{jars}"


def _sizes(bytes_per_crc: int, block_size: int) -> list[int]:
    """Empty, under one chunk, chunk and block boundaries +-1, several blocks with a partial chunk."""
    bpc, blk = bytes_per_crc, block_size
    return sorted({0, 1, bpc - 1, bpc, bpc + 1, 3 * bpc, blk - 1, blk, blk + 1, 2 * blk, 2 * blk + 7,
                   3 * blk, 5 * blk + bpc // 2, 9 * blk + 1})


def _reference(classpath: str, algorithm: str, bpc: int, block: int, files: list[Path]) -> list[str]:
    mode, crc = MODES[algorithm]
    result = subprocess.run(
        ["java", "-cp", classpath, "HdfsChecksum", mode, crc, str(bpc), str(block), *map(str, files)],
        check=True, capture_output=True, text=True, timeout=120,
    )
    return result.stdout.split()


@pytest.mark.parametrize("algorithm", list(MODES))
@pytest.mark.parametrize(("bpc", "block"), [(512, 1024), (64, 64)])
def test_streaming_hasher_matches_hadoop(
    harness: str, tmp_path: Path, algorithm: str, bpc: int, block: int
) -> None:
    rng = random.Random(f"{algorithm}-{bpc}-{block}")
    files = []
    for size in _sizes(bpc, block):
        path = tmp_path / f"f{size}"
        path.write_bytes(rng.randbytes(size))
        files.append(path)
    expected = _reference(harness, algorithm, bpc, block, files)
    assert len(expected) == len(files)
    for path, want in zip(files, expected, strict=True):
        data = path.read_bytes()
        configured = checksums.new(algorithm, bytes_per_crc=bpc, block_size=block)
        for start in range(0, len(data), 700):  # uneven updates across chunk and block boundaries
            configured.update(data[start : start + 700])
        assert configured.hexdigest() == want, f"{algorithm} of {len(data)} bytes (configured sizes)"
        # the target knows neither size: the recorded value tells them
        derived = checksums.new(algorithm, expected=want)
        derived.update(data)
        assert derived.hexdigest() == want, f"{algorithm} of {len(data)} bytes (sizes from the value)"


def test_default_sizes_match_hadoop(harness: str, tmp_path: Path) -> None:
    """HDFS's defaults (512-byte chunks, 128 MiB blocks) on a file of one partial block."""
    path = tmp_path / "f"
    path.write_bytes(random.Random(7).randbytes(3 * 1024 * 1024 + 5))
    for algorithm in MODES:
        want = _reference(harness, algorithm, checksums.DEFAULT_BYTES_PER_CRC, checksums.DEFAULT_BLOCK_SIZE,
                          [path])[0]
        hasher = checksums.new(algorithm)
        hasher.update(path.read_bytes())
        assert hasher.hexdigest() == want
