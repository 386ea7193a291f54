"""A tiny ETRecord (Linear + ReLU, one sample) saved at a path, for format and handover tests."""

from __future__ import annotations

from pathlib import Path

import torch

from stages.export.debug_handle_pass import assign_debug_handles
from stages.handover.etrecord import generate_etrecord


def write_tiny_etrecord(path: Path) -> Path:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    program = torch.export.export(model, (torch.randn(1, 4),))
    assign_debug_handles(program)
    x = (torch.randn(1, 4),)
    generate_etrecord(path, program, [x], [(model(*x).detach(),)], model_name="tiny")
    return path
