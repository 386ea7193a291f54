"""Zip archives read with bounds: sizes and ratios are checked before any member is inflated.

Every archive the tool reads (ETRecord, lowered program, torch.export and torch.save files) is a
zip. A hostile one can declare a member that inflates to gigabytes, overlap members so a few KB
expand many times, or carry two members of one name so two parsers see different bytes. This
module refuses all of that from the central directory alone, then reads members with `zipfile`.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

_CHUNK = 1 << 20
_LOCAL_HEADER = 30  # fixed part of a zip local file header
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}


class ZipLimitError(ValueError):
    """An archive that is not a zip, or whose declared layout breaks a limit; names the member."""


@dataclass(frozen=True)
class ZipLimits:
    """What an archive may legitimately declare.

    `max_ratio` bounds inflated / compressed size per member (stored members are 1);
    `max_total_ratio` bounds what the whole file inflates to (at least its size + 1 MiB), and
    `max_total_bytes` caps it. Every writer of these formats (torch.save, torch.export.save,
    ExecuTorch's ETRecord, this tool) stores members uncompressed, so 10x is generous.
    """

    max_members: int = 65_536
    max_ratio: float = 100.0
    max_total_ratio: float = 10.0
    max_total_bytes: int = 16 << 30


DEFAULT_LIMITS = ZipLimits()


class BoundedZip:
    """A zip opened from bytes or a file whose central directory passed the limits."""

    def __init__(self, source: bytes | Path, what: str, limits: ZipLimits = DEFAULT_LIMITS):
        """`source` is the archive's bytes, or a path: that file is kept open and read member by
        member, never whole (a torch.export archive can be gigabytes)."""
        self.what = what
        self._file: io.BufferedIOBase = (
            io.BytesIO(source) if isinstance(source, bytes) else Path(source).open("rb")  # noqa: SIM115 (closed by close(), like the zip)
        )
        try:
            self.size = self._file.seek(0, io.SEEK_END)
            self._file.seek(0)
            self._zip = zipfile.ZipFile(self._file)
            members = self._zip.infolist()
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            OSError,
            ValueError,
            EOFError,
            NotImplementedError,
        ) as exc:
            self._file.close()
            raise ZipLimitError(f"{what} is not a readable zip archive ({exc})") from exc
        try:
            _check_layout(members, self._zip.start_dir, self.size, what, limits)
            self._members: dict[str, zipfile.ZipInfo] = {}
            for info in members:
                if info.filename in self._members:
                    raise ZipLimitError(
                        f"{what} holds two members named {info.filename!r}; refusing it"
                    )
                self._members[info.filename] = info
        except ZipLimitError:
            self.close()
            raise

    def sha256(self) -> str:
        """Hex sha256 of the whole archive as opened (read in 1 MiB blocks)."""
        digest = hashlib.sha256()
        block = bytearray(_CHUNK)
        self._file.seek(0)
        while count := self._file.readinto(block):
            digest.update(memoryview(block)[:count])
        return digest.hexdigest()

    def names(self) -> list[str]:
        """Member names in archive order."""
        return list(self._members)

    def member_size(self, name: str) -> int:
        """The declared (inflated) size of a member, already checked against the limits."""
        return self._members[name].file_size

    def read(self, name: str) -> bytes:
        """A member's bytes through `zipfile` (which checks the local header's name and the CRC),
        never inflating more than the member's declared size (checked above)."""
        info = self._members.get(name)
        if info is None:
            raise ZipLimitError(f"{self.what} has no member {name!r}")
        try:
            data = self._read_bounded(info)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
            if isinstance(exc, ZipLimitError):
                raise
            raise ZipLimitError(f"{self.what} member {name} is corrupt ({exc})") from exc
        if len(data) != info.file_size:
            raise ZipLimitError(
                f"{self.what} member {name} holds {len(data)} bytes, declared {info.file_size}"
            )
        return data

    def _read_bounded(self, info: zipfile.ZipInfo) -> bytes:
        """Stored: `ZipFile.read` (reads exactly its declared bytes). Deflate: bounded reads, since
        `ZipFile.read` inflates the whole stream before cutting it to the declared size (a member
        declaring 4 KiB that inflates to 1.5 GiB took 15 s and 1.5 GiB of memory)."""
        if info.compress_type == zipfile.ZIP_STORED:
            return self._zip.read(info)
        out = bytearray()
        with self._zip.open(info) as fh:
            while chunk := fh.read(min(_CHUNK, info.file_size - len(out) + 1)):
                out += chunk
                if len(out) > info.file_size:
                    raise ZipLimitError(
                        f"{self.what} member {info.filename} inflates beyond its declared "
                        f"{info.file_size} bytes; refusing it"
                    )
        return bytes(out)

    def file_status(self) -> os.stat_result | None:
        """os.fstat of the open file (None when opened from bytes): which file was opened."""
        return None if isinstance(self._file, io.BytesIO) else os.fstat(self._file.fileno())

    def close(self) -> None:
        self._zip.close()
        self._file.close()

    def __enter__(self) -> BoundedZip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_layout(
    members: list[zipfile.ZipInfo], start_dir: int, size: int, what: str, limits: ZipLimits
) -> None:
    """Refuse counts, methods, sizes, ratios and overlaps before anything is inflated."""
    if len(members) > limits.max_members:
        raise ZipLimitError(
            f"{what} declares {len(members)} members (limit {limits.max_members}); refusing it"
        )
    total = 0
    for info in members:
        name = info.filename
        if info.compress_type not in _METHODS:
            raise ZipLimitError(
                f"{what} member {name} uses zip compression method {info.compress_type}; only "
                "stored and deflate members are read"
            )
        if info.flag_bits & 0x1:
            raise ZipLimitError(f"{what} member {name} is encrypted; refusing it")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise ZipLimitError(
                f"{what} member {name} is stored but declares {info.file_size} bytes inflated "
                f"and {info.compress_size} on disk; refusing it"
            )
        if ratio > limits.max_ratio and info.file_size > _CHUNK:
            raise ZipLimitError(
                f"{what} member {name} would inflate {info.compress_size} bytes to "
                f"{info.file_size} (ratio {ratio:.0f} > {limits.max_ratio:.0f}): a zip bomb "
                "or a file this tool did not write; refusing it before inflating"
            )
        total += info.file_size
    budget = min(limits.max_total_bytes, max(int(limits.max_total_ratio * size), size + _CHUNK))
    if total > budget:
        raise ZipLimitError(
            f"{what} declares {total} bytes in total for a {size}-byte file (limit {budget}); "
            "refusing it before inflating"
        )
    _check_no_overlap(members, start_dir, what)


def _check_no_overlap(members: list[zipfile.ZipInfo], start_dir: int, what: str) -> None:
    """Each member's data must end before the next member (or the directory) begins."""
    ordered = sorted(members, key=lambda m: m.header_offset)
    bounds = [m.header_offset for m in ordered[1:]] + [start_dir]
    for info, limit in zip(ordered, bounds, strict=True):
        name_bytes = (
            len(info.orig_filename.encode()) if info.flag_bits & 0x800 else len(info.orig_filename)
        )
        end = info.header_offset + _LOCAL_HEADER + name_bytes + info.compress_size
        if info.header_offset < 0 or end > limit:
            raise ZipLimitError(
                f"{what} member {info.filename} overlaps the next member or the directory "
                "(an overlapping-member zip bomb or a corrupt file); refusing it"
            )
