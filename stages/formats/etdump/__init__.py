"""ETDump: ExecuTorch-compatible runtime trace (size-prefixed flatbuffer, identifier 'ED00').

write_etdump(path, ETDumpData(...))        # records -> file, with the flatbuffers runtime
read_etdump(path_or_bytes) -> ETDumpData   # bounds-checked; ETDumpError on bad input
streaming.open_etdump(path) -> ETDumpData  # the same, events decoded lazily: memory bounded
read_debug_buffer(path) -> DebugBuffer      # tensor bytes + our trailer (program, sha256)
tensor_from_buffer(debug_bytes, record)    # a logged tensor from the debug buffer
"""

from stages.formats.etdump.debug_buffer import (
    DebugBuffer,
    DebugBufferError,
    DebugBufferWriter,
    parse_debug_buffer,
    read_debug_buffer,
    tensor_from_buffer,
)
from stages.formats.etdump.reader import read_etdump, read_etdump_bytes
from stages.formats.etdump.records import (
    AllocationEvent,
    DebugEvent,
    ETDumpData,
    ETDumpError,
    Event,
    ProfileEvent,
    RunData,
    ScalarType,
    TensorRecord,
    ValueRecord,
    ValueType,
)
from stages.formats.etdump.writer import write_etdump, write_etdump_bytes

__all__ = [
    "AllocationEvent",
    "DebugBuffer",
    "DebugBufferError",
    "DebugBufferWriter",
    "DebugEvent",
    "ETDumpData",
    "ETDumpError",
    "Event",
    "ProfileEvent",
    "RunData",
    "ScalarType",
    "TensorRecord",
    "ValueRecord",
    "ValueType",
    "parse_debug_buffer",
    "read_debug_buffer",
    "read_etdump",
    "read_etdump_bytes",
    "tensor_from_buffer",
    "write_etdump",
    "write_etdump_bytes",
]
