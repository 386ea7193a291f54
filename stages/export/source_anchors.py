"""Keep the model's own frames in the stack traces torch.export records for its ops.

Non-strict torch.export keeps only the frames of functions named `forward` in an op's stack
trace (`torch.fx.proxy`'s `_record_forward_stack_traces_only`), so an op a helper method holds
(torchvision's `forward` calls `self._forward_impl(x)`, which holds `x = self.conv(x)`) was
traced to the wrapper's line, `return self._forward_impl(x)`. torch keeps the frames of
functions registered as stack-trace anchors too: while the model is exported, every function of
the Python modules that define its module classes (their methods, and the helper functions
beside them) is one, so the innermost model-code frame of an op is the line that holds it. The
anchors are removed again afterwards. Without that torch hook (another torch), nothing changes.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn


def _is_torch(module_name: str) -> bool:
    """torch's own layers and plumbing (not torchvision, torchaudio: their models are models)."""
    return module_name == "torch" or module_name.startswith("torch.")


def _own_functions(module: types.ModuleType) -> Iterator[Any]:
    """The functions `module` defines: top-level ones and the methods of its classes."""
    for value in vars(module).values():
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            yield value
        elif inspect.isclass(value) and value.__module__ == module.__name__:
            for member in vars(value).values():
                function = getattr(member, "__func__", member)  # static and class methods
                if inspect.isfunction(function):
                    yield function


def model_code_modules(model: nn.Module) -> list[types.ModuleType]:
    """The Python modules defining the model's module classes (and their bases), torch's left out."""
    names = {
        cls.__module__
        for sub in model.modules()
        for cls in type(sub).__mro__
        if cls.__module__ != "builtins" and not _is_torch(cls.__module__)
    }
    return [sys.modules[n] for n in sorted(names) if n in sys.modules]


def _anchor_keys(functions: Iterable[Any]) -> set[tuple[str, str]]:
    keys = set()
    for function in functions:
        code = getattr(function, "__code__", None)
        if code is not None:
            keys.add((code.co_filename, code.co_name))
    return keys


@contextlib.contextmanager
def model_frames_kept(model: nn.Module) -> Iterator[None]:
    """While inside, torch.export keeps the frames of the model's own functions in stack traces."""
    anchors = getattr(torch.fx.proxy, "_STACK_TRACE_ANCHORS", None)
    if not isinstance(anchors, set):
        yield
        return
    added = _anchor_keys(f for m in model_code_modules(model) for f in _own_functions(m))
    added -= anchors
    anchors |= added
    try:
        yield
    finally:
        anchors -= added
