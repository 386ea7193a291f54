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
