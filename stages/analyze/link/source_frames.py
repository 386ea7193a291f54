"""Which frame of an op's stack trace is the line that holds it.

The model-code frame is the innermost one that is not torch itself, the Python standard library,
code torch generated (`<eval_with_key>`), or a library's plumbing (transformers' `utils/`
decorators): for a Hugging Face model, the line in its modeling file. The user's own frame is the
innermost one outside any installed package (site-packages): where the user's code called in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\n\s*(?P<code>.*)')
_PACKAGES = ("/site-packages/", "/dist-packages/")
# Installed code that runs ops on a model's behalf without being the model.
_PLUMBING = (
    "/torch/",
    "/functorch/",
    "/transformers/utils/",
    "/transformers/integrations/accelerate",
)
# Generic layers a library lends to many models (transformers' Conv1D, torch's nn.Linear): their
# line is the same for every model, so the line of the module that calls them is listed too.
_LAYER_FILES = (
    "/transformers/pytorch_utils.py",
    "/transformers/activations.py",
    "/transformers/modeling_layers.py",
    "/torch/nn/modules/",
)
_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/|dist-packages/)")


@dataclass(frozen=True)
class Frame:
    """One `File ..., line N, in fn` entry and the code it shows."""

    file: str
    line: int
    function: str
    code: str

    def text(self) -> str:
        short = "/".join(self.file.split("/")[-2:])
        return f"{short}:{self.line} in {self.function}: {self.code.strip()}"


def frames(stack_trace: str) -> list[Frame]:
    return [
        Frame(m["file"], int(m["line"]), m["fn"], m["code"])
        for m in _FRAME.finditer(stack_trace or "")
    ]


def _generated(frame: Frame) -> bool:
    return frame.file.startswith("<")  # <eval_with_key>.7, <frozen importlib._bootstrap>, <string>


def is_model_code(frame: Frame) -> bool:
    """Not torch, not the standard library, not generated code, not a library's plumbing."""
    if _generated(frame) or _STDLIB.search(frame.file):
        return False
    return not any(part in frame.file for part in _PLUMBING)


def is_user_code(frame: Frame) -> bool:
    """Model code outside every installed package (the user's own files)."""
    return is_model_code(frame) and not any(p in frame.file for p in _PACKAGES)


def model_source_line(stack_trace: str) -> str:
    """The innermost model-code frame as `dir/file.py:75 in forward: x = ...` ('' if none)."""
    found = frames(stack_trace)
    if not found:
        return ""
    model = [f for f in found if is_model_code(f)]
    return (model or found)[-1].text()


def user_source_line(stack_trace: str) -> str:
    """The innermost frame of the user's own code, when it is not already the model-code line."""
    found = frames(stack_trace)
    own = [f for f in found if is_user_code(f)]
    if not own:
        return ""
    line = own[-1].text()
    return "" if line == model_source_line(stack_trace) else line


def is_layer_code(frame: Frame) -> bool:
    """A frame of a library's generic layer (transformers' Conv1D, torch's nn.Linear)."""
    return any(part in frame.file for part in _LAYER_FILES)


def owner_source_line(stack_trace: str) -> str:
    """When the model-code line is a generic library layer's, the line that calls it from the
    file defining the module owning the layer (modeling_gpt2.py's `self.c_attn(...)`); else ''."""
    model = [f for f in frames(stack_trace) if is_model_code(f) or is_layer_code(f)]
    if not model or not is_layer_code(model[-1]):
        return ""
    owner = [f for f in model if not is_layer_code(f)]
    line = owner[-1].text() if owner else ""
    return "" if line == model_source_line(stack_trace) else line
