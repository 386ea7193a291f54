"""torch.export a model, number its operators, optionally decompose to core ATen."""

from __future__ import annotations

import traceback
from pathlib import Path

import torch
from torch import nn
from torch.export import ExportedProgram

from stages.export.debug_handle_pass import assign_debug_handles, missing_debug_handles
from stages.formats.graph_handles import restore_debug_handles


class ExportStageError(Exception):
    """torch.export could not export the model; one paragraph with the likely fix."""


def _likely_fix(message: str, strict: bool) -> str:
    lowered = message.lower()
    if "data-dependent" in lowered or "guard" in lowered or "could not guard" in lowered:
        return (
            "the model branches on tensor values in Python: rewrite that branch with torch.cond, "
            "or make the condition depend on shapes only"
        )
    if strict:
        return "retry with export.strict=false (non-strict export traces more Python)"
    return "check the model's forward for Python side effects or unsupported ops"


def export_model(
    model: nn.Module,
    sample: tuple[torch.Tensor, ...],
    *,
    strict: bool,
    decompose: bool,
    model_name: str,
    error_log: Path,
) -> ExportedProgram:
    """The exported program with a debug handle on every operator node."""
    try:
        program = torch.export.export(model, sample, strict=strict)
    except Exception as exc:
        error_log.write_text(traceback.format_exc())
        gist = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ExportStageError(
            f"torch.export could not export model '{model_name}' (export.strict={strict}): "
            f"{type(exc).__name__}: {gist}. Likely fix: {_likely_fix(str(exc), strict)}. "
            f"Full traceback: {error_log}"
        ) from exc
    assign_debug_handles(program)
    if decompose:
        program = program.run_decompositions()
        restore_debug_handles(program)
    missing = missing_debug_handles(program)
    if missing:
        # Internal invariant, not user input: every op must be numbered before lowering.
        raise ExportStageError(
            f"model '{model_name}': operator nodes without a debug handle after export: {missing[:5]}"
        )
    return program
