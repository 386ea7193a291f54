"""The debug buffer the run stage of this process has just written, for the analysis of the same
invocation: it is not read back and hashed again (245 MB at ViT-B). Handed over once, and only
for that exact, unchanged file (`written_files`)."""

from __future__ import annotations

from pathlib import Path

from stages.formats.etdump.debug_buffer import (
    TRAILER_SIZE,
    DebugBuffer,
    DebugBufferWriter,
    read_debug_buffer,
)
from stages.handover.written_files import WrittenFiles

_WRITTEN: WrittenFiles[DebugBuffer] = WrittenFiles()


def write_debug_buffer(
    writer: DebugBufferWriter, path: Path, program_fingerprint: str | None = None
) -> int:
    """Write the buffer (payload + trailer, atomically) and keep it; returns the file size."""
    _WRITTEN.keep(Path(path), writer.write(path, program_fingerprint))
    return writer.size + TRAILER_SIZE


def load_debug_buffer(path: Path) -> DebugBuffer:
    """Read and verify a debug buffer file (DebugBufferError names the file and the problem); the
    one this process has just written, unchanged, comes from memory (verified when kept)."""
    written = _WRITTEN.take(Path(path))
    if written is not None:
        return written
    return read_debug_buffer(Path(path))
