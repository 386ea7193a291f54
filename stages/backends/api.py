"""The public surface for delegate backend authors: import everything a backend needs from here.

This module's names stay put when the internals move (docs/delegate_authors.md documents each).
"""

from __future__ import annotations

from stages.backends.backend_api import (
    BackendDetails,
    BackendError,
    PartitionGraph,
    PreprocessResult,
)
from stages.backends.delegate_mapping_builder import DelegateMappingBuilder, DelegateMappingError
from stages.backends.named_data_store import NamedDataMap, NamedDataStore, NamedDataStoreOutput
from stages.formats.closed_sets import FaultKind
from stages.formats.debug_handles import DEBUG_HANDLE_META, DebugHandle, DelegateIdentifier
from stages.formats.fault_injection import apply_output_fault, with_fault_eps
from stages.formats.op_encoding import op_name
from stages.formats.tracer_protocol import (
    EventTracerDebugLogLevel,
    EventTracerProfilingLevel,
    EventTracerProtocol,
)

__all__ = [
    "DEBUG_HANDLE_META",
    "BackendDetails",
    "BackendError",
    "DebugHandle",
    "DelegateIdentifier",
    "DelegateMappingBuilder",
    "DelegateMappingError",
    "EventTracerDebugLogLevel",
    "EventTracerProfilingLevel",
    "EventTracerProtocol",
    "FaultKind",
    "NamedDataMap",
    "NamedDataStore",
    "NamedDataStoreOutput",
    "PartitionGraph",
    "PreprocessResult",
    "apply_output_fault",
    "op_name",
    "with_fault_eps",
]
