"""Closed sets written into artifacts (precision, fault kind): torch-free, so config schemas use them.

Members are named by their values: Hydra matches a command-line value to a member's name.
"""

from __future__ import annotations

from enum import StrEnum


class Precision(StrEnum):
    """The numeric precision a delegate's kernels emulate (`backend.precision`)."""

    fp32 = "fp32"
    fp16 = "fp16"
    int8 = "int8"
    # int8 dynamic per-token activations, int4 weights in groups (`backend.group_size`): torchao's
    # scheme for LLMs on ExecuTorch's XNNPACK. A name that is no identifier, set as Enum allows.
    locals()["8da4w"] = "8da4w"


class ObserveMode(StrEnum):
    """How values inside a real runtime's delegates are observed (`runtime.observe`): `off`
    (what the runtime logs), `tap` (instrumented program outputs), `bisect` (prefix lowerings)."""

    off = "off"
    tap = "tap"
    bisect = "bisect"


class FaultKind(StrEnum):
    """How a faulted kernel computes wrongly (`backend.fault.kind`)."""

    scale = "scale"
    offset = "offset"
    epsilon = "epsilon"
    nan = "nan"
    transpose = "transpose"


class MapFindingKind(StrEnum):
    """What is wrong with a delegate's debug-handle map (docs/delegate_map_check.md)."""

    empty_map = "empty_map"
    uncovered_handles = "uncovered_handles"
    unknown_handles = "unknown_handles"
    shared_handles = "shared_handles"
    unmapped_identifier = "unmapped_identifier"
    no_intermediate_outputs = "no_intermediate_outputs"
    clock_mismatch = "clock_mismatch"
    shape_mismatch = "shape_mismatch"
