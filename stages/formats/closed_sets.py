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


class FaultKind(StrEnum):
    """How a faulted kernel computes wrongly (`backend.fault.kind`)."""

    scale = "scale"
    offset = "offset"
    epsilon = "epsilon"
    nan = "nan"
    transpose = "transpose"
