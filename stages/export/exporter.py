"""torch.export a model, number its operators, optionally decompose to core ATen."""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import ExportedProgram
from torch.utils import _pytree as pytree

from stages.export.branch_sources import annotate_branch_sources
from stages.export.debug_handle_pass import assign_debug_handles, missing_debug_handles
from stages.export.input_mismatch import ModelInputsError, diagnose_inputs
from stages.export.source_anchors import model_frames_kept
from stages.handles.graph_handles import iter_operator_nodes, restore_debug_handles
from stages.paused_gc import paused_gc


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


@contextlib.contextmanager
def _quiet_fake_tensor_errors() -> Iterator[None]:
    """torch logs every failed meta kernel with its traceback before raising; the raised error
    (in export_error.log, and explained by ExportStageError) says the same."""
    fake_tensor_log = logging.getLogger("torch._subclasses.fake_tensor")
    level = fake_tensor_log.level
    fake_tensor_log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        fake_tensor_log.setLevel(level)


def plain_output_spec(program: ExportedProgram) -> None:
    """Record the outputs as a flat tuple, the way every stage reads them.

    A model's own output classes (a transformers `ModelOutput`, a registered dataclass) would
    otherwise be named in exported.pt2 and the file would not load where that class is not
    imported (a later stage, a reused cache entry)."""
    signature = program.module_call_graph[0].signature
    if signature is not None:
        count = len(program.graph_signature.user_outputs)
        signature.out_spec = pytree.tree_structure(tuple(range(count)))


def mutating_nodes(program: ExportedProgram) -> list[str]:
    """Names of operator nodes whose op writes to one of its arguments (`add_`, `copy_`, ...)."""
    return [
        node.name
        for node in iter_operator_nodes(program.graph_module)
        if isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable
    ]


_WRAPPER_HOPS = ("wrap_with_set_grad_enabled", "wrap_with_autocast")


def wrapper_nodes(program: ExportedProgram) -> list[str]:
    """Names of grad-mode/autocast wrapper calls (higher-order ops around a submodule)."""
    return [
        node.name
        for node in iter_operator_nodes(program.graph_module)
        if isinstance(node.target, torch._ops.HigherOrderOperator)
        and node.target.name() in _WRAPPER_HOPS
    ]


def export_model(
    model: nn.Module,
    sample: tuple[torch.Tensor, ...],
    *,
    strict: bool,
    decompose: bool,
    model_name: str,
    error_log: Path,
    dynamic_shapes: Any = None,
) -> ExportedProgram:
    """The exported program with a debug handle on every operator node (`dynamic_shapes` as
    torch.export takes them: a generation program's token count varies)."""
    try:
        # Tracing makes ~300,000 objects (ViT); cyclic collections meanwhile walked the tracer's
        # freshly imported modules again and again (0.16 s): they wait until it is done.
        with _quiet_fake_tensor_errors(), paused_gc(), model_frames_kept(model):
            program = torch.export.export(
                model, sample, strict=strict, dynamic_shapes=dynamic_shapes
            )
    except Exception as exc:
        error_log.write_text(traceback.format_exc())
        mismatch = diagnose_inputs(model, sample)
        if mismatch is not None:
            raise ModelInputsError(mismatch) from exc
        gist = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ExportStageError(
            f"torch.export could not export model '{model_name}' (export.strict={strict}): "
            f"{type(exc).__name__}: {gist}. Likely fix: {_likely_fix(str(exc), strict)}. "
            f"Full traceback: {error_log}"
        ) from exc
    if not decompose and (mutating_nodes(program) or wrapper_nodes(program)):
        # In-place ops (buffer updates, `relu(inplace=True)`) become functional ops and buffer
        # mutations extra outputs, as ExecuTorch's to_edge does; grad/autocast wrappers
        # (`wrap_with_set_grad_enabled`, `wrap_with_autocast`, e.g. around HF rotary embeddings)
        # are inlined. Every stage then sees values, never aliases, and plain ATen calls.
        program = program.run_decompositions({})
    plain_output_spec(program)
    assign_debug_handles(program)
    if decompose:
        program = program.run_decompositions()
        restore_debug_handles(program)
    annotate_branch_sources(program)  # cond branch ops: their function's line, not generated code
    missing = missing_debug_handles(program)
    if missing:
        # Internal invariant, not user input: every op must be numbered before lowering.
        raise ExportStageError(
            f"model '{model_name}': operator nodes without a debug handle after export: {missing[:5]}"
        )
    return program
