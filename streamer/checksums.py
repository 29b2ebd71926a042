"""File checksums as source filesystems record them (sha256, md5 and HDFS's MD5-of-MD5-of-CRC and
composite-CRC values), computed while a file streams by.

Every hasher is hashlib-like (``update``, ``digest``, ``hexdigest``, ``copy``), so a copier hashes a file
in the same pass that writes it. Pure: no I/O. How HDFS's values are made: ``docs/design/source.md``.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable
from typing import Protocol

import crc32c as _crc32c

from streamer.errors import StreamerError

SHA256 = "sha256"
MD5 = "md5"
HDFS_MD5_CRC32C = "hdfs-md5-of-md5-of-crc32c"
HDFS_MD5_CRC32 = "hdfs-md5-of-md5-of-crc32"
HDFS_COMPOSITE_CRC32C = "hdfs-composite-crc32c"
HDFS_COMPOSITE_CRC32 = "hdfs-composite-crc32"
ALGORITHMS: tuple[str, ...] = (SHA256, MD5, HDFS_MD5_CRC32C, HDFS_MD5_CRC32, HDFS_COMPOSITE_CRC32C,
                               HDFS_COMPOSITE_CRC32)

DEFAULT_BYTES_PER_CRC = 512  # dfs.bytes-per-checksum
DEFAULT_BLOCK_SIZE = 128 * 1024 * 1024  # dfs.blocksize

_MD5_LEN = 16
_HEADER = struct.Struct(">iq")  # bytesPerCRC, crcPerBlock
_MD5_CRC_HEX = 2 * (_HEADER.size + _MD5_LEN)
_FIRST_BUFFER = 32  # the initial capacity of Hadoop's DataOutputBuffer
# HDFS's value for a file without blocks, whatever the mode and CRC type
EMPTY_FILE = (_HEADER.pack(0, 0) + hashlib.md5(bytes(_FIRST_BUFFER)).digest()).hex()

Crc = Callable[[bytes | memoryview, int], int]


def _crc32c_fn(data: bytes | memoryview, value: int) -> int:
    return int(_crc32c.crc32c(data, value))


def _crc32_fn(data: bytes | memoryview, value: int) -> int:
    return zlib.crc32(data, value)


_CRCS: dict[str, Crc] = {
    HDFS_MD5_CRC32C: _crc32c_fn, HDFS_MD5_CRC32: _crc32_fn,
    HDFS_COMPOSITE_CRC32C: _crc32c_fn, HDFS_COMPOSITE_CRC32: _crc32_fn,
}


class ChecksumError(StreamerError, ValueError):
    """An unknown algorithm name or a recorded value that is not one of its values."""


class Hasher(Protocol):
    name: str

    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...

    def copy(self) -> Hasher: ...


def normalize(name: str) -> str:
    """The canonical spelling of an algorithm name; ``ChecksumError`` listing the known ones otherwise."""
    canonical = name.strip().lower()
    if canonical not in ALGORITHMS:
        raise ChecksumError(f"unknown checksum algorithm {name!r}; supported: {', '.join(ALGORITHMS)}")
    return canonical


def check_value(name: str, value: str) -> None:
    """Refuse a recorded ``value`` that cannot be a checksum of algorithm ``name`` (length, hex, header)."""
    algorithm = normalize(name)
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise ChecksumError(f"checksum {value!r} is not hexadecimal") from None
    expected: tuple[int, ...]
    if algorithm in (SHA256, MD5):
        expected = (hashlib.new(algorithm).digest_size,)
    elif algorithm in (HDFS_MD5_CRC32C, HDFS_MD5_CRC32):
        expected = (_MD5_CRC_HEX // 2,)
    else:
        expected = (4, _MD5_CRC_HEX // 2)  # one CRC, or the constant of an empty file
    if len(raw) not in expected:
        sizes = " or ".join(str(n) for n in expected)
        raise ChecksumError(f"checksum {value!r} has {len(raw)} bytes; a {algorithm} value has {sizes}")
    if len(raw) == _MD5_CRC_HEX // 2:
        bytes_per_crc, crc_per_block = _HEADER.unpack_from(raw)
        empty = value.lower() == EMPTY_FILE
        if not empty and (bytes_per_crc <= 0 or crc_per_block < 0):
            raise ChecksumError(f"checksum {value!r} records bytesPerCRC {bytes_per_crc} and crcPerBlock "
                                f"{crc_per_block}; a {algorithm} value of a non-empty file has both >= 0, "
                                "bytesPerCRC > 0")
        if algorithm in (HDFS_COMPOSITE_CRC32C, HDFS_COMPOSITE_CRC32) and not empty:
            raise ChecksumError(f"checksum {value!r} is an MD5-of-MD5 value, not a {algorithm} one "
                                "(4 bytes)")


RECORDED_BYTES_PER_CRC = (16, 64 * 1024)
"""The bytesPerCRC a record's MD5-of-MD5 value may carry (``recorded_sizes_in_bounds``): HDFS's
default is 512 (``dfs.bytes-per-checksum``); 1 would make hashing hundreds of times slower, and
2^31-1 would buffer the whole file several times over."""


def recorded_sizes_in_bounds(name: str, value: str) -> None:
    """``ChecksumError`` when an MD5-of-MD5 ``value`` (already valid: ``check_value``) records a
    bytesPerCRC outside :data:`RECORDED_BYTES_PER_CRC`; other algorithms record no sizes."""
    algorithm = normalize(name)
    raw = bytes.fromhex(value)
    if algorithm not in (HDFS_MD5_CRC32C, HDFS_MD5_CRC32) or len(raw) != _MD5_CRC_HEX // 2:
        return
    bytes_per_crc, _ = _HEADER.unpack_from(raw)
    low, high = RECORDED_BYTES_PER_CRC
    if value.lower() != EMPTY_FILE and not low <= bytes_per_crc <= high:
        raise ChecksumError(f"checksum {value!r} records bytesPerCRC {bytes_per_crc}; accepted from a "
                            f"record: {low}..{high} (HDFS's default is {DEFAULT_BYTES_PER_CRC})")


def new(
    name: str,
    expected: str | None = None,
    *,
    bytes_per_crc: int = DEFAULT_BYTES_PER_CRC,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Hasher:
    """A fresh streaming hasher for ``name``, shaped to reproduce ``expected`` when that is given.

    ``ChecksumError`` for an unknown name, a malformed ``expected`` or inconsistent sizes.
    """
    algorithm = normalize(name)
    if expected is not None:
        check_value(algorithm, expected)
    if algorithm in (SHA256, MD5):
        return _Hashlib(algorithm)
    crc = _CRCS[algorithm]
    if algorithm in (HDFS_COMPOSITE_CRC32C, HDFS_COMPOSITE_CRC32):
        return CompositeCrc(algorithm, crc)
    block: int | None = block_size
    if expected is not None:
        recorded_bpc, crc_per_block = _HEADER.unpack_from(bytes.fromhex(expected))
        if recorded_bpc > 0:
            bytes_per_crc = recorded_bpc
            block = crc_per_block * recorded_bpc if crc_per_block > 0 else None  # one block: no bound
    return Md5Md5Crc(algorithm, crc, bytes_per_crc, block)


class _Hashlib:
    """hashlib's own digests behind the same interface."""

    def __init__(self, name: str, state: hashlib._Hash | None = None) -> None:
        self.name = name
        self._hash = state if state is not None else hashlib.new(name)

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        self._hash.update(data)

    def digest(self) -> bytes:
        return self._hash.digest()

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

    def copy(self) -> _Hashlib:
        return _Hashlib(self.name, self._hash.copy())


class CompositeCrc:
    """HDFS's COMPOSITE_CRC value: composing the chunk and block CRCs yields the CRC of the content."""

    def __init__(self, name: str, crc: Crc) -> None:
        self.name = name
        self._crc_fn = crc
        self._crc = 0
        self._size = 0

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        view = memoryview(data).cast("B")
        self._crc = self._crc_fn(view, self._crc)
        self._size += len(view)

    def digest(self) -> bytes:
        if self._size == 0:
            return bytes.fromhex(EMPTY_FILE)
        return self._crc.to_bytes(4, "big")

    def hexdigest(self) -> str:
        return self.digest().hex()

    def copy(self) -> CompositeCrc:
        clone = CompositeCrc(self.name, self._crc_fn)
        clone._crc, clone._size = self._crc, self._size
        return clone


class Md5Md5Crc:
    """HDFS's MD5MD5CRC value for chunks of ``bytes_per_crc`` and blocks of ``block_size`` bytes
    (``None``: the whole file is one block)."""

    def __init__(self, name: str, crc: Crc, bytes_per_crc: int, block_size: int | None) -> None:
        if bytes_per_crc <= 0:
            raise ChecksumError(f"bytes per CRC must be positive, not {bytes_per_crc}")
        if block_size is not None and (block_size <= 0 or block_size % bytes_per_crc):
            raise ChecksumError(f"block size {block_size} is not a positive multiple of bytes per CRC "
                                f"{bytes_per_crc} (HDFS requires dfs.blocksize to be one)")
        self.name = name
        self.bytes_per_crc = bytes_per_crc
        self.block_size = block_size
        self._crc = crc
        self._chunks_per_block = block_size // bytes_per_crc if block_size is not None else None
        self._pending = bytearray()  # the start of a chunk not yet complete
        self._block_md5 = hashlib.md5()  # over the current block's CRCs
        self._block_chunks = 0
        self._file_md5 = hashlib.md5()  # over the closed blocks' MD5s
        self._blocks = 0

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        view = memoryview(data).cast("B")
        bpc = self.bytes_per_crc
        if self._pending:
            need = bpc - len(self._pending)
            self._pending += view[:need]
            view = view[need:]
            if len(self._pending) < bpc:
                return
            self._add_crcs([self._crc(bytes(self._pending), 0)])
            self._pending.clear()
        full = len(view) - len(view) % bpc
        if full:
            crc = self._crc
            self._add_crcs([crc(view[i : i + bpc], 0) for i in range(0, full, bpc)])
        self._pending += view[full:]

    def _add_crcs(self, crcs: list[int]) -> None:
        start = 0
        while start < len(crcs):
            room = len(crcs) - start
            if self._chunks_per_block is not None:
                room = min(room, self._chunks_per_block - self._block_chunks)
            part = crcs[start : start + room]
            self._block_md5.update(struct.pack(f">{len(part)}I", *part))
            self._block_chunks += len(part)
            start += len(part)
            if self._block_chunks == self._chunks_per_block:
                self._close_block()

    def _close_block(self) -> None:
        self._file_md5.update(self._block_md5.digest())
        self._blocks += 1
        self._block_md5 = hashlib.md5()
        self._block_chunks = 0

    def copy(self) -> Md5Md5Crc:
        clone = Md5Md5Crc(self.name, self._crc, self.bytes_per_crc, self.block_size)
        clone._pending = bytearray(self._pending)
        clone._block_md5 = self._block_md5.copy()
        clone._block_chunks = self._block_chunks
        clone._file_md5 = self._file_md5.copy()
        clone._blocks = self._blocks
        return clone

    def digest(self) -> bytes:
        end = self.copy()
        if end._pending:
            end._add_crcs([end._crc(bytes(end._pending), 0)])
        if end._block_chunks:
            end._close_block()
        if end._blocks == 0:
            return bytes.fromhex(EMPTY_FILE)
        used, capacity = _MD5_LEN * end._blocks, _FIRST_BUFFER
        while capacity < used:
            capacity *= 2
        end._file_md5.update(bytes(capacity - used))
        crc_per_block = self._chunks_per_block if end._blocks > 1 and self._chunks_per_block else 0
        return _HEADER.pack(self.bytes_per_crc, crc_per_block) + end._file_md5.digest()

    def hexdigest(self) -> str:
        return self.digest().hex()
