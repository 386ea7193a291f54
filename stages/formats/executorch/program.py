"""ExecuTorch's flatbuffer program (`.pte`), recognised by content: the `ET` file identifier."""

from __future__ import annotations

import re

_IDENTIFIER = re.compile(rb"ET[0-9]{2}")


def is_executorch_program(head: bytes) -> bool:
    """True for ExecuTorch's program flatbuffer (file identifier `ETnn` at bytes 4..8)."""
    return len(head) >= 8 and _IDENTIFIER.fullmatch(head[4:8]) is not None


EXECUTORCH_BACKEND_PREFIX = "executorch_"


def is_executorch_backend(name: str) -> bool:
    """Backends whose lowering and runtime are ExecuTorch's own."""
    return str(name).startswith(EXECUTORCH_BACKEND_PREFIX)


# backend.precision values each ExecuTorch backend lowers (int8: PT2E, fp16: a half program).
_EXECUTORCH_PRECISIONS: dict[str, tuple[str, ...]] = {
    "executorch_xnnpack": ("fp32", "fp16", "int8", "8da4w"),
    "executorch_portable": ("fp32", "int8"),
}


def executorch_precisions(name: str) -> tuple[str, ...]:
    """The precisions an `executorch_*` backend lowers (fp32 only for one not listed)."""
    return _EXECUTORCH_PRECISIONS.get(str(name), ("fp32",))
