"""The emulated delegates ahead of time: one partition -> processed bytes + debug-handle map.

Kernels come from `kernel_plan`; each op is encoded with value ids local to the partition,
weights are stored at the delegate's precision in the program's named data (referred to by key,
not copied), and a targeted kernel carries its fault.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, Protocol

import torch

from stages.backends.backend_api import BackendError, PartitionGraph, PreprocessResult
from stages.backends.delegate_mapping_builder import DelegateMappingBuilder
from stages.backends.fault_injection import (
    FaultTargetError,
    require_norm_for_epsilon,
    with_fault_eps,
)
from stages.backends.kept_float import kept_float_inputs, with_keep_float
from stages.backends.kernel.blob import BlobTensor, encode_blob
from stages.backends.kernel.plan import KernelPlan, is_getitem, plan_kernels
from stages.backends.named_data_store import NamedDataStore
from stages.backends.op_support import ANCHORS
from stages.backends.precision_emulation import int8_scale, stored_weight
from stages.closed_sets import Precision
from stages.formats.named_data import KEY_PATTERN, MAX_KEY_LENGTH
from stages.handles.debug_handles import DEBUG_HANDLE_META, DelegateIdentifier
from stages.op_encoding import encode_arg, op_name, output_slots


class KernelDelegateHooks(Protocol):
    """What a delegate decides while its partitions are preprocessed (names and identifiers)."""

    @property
    def name(self) -> str: ...
    @property
    def precision(self) -> str: ...
    def fault_for(self, nodes: Iterable[torch.fx.Node]) -> dict[str, Any] | None: ...
    @property
    def generated_identifiers(self) -> bool: ...
    def tensor_name(self, node: torch.fx.Node, consumer: torch.fx.Node) -> str: ...
    def kernel_name(self, op: str) -> str: ...
    def make_identifier(
        self, builder: DelegateMappingBuilder, plan: KernelPlan
    ) -> DelegateIdentifier: ...


class _ValueIds:
    """Value slots of a partition: its inputs, then its nodes, then constants as ops read them."""

    def __init__(self, backend: str, partition: PartitionGraph) -> None:
        self.backend = backend
        self.partition = partition
        self.members = set(partition.nodes)
        self.ids: dict[torch.fx.Node, int] = {}
        for node in [*partition.inputs, *partition.nodes]:
            self.ids.setdefault(node, len(self.ids))

    def of(self, node: torch.fx.Node) -> int:
        if node in self.ids:
            return self.ids[node]
        if node.op == "placeholder" and node.name in self.partition.constants:
            self.ids[node] = len(self.ids)
            return self.ids[node]
        raise BackendError(
            f"{self.backend}: partition {self.partition.partition_id} reads {node.name}, "
            "which it does not own"
        )


def _op_entry(
    delegate: KernelDelegateHooks,
    node: torch.fx.Node,
    ids: _ValueIds,
    fault: dict[str, Any] | None,
    quantized: set[str],
) -> dict[str, Any]:
    """One op of a kernel; notes the weights an int8 anchor op reads (they get quantized)."""
    name = op_name(node.target)
    args = with_fault_eps(name, list(node.args), fault)
    kept = node.name in ids.partition.keep_float
    if delegate.precision == Precision.int8 and name in ANCHORS and not kept:
        weight = args[2] if name == "aten.addmm.default" else args[1]
        if isinstance(weight, torch.fx.Node) and weight.name in ids.partition.constants:
            quantized.add(weight.name)
    outputs, multi = output_slots(node, ids.ids.__getitem__, members=ids.members)
    return {
        "op": name,
        "node": node.name,
        "handle": int(node.meta[DEBUG_HANDLE_META]),
        "args": [encode_arg(a, ids.of) for a in args],
        "kwargs": {k: encode_arg(v, ids.of) for k, v in node.kwargs.items()},
        "outputs": outputs,
        "multi": multi,
        "tensor_names": [delegate.tensor_name(node, node)],
    }


def _kernel_entry(
    delegate: KernelDelegateHooks,
    plan: KernelPlan,
    ids: _ValueIds,
    builder: DelegateMappingBuilder,
    quantized: set[str],
) -> dict[str, Any]:
    fault = delegate.fault_for(plan.nodes)
    ops = [_op_entry(delegate, n, ids, fault, quantized) for n in plan.nodes if not is_getitem(n)]
    names = [str(o["op"]) for o in ops]
    try:
        require_norm_for_epsilon(fault, names, f"the faulted kernel holds {names}")
    except FaultTargetError as exc:
        raise BackendError(str(exc)) from exc
    entry = {
        "identifier": delegate.make_identifier(builder, plan),
        "name": delegate.kernel_name(names[0]),
        "ops": ops,
        "output": ids.ids[plan.output],
        "out_scale": int8_scale(ids.partition.calibration.get(plan.output.name)),
        "fault": fault,
    }
    return with_keep_float(entry, plan, ids.partition, ids.ids)


def weight_key(constant: str, stored: torch.Tensor, quantized: bool) -> str:
    """The named-data key of a constant as stored: its program-wide placeholder name plus the
    stored form (`.fp16`, `.int8`), so equal keys always carry equal bytes across partitions."""
    form = ".int8" if quantized else (".fp16" if stored.dtype == torch.float16 else "")
    base = constant
    if not KEY_PATTERN.fullmatch(base) or len(base) + len(".int8.scales") > MAX_KEY_LENGTH:
        base = "constant_" + hashlib.sha256(constant.encode()).hexdigest()[:32]
    return base + form


def _blob_tensors(
    delegate: KernelDelegateHooks, ids: _ValueIds, quantized: set[str]
) -> list[BlobTensor]:
    """The constants the partition reads, stored at the delegate's precision."""
    tensors = []
    for node, vid in ids.ids.items():
        if node.op != "placeholder" or node.name not in ids.partition.constants:
            continue
        consumer = next(iter(n for n in node.users if n in ids.members), node)
        weight = ids.partition.constants[node.name]
        quantize = node.name in quantized
        readers = [n for n in node.users if n in ids.members]
        kept = bool(readers) and all(n.name in ids.partition.keep_float for n in readers)
        precision = Precision.fp32 if kept else delegate.precision
        tensor, scales = stored_weight(weight, precision, quantize)
        key = weight_key(node.name, tensor, quantize)
        tensors.append(BlobTensor(delegate.tensor_name(node, consumer), vid, tensor, scales, key))
    return tensors


def preprocess_partition(
    delegate: KernelDelegateHooks, partition: PartitionGraph, fuse: bool
) -> PreprocessResult:
    """Kernels, constants and the identifier -> handles map of one partition, as bytes."""
    ids = _ValueIds(delegate.name, partition)
    builder = DelegateMappingBuilder(generated_identifiers=delegate.generated_identifiers)
    quantized: set[str] = set()
    kernels = [
        _kernel_entry(delegate, plan, ids, builder, quantized)
        for plan in plan_kernels(partition.nodes, fuse=fuse, keep_float=partition.keep_float)
    ]
    document = {
        "backend": delegate.name,
        "precision": delegate.precision,
        "num_values": len(ids.ids),
        "inputs": [ids.ids[n] for n in partition.inputs],
        "input_scales": [int8_scale(partition.calibration.get(n.name)) for n in partition.inputs],
        "inputs_kept_float": kept_float_inputs(partition),
        "outputs": [ids.ids[n] for n in partition.outputs],
        "kernels": kernels,
    }
    tensors = _blob_tensors(delegate, ids, quantized)
    store = NamedDataStore()
    blob = encode_blob(document, tensors, store)
    return PreprocessResult(
        blob, builder.get_delegate_mapping(), store.get_named_data_store_output()
    )
