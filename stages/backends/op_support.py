"""Op sets, fusion patterns, names and the cost model of the emulated delegates."""

from __future__ import annotations

import math
from typing import Any

import torch

ANCHORS = {
    "aten.conv2d.default",
    "aten.convolution.default",
    "aten.linear.default",
    "aten.addmm.default",
}
BATCH_NORM = {"aten._native_batch_norm_legit_no_training.default", "aten.batch_norm.default"}
ACTIVATIONS = {
    "aten.relu.default",
    "aten.relu_.default",
    "aten.hardtanh.default",
    "aten.hardtanh_.default",
    "aten.gelu.default",
    "aten.sigmoid.default",
    "aten.hardswish.default",
    "aten.hardswish_.default",
    "aten.silu.default",
    "aten.silu_.default",
}
ADDS = {"aten.add.Tensor", "aten.add_.Tensor"}

CPU_STYLE_OPS = (
    ANCHORS
    | BATCH_NORM
    | ACTIVATIONS
    | ADDS
    | {
        "aten.mm.default",
        "aten.bmm.default",
        "aten.matmul.default",
        "aten.mul.Tensor",
        "aten.sub.Tensor",
        "aten.div.Tensor",
        "aten.softmax.int",
        "aten._softmax.default",
        "aten.max_pool2d.default",
        "aten.avg_pool2d.default",
        "aten.adaptive_avg_pool2d.default",
        "aten.mean.dim",
        "aten.layer_norm.default",
        "aten.native_layer_norm.default",
        "aten.permute.default",
        "aten.view.default",
        "aten.reshape.default",
        "aten._unsafe_view.default",
        "aten.flatten.using_ints",
        "aten.transpose.int",
        "aten.t.default",
        "aten.cat.default",
        "aten.clone.default",
        "aten.contiguous.default",
        "aten.squeeze.dim",
        "aten.unsqueeze.default",
        "aten.slice.Tensor",
    }
)
NPU_STYLE_OPS = CPU_STYLE_OPS | {
    "aten.rsqrt.default",
    "aten.pow.Tensor_Scalar",
    "aten.neg.default",
    "aten.select.int",
    "aten.expand.default",
    "aten.embedding.default",
    "aten.stack.default",
    # the KV cache update of a generation program: NPU runtimes keep the cache on the device
    "aten.index_copy.default",
}

_XNN_NAMES = {
    "conv2d": "Convolution (NHWC, {p})",
    "convolution": "Convolution (NHWC, {p})",
    "linear": "Fully Connected (NC, {p})",
    "addmm": "Fully Connected (NC, {p})",
    "mm": "Fully Connected (NC, {p})",
    "bmm": "Batch Matrix Multiply (NC, {p})",
    "matmul": "Batch Matrix Multiply (NC, {p})",
    "add": "Add (ND, {p})",
    "mul": "Multiply (ND, {p})",
    "sub": "Subtract (ND, {p})",
    "div": "Divide (ND, {p})",
    "softmax": "Softmax (NC, {p})",
    "_softmax": "Softmax (NC, {p})",
    "gelu": "GELU (NC, {p})",
    "relu": "Clamp (NC, {p})",
    "hardtanh": "Clamp (NC, {p})",
    "sigmoid": "Sigmoid (NC, {p})",
    "hardswish": "HardSwish (NC, {p})",
    "silu": "Swish (NC, {p})",
    "layer_norm": "Layer Norm (NC, {p})",
    "native_layer_norm": "Layer Norm (NC, {p})",
    "max_pool2d": "Max Pooling (NHWC, {p})",
    "avg_pool2d": "Average Pooling (NHWC, {p})",
    "adaptive_avg_pool2d": "Global Average Pooling (NWC, {p})",
    "mean": "Mean (ND, {p})",
    "cat": "Concatenate (ND, X32)",
    "permute": "Transpose (ND, X32)",
    "transpose": "Transpose (ND, X32)",
    "t": "Transpose (ND, X32)",
}


def base_name(op: str) -> str:
    """'aten.linear.default' → 'linear'."""
    return op.split(".")[1]


def xnnpack_kernel_name(op: str, precision: str) -> str:
    label = {"fp32": "F32", "fp16": "F16", "int8": "QS8"}[precision]
    return _XNN_NAMES.get(base_name(op), "Copy (NC, X32)").format(p=label)


def qnn_kernel_name(op: str) -> str:
    return "q::" + "".join(part.capitalize() for part in base_name(op).strip("_").split("_"))


def op_flops(op: str, inputs: list[Any], output: Any) -> int:
    """Multiply-adds ×2 for matmul-like ops, one op per output element otherwise."""
    if not isinstance(output, torch.Tensor):
        return 0
    name = base_name(op)
    if name in {"linear", "addmm", "mm", "bmm", "matmul"}:
        activation = inputs[1] if name == "addmm" else inputs[0]
        k = activation.shape[-1] if isinstance(activation, torch.Tensor) and activation.dim() else 1
        return 2 * output.numel() * int(k)
    if name in {"conv2d", "convolution"} and isinstance(inputs[1], torch.Tensor):
        weight = inputs[1]
        return 2 * output.numel() * int(math.prod(weight.shape[1:]))
    return output.numel()


def tensor_bytes(values: list[Any], element_size: int) -> int:
    return sum(v.numel() * element_size for v in values if isinstance(v, torch.Tensor))
