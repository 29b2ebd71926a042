"""streamer.checksums: streaming equals one pass, and each HDFS value equals a plain reference.

The references below follow the definitions directly (whole content in memory, no streaming); the
Hadoop classes themselves are compared in tests/integration/checksums.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer import checksums

HDFS = [checksums.HDFS_MD5_CRC32C, checksums.HDFS_MD5_CRC32, checksums.HDFS_COMPOSITE_CRC32C,
        checksums.HDFS_COMPOSITE_CRC32]
CRC = {"crc32c": lambda b: crc32c.crc32c(b), "crc32": zlib.crc32}


def _reference_md5_md5(data: bytes, crc: str, bpc: int, block: int) -> str:
    if not data:
        return checksums.EMPTY_FILE
    blocks = [data[i : i + block] for i in range(0, len(data), block)]
    md5s = b""
    for b in blocks:
        crcs = [CRC[crc](b[i : i + bpc]) for i in range(0, len(b), bpc)]
        md5s += hashlib.md5(b"".join(c.to_bytes(4, "big") for c in crcs)).digest()
    buffer = 32
    while buffer < len(md5s):
        buffer *= 2
    crc_per_block = block // bpc if len(blocks) > 1 else 0
    return (struct.pack(">iq", bpc, crc_per_block) + hashlib.md5(md5s.ljust(buffer, b"\0")).digest()).hex()


def _reference(algorithm: str, data: bytes, bpc: int, block: int) -> str:
    crc = "crc32c" if algorithm.endswith("crc32c") else "crc32"
    if "composite" in algorithm:
        return CRC[crc](data).to_bytes(4, "big").hex() if data else checksums.EMPTY_FILE
    return _reference_md5_md5(data, crc, bpc, block)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


sizes = st.sampled_from([(512, 1024), (16, 16), (16, 64), (4, 12)])


@settings(max_examples=150, deadline=None)
@given(algorithm=st.sampled_from(HDFS), data=st.binary(max_size=400), cuts=st.lists(st.integers(0, 400)),
       bpc_block=sizes)
def test_chunked_updates_equal_the_reference(
    algorithm: str, data: bytes, cuts: list[int], bpc_block: tuple[int, int]
) -> None:
    bpc, block = bpc_block
    hasher = checksums.new(algorithm, bytes_per_crc=bpc, block_size=block)
    for piece in _split(data, cuts):
        hasher.update(piece)
    want = _reference(algorithm, data, bpc, block)
    assert hasher.hexdigest() == want
    assert hasher.hexdigest() == want  # reading the digest does not disturb the state
    derived = checksums.new(algorithm, expected=want)  # sizes taken from the recorded value
    derived.update(data)
    assert derived.hexdigest() == want


@settings(max_examples=50, deadline=None)
@given(data=st.binary(min_size=1, max_size=300), more=st.binary(min_size=1, max_size=50))
def test_copy_forks_the_state(data: bytes, more: bytes) -> None:
    for algorithm in HDFS:
        hasher = checksums.new(algorithm, bytes_per_crc=8, block_size=32)
        hasher.update(data)
        fork = hasher.copy()
        fork.update(more)
        assert hasher.hexdigest() == _reference(algorithm, data, 8, 32)
        assert fork.hexdigest() == _reference(algorithm, data + more, 8, 32)


def test_hashlib_algorithms_pass_through() -> None:
    for name in ("sha256", "MD5"):
        hasher = checksums.new(name)
        hasher.update(b"abc")
        assert hasher.hexdigest() == hashlib.new(name.lower(), b"abc").hexdigest()


def test_known_hdfs_values() -> None:
    """Values computed once by Hadoop 3.5's classes (tests/integration/checksums/HdfsChecksum.java)."""
    assert checksums.EMPTY_FILE == "00000000000000000000000070bc8f4b72a86921468bf8e8441dce51"
    one = checksums.new(checksums.HDFS_COMPOSITE_CRC32C)
    one.update(b"123456789")
    assert one.hexdigest() == "e3069283"  # CRC-32C's check value


@pytest.mark.parametrize(
    ("algorithm", "value", "cause"),
    [
        ("crc32c", "00", "unknown checksum algorithm 'crc32c'"),
        ("sha256", "xyz", "not hexadecimal"),
        ("sha256", "00ff", "has 2 bytes; a sha256 value has 32"),
        (checksums.HDFS_MD5_CRC32C, hashlib.sha256(b"").hexdigest(), "has 32 bytes; a hdfs-md5-of-md5"),
        (checksums.HDFS_MD5_CRC32C, "00" * 4 + "ff" * 24, "records bytesPerCRC 0"),
        (checksums.HDFS_COMPOSITE_CRC32, "00000200" + "00" * 24, "is an MD5-of-MD5 value"),
    ],
)
def test_values_an_algorithm_cannot_produce_are_refused(algorithm: str, value: str, cause: str) -> None:
    with pytest.raises(checksums.ChecksumError, match=cause):
        checksums.check_value(algorithm, value)
    with pytest.raises(checksums.ChecksumError):
        checksums.new(algorithm, expected=value)


def test_block_size_must_be_a_multiple_of_the_chunk() -> None:
    with pytest.raises(checksums.ChecksumError, match="not a positive multiple"):
        checksums.new(checksums.HDFS_MD5_CRC32C, bytes_per_crc=512, block_size=1000)
    # a recorded value names its own sizes: 4 chunks of 512 per block
    recorded = struct.pack(">iq", 512, 4).hex() + "00" * 16
    hasher = checksums.new(checksums.HDFS_MD5_CRC32C, expected=recorded, block_size=1000)
    assert isinstance(hasher, checksums.Md5Md5Crc) and hasher.block_size == 2048
