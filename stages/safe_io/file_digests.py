"""sha256 of files, computed at most once per process: the stages and the stage cache ask for
the digests of the same big files (exported.pt2, debug.bin) many times in one invocation.

A digest is kept under the file's identity on disk, (st_dev, st_ino, st_size, st_mtime_ns), so
hard links (the stage cache links files into run dirs) share it, and a rewritten file gets a new
key: an atomic write makes a new inode, an in-place write moves the mtime. A digest read from a
file whose mtime is too recent for that to hold (a write within the same timestamp tick keeps
the mtime) is used once and not kept. Digests of bytes this process has just written atomically
(`record_written`) are kept: the file is a new inode nobody else has written yet.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path

_CHUNK = 1 << 20
MAX_KEPT = 4096  # digests kept (a few hundred bytes each), least recently used dropped first
# A write within this long after a file's mtime may leave the mtime unchanged: kernels without
# fine-grained timestamps advance them once per tick (<= 10 ms), some file systems per second.
_TICK_NS = 10_000_000
_COARSE_TICK_NS = 2_000_000_000

FileKey = tuple[int, int, int, int]

_lock = threading.Lock()
_digests: OrderedDict[FileKey, str] = OrderedDict()


def file_key(status: os.stat_result) -> FileKey:
    """The identity a digest is kept under: device, inode, size and mtime in nanoseconds."""
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def _settled(status: os.stat_result, since_ns: int) -> bool:
    """Whether any write after `since_ns` must change the file's mtime (see module docstring)."""
    mtime = status.st_mtime_ns
    tick = _COARSE_TICK_NS if mtime % 1_000_000_000 == 0 else _TICK_NS
    return since_ns - mtime > tick


def _known(key: FileKey) -> str | None:
    with _lock:
        digest = _digests.get(key)
        if digest is not None:
            _digests.move_to_end(key)
        return digest


def _keep(key: FileKey, digest: str) -> None:
    with _lock:
        _digests[key] = digest
        _digests.move_to_end(key)
        while len(_digests) > MAX_KEPT:
            _digests.popitem(last=False)


def known_sha256(path: Path) -> str | None:
    """The kept digest of the file at `path` as it is now, or None (never reads the file)."""
    try:
        return _known(file_key(os.stat(path)))
    except OSError:
        return None


def known_sha256_of(status: os.stat_result) -> str | None:
    """The kept digest of the file with this status (of an open file: no race with renames)."""
    return _known(file_key(status))


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes; each file version is read once per process."""
    with open(path, "rb") as fh:
        before = os.fstat(fh.fileno())
        key = file_key(before)
        found = _known(key)
        if found is not None:
            return found
        started = time.time_ns()
        digest = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
        after = os.fstat(fh.fileno())
    hexdigest = digest.hexdigest()
    if file_key(after) == key and _settled(after, started):
        _keep(key, hexdigest)
    return hexdigest


def read_with_sha256(path: Path) -> tuple[bytes, str]:
    """A file's bytes and their sha256 (kept like `file_sha256`'s; hashed only when unknown)."""
    with open(path, "rb") as fh:
        before = os.fstat(fh.fileno())
        started = time.time_ns()
        data = fh.read()
        after = os.fstat(fh.fileno())
    key = file_key(after)
    found = _known(key) if key == file_key(before) else None
    if found is not None:
        return data, found
    hexdigest = hashlib.sha256(data).hexdigest()
    if key == file_key(before) and _settled(after, started):
        _keep(key, hexdigest)
    return data, hexdigest


def sha256_of_new_file(path: Path) -> tuple[os.stat_result, str] | None:
    """The status and sha256 of a file this process has just written, for `record_written`;
    None for a hard link to an existing file (not new: hashed like any other when asked)."""
    with open(path, "rb") as fh:
        status = os.fstat(fh.fileno())
        if status.st_nlink > 1:
            return None
        digest = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return status, digest.hexdigest()


def record_written(status: os.stat_result, digest: str) -> None:
    """Keep the digest of bytes this process wrote to a new file, by that file's status."""
    _keep(file_key(status), digest)


def forget_all() -> None:
    """Drop every kept digest (tests; a long-lived process that wants to re-read everything)."""
    with _lock:
        _digests.clear()
