"""Measure what refusing hostile files costs, in a fresh process: `python -m ... spec.json`.

The spec names warm-up loads (clean files, so lazy imports and caches are paid before measuring)
and hostile cases (loader, file, the error it must raise). Prints one JSON document: per case the
bytes zlib inflated (the work done, whatever the machine's load), the elapsed seconds (for
people; no test bounds them), the error raised and the peak RSS so far; the resident set just before the
first case and the peak since then (bytes): Linux's peak (VmHWM) is reset after the warm-ups, so
their own peak does not hide or inflate what the cases took.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import zlib
from pathlib import Path
from typing import Any


class _InflateCounter:
    """Every byte any zlib decompressor of this process hands out (zipfile's included)."""

    total = 0
    _original = zlib.decompressobj

    @classmethod
    def install(cls) -> None:
        def counting(*args: Any, **kwargs: Any) -> Any:
            return _CountingDecompressor(cls._original(*args, **kwargs))

        zlib.decompressobj = counting  # type: ignore[assignment]


class _CountingDecompressor:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        out = self._inner.decompress(data, max_length)
        _InflateCounter.total += len(out)
        return out  # type: ignore[no-any-return]

    def flush(self, *args: Any) -> bytes:
        out = self._inner.flush(*args)
        _InflateCounter.total += len(out)
        return out  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _resolve(dotted: str) -> Any:
    """`package.module:Name.attr` -> the object."""
    module, _, names = dotted.partition(":")
    found: Any = importlib.import_module(module)
    for name in names.split("."):
        found = getattr(found, name)
    return found


def _status_bytes(field: str) -> int:
    """A `kB` field of /proc/self/status in bytes (VmRSS now, VmHWM the peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def peak_rss_bytes() -> int:
    """Peak resident set size since the process started or since `reset_peak_rss`."""
    return _status_bytes("VmHWM")


def current_rss_bytes() -> int:
    return _status_bytes("VmRSS")


def reset_peak_rss() -> None:
    """Linux >= 4.0: writing 5 to clear_refs resets VmHWM to the current resident set."""
    Path("/proc/self/clear_refs").write_text("5")


def inflate_largest_member(path: Path, limit: int = 300 << 20) -> None:
    """The control: what reading a bomb without bounds costs (up to `limit` bytes inflated)."""
    import zipfile

    with (
        zipfile.ZipFile(path) as archive,
        archive.open(max(archive.infolist(), key=lambda i: i.file_size)) as member,
    ):
        inflated = member.read(limit)
    raise ValueError(f"{path}: inflated {len(inflated)} bytes unchecked")


def _case(case: dict[str, Any]) -> dict[str, Any]:
    loader, expected = _resolve(case["loader"]), _resolve(case["error"])
    inflated_before = _InflateCounter.total
    started = time.perf_counter()
    try:
        loader(Path(case["path"]))
        error, message = None, ""
    except Exception as exc:  # the caller checks the type; anything is reported, not raised
        error, message = exc, str(exc)
    elapsed = time.perf_counter() - started
    return {
        "name": case["name"],
        "seconds": elapsed,
        "inflated_bytes": _InflateCounter.total - inflated_before,
        "error": type(error).__name__ if error is not None else None,
        "expected_error": isinstance(error, expected),
        "message": message[:400],
        "peak_rss": peak_rss_bytes(),
    }


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    _InflateCounter.install()
    for warm in spec["warmups"]:
        _resolve(warm["loader"])(Path(warm["path"]))
    reset_peak_rss()
    before = current_rss_bytes()
    results = [_case(c) for c in spec["cases"]]
    print(json.dumps({"cases": results, "rss_before_cases": before, "peak_rss": peak_rss_bytes()}))


if __name__ == "__main__":
    main(sys.argv[1])
