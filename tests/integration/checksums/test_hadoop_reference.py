"""streamer.checksums against Hadoop's own classes (the jars PySpark ships), see ``hadoop.py``;
one JVM run per parameter set covers every file size."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from streamer import checksums
from tests.integration.checksums.hadoop import MODES, reference

pytestmark = pytest.mark.integration

def _sizes(bytes_per_crc: int, block_size: int) -> list[int]:
    """Empty, under one chunk, chunk and block boundaries +-1, several blocks with a partial chunk."""
    bpc, blk = bytes_per_crc, block_size
    return sorted({0, 1, bpc - 1, bpc, bpc + 1, 3 * bpc, blk - 1, blk, blk + 1, 2 * blk, 2 * blk + 7,
                   3 * blk, 5 * blk + bpc // 2, 9 * blk + 1})


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
    expected = reference(harness, algorithm, bpc, block, files)
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
        want = reference(harness, algorithm, checksums.DEFAULT_BYTES_PER_CRC, checksums.DEFAULT_BLOCK_SIZE,
                          [path])[0]
        hasher = checksums.new(algorithm)
        hasher.update(path.read_bytes())
        assert hasher.hexdigest() == want
