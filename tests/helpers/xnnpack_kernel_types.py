"""Which ATen ops each XNNPACK kernel family may stand for: the type-agreement check.

Independent of the recovery (which matches kernels to XNode kinds, never to ATen ops), so a
recovery that placed a kernel on the wrong op fails here. A compute kernel must name ops of its
own type (plus an activation XNNPACK fused into it); a layout kernel (transpose, reshape, copy)
must name a layout op, or an op that also has a compute kernel in the same call (ExecuTorch
decomposes `matmul` into reshapes around a batch matmul, all with matmul's handle); a kernel
of an op ExecuTorch decomposes (`scaled_dot_product_attention`) must be one of its pieces.
"""

from __future__ import annotations

import json
from typing import Any

from stages.analyze.link.xnnpack.alignment import kernel_family

ACTIVATIONS = frozenset({"relu", "relu_", "hardtanh", "hardtanh_", "clamp", "relu6"})
# A batch norm after a convolution is folded into its weights: the convolution kernel computes it.
BATCH_NORMS = frozenset({"batch_norm", "_native_batch_norm_legit_no_training"})
COMPUTE: dict[str, frozenset[str]] = {
    # XNNPACK runs a pointwise (1x1) convolution as a fully-connected GEMM
    "fullyconnected": frozenset({"linear", "addmm", "mm", "conv2d", "convolution"}),
    "batchmatrixmultiply": frozenset({"matmul", "bmm"}),
    "convolution": frozenset({"conv1d", "conv2d", "convolution"}),
    "deconvolution": frozenset({"conv_transpose2d", "convolution"}),
    "softmax": frozenset({"softmax", "_softmax"}),
    "add": frozenset({"add"}),
    "subtract": frozenset({"sub", "rsub"}),
    "multiply": frozenset({"mul"}),
    "divide": frozenset({"div"}),
    "gelu": frozenset({"gelu"}),
    "approxgelu": frozenset({"gelu"}),
    "tanh": frozenset({"tanh"}),
    "sigmoid": frozenset({"sigmoid"}),
    "hardswish": frozenset({"hardswish"}),
    "clamp": ACTIVATIONS,
    "squareroot": frozenset({"sqrt"}),
    "reciprocalsquareroot": frozenset({"rsqrt"}),
    "exp": frozenset({"exp"}),
    "negate": frozenset({"neg"}),
    "maximum": frozenset({"maximum"}),
    "minimum": frozenset({"minimum"}),
    "averagepooling": frozenset({"avg_pool2d", "adaptive_avg_pool2d"}),
    "globalaveragepooling": frozenset({"mean", "adaptive_avg_pool2d"}),
    "maxpooling": frozenset({"max_pool2d", "max_pool2d_with_indices"}),
    "constantpad": frozenset({"pad", "constant_pad_nd"}),
}
LAYOUT_KERNELS = frozenset({"transpose", "staticreshape", "copy", "slice", "fusedims", "splitdims"})
LAYOUT_OPS = frozenset(
    {
        "view",
        "reshape",
        "_unsafe_view",
        "flatten",
        "unflatten",
        "permute",
        "transpose",
        "t",
        "unsqueeze",
        "squeeze",
        "expand",
        "clone",
        "contiguous",
        "cat",
        "select",
        "slice",
        "split",
        "chunk",
        "alias",
        "dropout",  # an identity in eval: ExecuTorch runs it as a copy
    }
)
# Ops ExecuTorch decomposes at lowering, and the kernel families their pieces run as.
COMPOSITE: dict[str, frozenset[str]] = {
    "scaled_dot_product_attention": frozenset(
        {"batchmatrixmultiply", "softmax", "add", "multiply", "divide", "transpose"}
        | {"staticreshape", "copy"}
    ),
}


def op_base(op_type: str) -> str:
    """'aten.linear.default' -> 'linear'."""
    parts = op_type.split(".")
    return parts[1] if len(parts) > 2 else parts[-1]


def _ops(event: dict[str, Any]) -> set[str]:
    raw = event["op_types"]
    return {op_base(t) for t in (json.loads(raw) if isinstance(raw, str) else raw)}


def disagreements(events: list[dict[str, Any]]) -> list[str]:
    """Every recovered kernel whose ops disagree with its type, as readable lines."""
    compute_ops: dict[tuple[str, str], set[str]] = {}
    for e in events:
        family = kernel_family(str(e["delegate_debug_identifier"]))
        if e["link_source"] == "recovered" and family in COMPUTE:
            compute_ops.setdefault((e["event_block_name"], str(e["instruction_id"])), set()).update(
                _ops(e)
            )
    bad = []
    for e in events:
        if e["link_source"] != "recovered":
            continue
        family = kernel_family(str(e["delegate_debug_identifier"]))
        ops = _ops(e)
        if ops and all(family in COMPOSITE.get(op, ()) for op in ops):
            ok = True
        elif family in COMPUTE:
            own = COMPUTE[family]
            folded = ACTIVATIONS | (BATCH_NORMS if own & {"conv2d", "convolution"} else set())
            ok = bool(ops & own) and ops <= own | folded
        elif family in LAYOUT_KERNELS:
            call = compute_ops.get((e["event_block_name"], str(e["instruction_id"])), set())
            ok = bool(ops) and ops <= LAYOUT_OPS | call
        else:
            ok = False  # a kernel family this check does not know: say so
        if not ok:
            bad.append(f"{e['delegate_debug_identifier']} -> {sorted(ops)}")
    return bad
