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
from stages.backends.fault_injection import apply_output_fault, with_fault_eps
from stages.backends.named_data_store import NamedDataMap, NamedDataStore, NamedDataStoreOutput
from stages.backends.tracer_protocol import (
    EventTracerDebugLogLevel,
    EventTracerProfilingLevel,
    EventTracerProtocol,
)
from stages.closed_sets import FaultKind
from stages.handles.debug_handles import DEBUG_HANDLE_META, DebugHandle, DelegateIdentifier
from stages.op_encoding import op_name

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
