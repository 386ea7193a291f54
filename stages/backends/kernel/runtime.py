"""The emulated delegates at run time: kernels rebuilt from processed bytes alone, then run.

The precision the kernels emulate travels in the processed bytes and lives on the loaded
delegate (`LoadedDelegate.precision`), not on the backend object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stages.backends.backend_api import BackendError
from stages.backends.fault_injection import apply_output_fault
from stages.backends.kernel.blob import BlobTensor
from stages.backends.precision_emulation import round_to_precision, widened_weight
from stages.handles.debug_handles import DelegateIdentifier
from stages.op_encoding import bind, bind_args, decode_arg, resolve_op

# (torch op, args binder, kwargs binders, output value ids, multi-output)
KernelOp = tuple[Any, Any, dict[str, Any], list[int], bool]


@dataclass
class LoadedKernel:
    """One kernel ready to run: its ops, where its output goes, its fault (if it is the target)."""

    identifier: DelegateIdentifier
    name: str
    ops: list[KernelOp]
    output: int
    out_scale: float | None
    fault: dict[str, Any] | None
    # (op name, args binder, output value id) per op, for cost models.
    cost_ops: list[tuple[str, Any, int]]
    # fp32 for a kernel `backend.keep_float` keeps at fp32; None: the delegate's precision.
    precision: str | None = None
    # Inputs a kept-float kernel produced, rounded before this kernel reads them (vid, scale).
    round_inputs: tuple[tuple[int, float | None], ...] = ()


@dataclass
class LoadedDelegate:
    """What `init` returns: value slots, constants, kernels and the precision they emulate."""

    precision: str
    num_values: int
    constants: list[tuple[int, Any]]
    inputs: list[int]
    input_scales: list[float | None]
    outputs: list[int]
    kernels: list[LoadedKernel]
    # Per input: True when only kept-float kernels read it (it is not rounded on entry).
    inputs_kept_float: list[bool] | None = None


def _kernel(entry: dict[str, Any], identifier: DelegateIdentifier) -> LoadedKernel:
    ops: list[KernelOp] = []
    cost_ops = []
    for o in entry["ops"]:
        args = [decode_arg(a) for a in o["args"]]
        kwargs = {str(key): bind(decode_arg(v)) for key, v in o["kwargs"].items()}
        outputs = [int(v) for v in o["outputs"]]
        ops.append((resolve_op(str(o["op"])), bind_args(args), kwargs, outputs, bool(o["multi"])))
        cost_ops.append((str(o["op"]), bind_args(args), outputs[0]))
    return LoadedKernel(
        identifier=identifier,
        name=str(entry["name"]),
        ops=ops,
        output=int(entry["output"]),
        out_scale=entry.get("out_scale"),
        fault=entry.get("fault"),
        cost_ops=cost_ops,
        precision=entry.get("precision"),
        round_inputs=tuple(
            (int(vid), None if scale is None else float(scale))
            for vid, scale in (entry.get("round_inputs") or {}).items()
        ),
    )


# What reading a kernel table with a wrong field type, a missing key or a bad shape raises.
_CORRUPT_TABLE = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    OverflowError,
    RuntimeError,
)


def load_delegate(
    backend: str,
    document: dict[str, Any],
    tensors: list[BlobTensor],
    identifier_of: Callable[[dict[str, Any]], DelegateIdentifier],
) -> LoadedDelegate:
    """Rebuild kernels and constants from a decoded blob; a corrupt table is a BackendError."""
    try:
        constants = [(t.value_id, widened_weight(t.tensor, t.scales)) for t in tensors]
        kernels = [_kernel(k, identifier_of(k)) for k in document["kernels"]]
        inputs = [int(v) for v in document["inputs"]]
        return LoadedDelegate(
            precision=str(document.get("precision", "fp32")),
            num_values=int(document["num_values"]),
            constants=constants,
            inputs=inputs,
            input_scales=list(document.get("input_scales") or [None] * len(inputs)),
            outputs=[int(v) for v in document["outputs"]],
            kernels=kernels,
            inputs_kept_float=[bool(f) for f in document.get("inputs_kept_float") or []] or None,
        )
    except _CORRUPT_TABLE as exc:
        raise BackendError(
            f"{backend}: corrupt kernel table in processed bytes "
            f"({type(exc).__name__}: {str(exc)[:200]})"
        ) from exc


class _Overlay(list[Any]):
    """The value slots with some inputs replaced for one kernel; writes reach the real slots."""

    def __init__(self, values: list[Any], replaced: dict[int, Any]) -> None:
        super().__init__(values)
        self.values = values
        for vid, value in replaced.items():
            super().__setitem__(vid, value)

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        self.values[index] = value


def _with_rounded_inputs(kernel: LoadedKernel, values: list[Any], precision: str) -> list[Any]:
    replaced = {
        vid: round_to_precision(values[vid], precision, scale) for vid, scale in kernel.round_inputs
    }
    return _Overlay(values, replaced)


def run_kernel(kernel: LoadedKernel, values: list[Any], precision: str) -> None:
    """Compute the kernel's ops with torch, round its output to the precision, apply its fault."""
    if kernel.round_inputs:  # read kept-float producers' outputs as this precision stores them
        values = _with_rounded_inputs(kernel, values, precision)
    precision = kernel.precision or precision
    for fn, args, kwargs, outs, multi in kernel.ops:
        result = fn(*args(values), **{k: b(values) for k, b in kwargs.items()})
        if multi:
            for index, vid in enumerate(outs):
                if vid >= 0:
                    values[vid] = result[index]
        else:
            values[outs[0]] = result
    out = round_to_precision(values[kernel.output], precision, kernel.out_scale)
    if kernel.fault:
        out = apply_output_fault(out, kernel.fault)
    values[kernel.output] = out
