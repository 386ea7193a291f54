"""The program handed to ExecuTorch at `backend.precision`: fp32 as exported, int8 by PT2E with
ExecuTorch's XNNPACK quantizer, fp16 as a half-precision re-export.

int8: symmetric, per-channel weights, static activations calibrated on the representative inputs
(`XNNPACKQuantizer` + `get_symmetric_quantization_config(is_per_channel=True)`, `prepare_pt2e`,
one forward per sample, `convert_pt2e`, a nan fault armed, re-export). fp16: a copy of the program's module with its
parameters and buffers in half precision and its float32 pins (casts, dtype arguments, metadata
checks) in half, exported on half inputs; XNNPACK's partitioner takes fp16 ops as they are. The reference of the analysis stays the exported fp32 program.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from stages.closed_sets import Precision
from stages.lower.executorch.fault import arm_nan_faults
from stages.lower.executorch.keep_off import keep_float_filter
from stages.lower.executorch.weight_quantization import (
    LeftInFloat,
    WeightQuantizationError,
    weight_quantized_program,
)
from stages.lower.unlifted_module import unlifted_module


class ExecuTorchPrecisionError(Exception):
    """The program cannot be brought to the requested precision; names the option."""


Sample = tuple[torch.Tensor, ...]


def as_runtime_inputs(sample: Sample, precision: str) -> Sample:
    """A sample as the program at `precision` takes it: float inputs in half for fp16."""
    if precision != Precision.fp16:
        return tuple(sample)
    return tuple(t.half() if t.is_floating_point() else t for t in sample)


def program_at_precision(
    program: torch.export.ExportedProgram,
    precision: str,
    samples: Sequence[Sample],
    keep_float: frozenset[str] = frozenset(),
    group_size: int = 32,
    left_in_float: list[LeftInFloat] | None = None,
) -> torch.export.ExportedProgram:
    """The program ExecuTorch lowers at `precision` (the exported one for fp32); at int8 the
    `keep_float` ops are left unquantized (`backend.keep_float`); at 8da4w the linears left in
    float are appended to `left_in_float`."""
    if precision == Precision.fp32:
        return program
    if not samples:
        raise ExecuTorchPrecisionError(
            f"backend.precision={precision}: needs representative inputs (export.num_samples>0)"
        )
    try:
        if precision == Precision.int8:
            return _quantized(program, samples, keep_float)
        if precision == Precision.fp16:
            return _half(program, samples)
        if precision == Precision["8da4w"]:
            shapes = dynamic_shapes(program)
            quantized, left = weight_quantized_program(
                unlifted_module(program),
                precision,
                group_size,
                keep_float,
                lambda m: torch.export.export(
                    m, tuple(samples[0]), dynamic_shapes=shapes, strict=False
                ),
            )
            if left_in_float is not None:
                left_in_float.extend(left)
            return quantized
    except WeightQuantizationError as exc:
        raise ExecuTorchPrecisionError(str(exc)) from exc
    except (RuntimeError, TypeError, ValueError, AssertionError) as exc:
        raise ExecuTorchPrecisionError(
            f"backend.precision={precision}: could not convert the exported program ({exc}); "
            "use backend.precision=fp32 or an emulated backend (backend=xnnpack)"
        ) from exc
    raise ExecuTorchPrecisionError(
        f"backend.precision={precision}: choose one of {[p.value for p in Precision]}"
    )


def _quantized(
    program: torch.export.ExportedProgram, samples: Sequence[Sample], keep_float: frozenset[str]
) -> torch.export.ExportedProgram:
    """PT2E int8 with ExecuTorch's XNNPACK quantizer, calibrated on every sample; the kept-float
    ops are filtered out of the quantizer (its own exclusion mechanism)."""
    import executorch.kernels.quantized  # noqa: F401  (q/dq out variants for the portable kernels)
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True)
    )
    if keep_float:
        quantizer.set_filter_function(keep_float_filter(keep_float))
    prepared = prepare_pt2e(unlifted_module(program), quantizer)
    with torch.no_grad():
        for sample in samples:
            prepared(*sample)
    converted = arm_nan_faults(convert_pt2e(prepared))
    shapes = dynamic_shapes(program)
    return torch.export.export(converted, tuple(samples[0]), dynamic_shapes=shapes, strict=False)


def _half(
    program: torch.export.ExportedProgram, samples: Sequence[Sample]
) -> torch.export.ExportedProgram:
    """The program's module with float parameters and buffers in half, its float32 pins
    retargeted to half (`pins_to_half`), exported on half inputs."""
    module = pins_to_half(unlifted_module(program)).half()
    sample = as_runtime_inputs(samples[0], Precision.fp16)
    shapes = dynamic_shapes(program)
    return torch.export.export(module, sample, dynamic_shapes=shapes, strict=False)


def pins_to_half(module: torch.nn.Module) -> torch.nn.Module:
    """`module` (its graphs changed in place) with every float32 its ops name retargeted to
    float16: the `_assert_tensor_metadata` checks a no-op `.float()` / `.to(x.dtype)` leaves at
    export (Hugging Face rotary embeddings and RMSNorm pin float32 so), casts
    (`_to_copy(dtype=float32)` of integer positions) and dtype arguments (factories, softmax).
    The half program computes every float op in half, as a float32 pin left alone either fails
    its check or mixes float32 into half ops."""
    for graph_module in module.modules():
        if not isinstance(graph_module, torch.fx.GraphModule):
            continue
        pins: list[torch.fx.Node] = []
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and _pins_float32((node.args, node.kwargs)):
                node.args = torch.fx.node.map_aggregate(node.args, _to_half)
                node.kwargs = torch.fx.node.map_aggregate(node.kwargs, _to_half)
                pins.append(node)
        if pins:
            graph_module.recompile()
    return module


def _to_half(value: Any) -> Any:
    return torch.float16 if value is torch.float32 else value


def _pins_float32(arguments: Any) -> bool:
    found: list[Any] = []
    torch.fx.node.map_aggregate(arguments, lambda v: found.append(v) if v is torch.float32 else v)
    return bool(found)


def dynamic_shapes(program: torch.export.ExportedProgram) -> tuple[Any, ...] | None:
    """The user inputs' dynamic dimensions as `torch.export` takes them again (one `Dim` per
    symbol, its range the program's), so a re-export keeps them (a generation's token count);
    None for a static program."""
    dims: dict[Any, Any] = {}
    shapes: list[dict[int, Any] | None] = []
    user = set(program.graph_signature.user_inputs)
    for node in program.graph_module.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        spec = {}
        for index, size in enumerate(getattr(node.meta.get("val"), "shape", ())):
            if isinstance(size, torch.SymInt):
                expr = size.node.expr
                if expr not in dims:
                    bounds = program.range_constraints[expr]
                    name = f"dim{len(dims)}"
                    dims[expr] = torch.export.Dim(
                        name, min=int(bounds.lower), max=int(bounds.upper)
                    )
                spec[index] = dims[expr]
        shapes.append(spec or None)
    return tuple(shapes) if dims else None
