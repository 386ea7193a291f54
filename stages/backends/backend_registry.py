"""Registered backend names → dotted class paths, and the precisions of the built-in ones.

Torch-free, so a config check can refuse a precision without importing a backend (and torch).
"""

from __future__ import annotations

from stages.closed_sets import Precision

REGISTERED_BACKENDS: dict[str, str] = {
    "xnnpack": "stages.backends.xnnpack.XnnpackBackend",
    "qnn": "stages.backends.qnn.QnnBackend",
    "portable": "stages.backends.portable.PortableBackend",
}

# What each built-in class's `precisions()` returns (a test keeps the two equal).
BUILTIN_PRECISIONS: dict[str, tuple[str, ...]] = {
    "stages.backends.xnnpack.XnnpackBackend": (Precision.fp32, Precision.fp16, Precision.int8),
    "stages.backends.qnn.QnnBackend": (Precision.fp16, Precision.int8, Precision.fp32),
    "stages.backends.portable.PortableBackend": (Precision.fp32, Precision.fp16, Precision.int8),
}


def builtin_precisions(name: str, target: str | None) -> tuple[str, ...] | None:
    """The precisions of a built-in backend class, or None for a user's backend."""
    dotted = target or REGISTERED_BACKENDS.get(name)
    if dotted is None:
        return None
    found = BUILTIN_PRECISIONS.get(dotted)
    return tuple(str(p) for p in found) if found is not None else None


# Built-in `_target_`s → the name they label runs with (the class's `name`; a test keeps the two
# equal), so composing a config names a built-in backend without importing it (and torch).
BUILTIN_BACKEND_NAMES: dict[str, str] = {
    **{target: name for name, target in REGISTERED_BACKENDS.items()},
    "stages.lower.executorch.lowering.xnnpack_partitioners": "executorch_xnnpack",
    "stages.lower.executorch.lowering.portable_partitioners": "executorch_portable",
}
