"""Zip bombs built at test time: a ~1.5 MB deflate stream that inflates to 1.5 GiB of zeros.

`zipfile` cannot write pre-compressed data or lie about sizes, so this module writes the zip
structures itself (local headers, central directory, end record; no zip64: sizes < 4 GiB).
"""

from __future__ import annotations

import functools
import io
import random
import struct
import zipfile
import zlib
from dataclasses import dataclass

_MIB = 1 << 20
BOMB_MIB = 1536  # 1.5 GiB inflated


@dataclass(frozen=True)
class RawMember:
    """A member as it goes on disk: name, method, the bytes stored, CRC and declared size."""

    name: str
    method: int
    stored: bytes
    crc: int
    declared_size: int


@functools.lru_cache(maxsize=2)
def deflated_zeros(mib: int = BOMB_MIB) -> tuple[bytes, int]:
    """(raw deflate stream of `mib` MiB of zeros, its CRC-32), built in well under a second.

    One MiB of zeros compressed from a fresh state and ended with a full flush has no back
    references, so the stream is that block repeated `mib` times and an empty final block.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(_MIB)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(zeros, crc)
    return block * mib + b"\x03\x00", crc


def bomb_member(name: str, declared_size: int | None = None) -> RawMember:
    """A deflated 1.5 GiB-of-zeros member; `declared_size` lies about its inflated size.

    A lying member's CRC is that of its declared prefix, so a reader that stops at the declared
    size sees a consistent member (the liar's best case).
    """
    stream, crc = deflated_zeros()
    if declared_size is None:
        return RawMember(name, zipfile.ZIP_DEFLATED, stream, crc, BOMB_MIB * _MIB)
    prefix_crc = zlib.crc32(bytes(declared_size))
    return RawMember(name, zipfile.ZIP_DEFLATED, stream, prefix_crc, declared_size)


@functools.lru_cache(maxsize=1)
def _sparse_random(units: int = 200_000) -> bytes:
    """12.8 MB that deflate shrinks about 8x: 6 random bytes then 58 zeros, repeated."""
    rng = random.Random(0)
    return b"".join(rng.randbytes(6) + bytes(58) for _ in range(units))


def within_limits_member(name: str) -> RawMember:
    """A deflated member just inside the ratio limits (~1.6 MB inflating to 12.8 MB of noise)."""
    data = _sparse_random()
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = compressor.compress(data) + compressor.flush()
    return RawMember(name, zipfile.ZIP_DEFLATED, stream, zlib.crc32(data), len(data))


def stored_member(name: str, data: bytes) -> RawMember:
    return RawMember(name, zipfile.ZIP_STORED, data, zlib.crc32(data), len(data))


def members_of(archive: bytes) -> list[RawMember]:
    """Every member of a clean zip, re-stored uncompressed (to rebuild it with a bomb inside)."""
    with zipfile.ZipFile(io.BytesIO(archive)) as source:
        return [stored_member(i.filename, source.read(i)) for i in source.infolist()]


def write_zip(members: list[RawMember]) -> bytes:
    """A zip archive of exactly these members, with their declared sizes as given."""
    out = bytearray()
    central = bytearray()
    for member in members:
        name = member.name.encode()
        fields = (
            20,
            0,
            member.method,
            0,
            0x21,
            member.crc,
            len(member.stored),
            member.declared_size,
            len(name),
            0,
        )
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, *fields) + name + member.stored
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, *fields, 0, 0, 0, 0, offset)
        central += name
    end = struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(out), 0
    )
    return bytes(out + central + end)


def replace_member(archive: bytes, name: str, replacement: RawMember) -> bytes:
    """The archive rebuilt with one member swapped for `replacement` (others stored)."""
    members = [replacement if m.name == name else m for m in members_of(archive)]
    if not any(m is replacement for m in members):
        raise KeyError(f"no member {name!r} to replace")
    return write_zip(members)
