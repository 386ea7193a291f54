"""The emulated delegates' common machinery: fuse a partition into kernels, emulate precision.

`KernelDelegate` is the base of the xnnpack and qnn backends. AOT, it groups a partition's
nodes into kernels (conv/linear + batch norm + activation + add fuse into one), numbers them
with a DelegateMappingBuilder, quantizes weights for its precision and writes a blob. At run
time it rebuilds the kernels from that blob, computes each with torch kernels, rounds or
quantizes each kernel's output to the emulated precision and logs one event per kernel.
"""

from __future__ import annotations

import operator
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any

import torch

from stages.backends.backend_api import (
    BackendDetails,
    BackendError,
    PartitionGraph,
    PreprocessResult,
)
from stages.backends.delegate_mapping_builder import DelegateMappingBuilder
from stages.backends.kernel_blob import BlobTensor, decode_blob, encode_blob
from stages.backends.op_support import ACTIVATIONS, ADDS, ANCHORS, BATCH_NORM, NORMS_WITH_EPS
from stages.formats.debug_handles import DEBUG_HANDLE_META, DebugHandle, DelegateIdentifier
from stages.formats.fault_injection import apply_output_fault
from stages.formats.op_encoding import (
    bind,
    bind_args,
    decode_arg,
    encode_arg,
    getitem_index,
    op_name,
    resolve_op,
)
from stages.formats.tracer_protocol import EventTracerDebugLogLevel, EventTracerProtocol

INT8_MAX = 127.0
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


def _is_getitem(node: torch.fx.Node) -> bool:
    return node.target is operator.getitem


def _float_output(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    if isinstance(val, list | tuple):
        val = val[0] if val else None
    return isinstance(val, torch.Tensor) and val.is_floating_point()


@dataclass
class KernelPlan:
    """Nodes fused into one kernel, in execution order; `output` is the value it produces."""

    nodes: list[torch.fx.Node]
    output: torch.fx.Node
    handles: list[DebugHandle] = field(default_factory=list)


def _single_user(node: torch.fx.Node, members: set[torch.fx.Node]) -> torch.fx.Node | None:
    """The only user of `node` when it is in the partition and not yet in another kernel."""
    users = list(node.users)
    return users[0] if len(users) == 1 and users[0] in members else None


def plan_kernels(nodes: list[torch.fx.Node], fuse: bool = True) -> list[KernelPlan]:
    """Group a partition's op nodes into kernels; fused chains end at their last node."""
    taken: set[torch.fx.Node] = set()
    members = set(nodes)
    plans: list[KernelPlan] = []
    for node in nodes:
        if node in taken or _is_getitem(node):
            continue
        chain, current = [node], node
        members = set(nodes) - taken
        if fuse and op_name(node.target) in ANCHORS:
            nxt = _single_user(current, members)
            if nxt is not None and op_name(nxt.target) in BATCH_NORM and nxt.args[0] is current:
                getitems = [u for u in nxt.users if _is_getitem(u)]
                if not getitems:  # aten.batch_norm: one output
                    chain.append(nxt)
                    current = nxt
                elif len(getitems) == 1 and getitem_index(getitems[0]) == 0:
                    chain += [nxt, getitems[0]]
                    current = getitems[0]
            nxt = _single_user(current, members)
            if nxt is not None and op_name(nxt.target) in ACTIVATIONS and nxt.args[0] is current:
                chain.append(nxt)
                current = nxt
            nxt = _single_user(current, members)
            if nxt is not None and op_name(nxt.target) in ADDS and current in nxt.args[:2]:
                chain.append(nxt)
                current = nxt
        taken.update(chain)
        handles = sorted({int(n.meta[DEBUG_HANDLE_META]) for n in chain})
        plans.append(KernelPlan(nodes=chain, output=current, handles=handles))
    # Run each kernel where its last node stood: every input of a fused chain exists by then.
    order = {n: i for i, n in enumerate(nodes)}
    plans.sort(key=lambda p: order[p.nodes[-1]])
    return plans


def _quantize_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8, one scale per output channel (axis 0)."""
    flat = weight.detach().reshape(weight.shape[0], -1).abs().amax(dim=1).clamp(min=1e-12)
    scales = (flat / INT8_MAX).to(torch.float32)
    shape = [-1] + [1] * (weight.dim() - 1)
    q = torch.round(weight / scales.reshape(shape)).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scales


def round_to_precision(value: Any, precision: str, scale: float | None) -> Any:
    """What storing a tensor at the emulated precision does to it."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return value
    if precision == "fp16":
        return value.to(torch.float16).to(torch.float32)
    if precision == "int8" and scale:
        quantized = torch.round(value / scale).clamp(-INT8_MAX - 1, INT8_MAX) * scale
        # Masks (-inf) stay masks: NPUs keep them out of the quantized range.
        return torch.where(torch.isfinite(value), quantized, value)
    return value


@dataclass
class _Kernel:
    identifier: DelegateIdentifier
    name: str
    ops: list[tuple[Any, Any, Any, list[int], bool]]
    output: int
    out_scale: float | None
    fault: dict[str, Any] | None
    cost_ops: list[tuple[str, Any, int]]


@dataclass
class _Loaded:
    num_values: int
    constants: list[tuple[int, torch.Tensor]]
    inputs: list[int]
    input_scales: list[float | None]
    outputs: list[int]
    kernels: list[_Kernel]


class KernelDelegate(BackendDetails):
    """Common AOT + runtime of the emulated delegates; subclasses choose ops, names, logging."""

    supported_ops: frozenset[str] = frozenset()
    fuse: bool = True

    # AOT ---------------------------------------------------------------------------------
    def unsupported_reason(self, node: torch.fx.Node) -> str | None:
        if _is_getitem(node):
            return None
        try:
            name = op_name(node.target)
        except ValueError:
            return f"{node.target} is not an ATen op"
        if name not in self.supported_ops:
            return f"{name} is not supported by {self.name}"
        if not _float_output(node):
            return f"{name} produces a non-floating tensor; {self.name} delegates float ops only"
        return None

    @abstractmethod
    def kernel_name(self, op: str) -> str: ...

    @abstractmethod
    def make_identifier(
        self, builder: DelegateMappingBuilder, plan: KernelPlan
    ) -> DelegateIdentifier: ...

    def tensor_name(self, node: torch.fx.Node, consumer: torch.fx.Node) -> str:
        return str(node.name)

    def _fault_for(self, plan: KernelPlan) -> dict[str, Any] | None:
        fault = self.fault
        if not fault:
            return None
        if fault.get("node") and any(n.name == fault["node"] for n in plan.nodes):
            return dict(fault)
        if fault.get("debug_handle") is not None and int(fault["debug_handle"]) in plan.handles:
            return dict(fault)
        return None

    def preprocess(
        self, partition: PartitionGraph, compile_specs: dict[str, Any]
    ) -> PreprocessResult:
        value_ids: dict[torch.fx.Node, int] = {}
        for node in partition.inputs:
            value_ids[node] = len(value_ids)
        tensors: list[BlobTensor] = []
        member_set = set(partition.nodes)

        def value_id(node: torch.fx.Node) -> int:
            if node in value_ids:
                return value_ids[node]
            if node.op == "placeholder" and node.name in partition.constants:
                value_ids[node] = len(value_ids)
                return value_ids[node]
            raise BackendError(
                f"{self.name}: partition {partition.partition_id} reads {node.name}, which it does not own"
            )

        for plan_node in partition.nodes:  # outputs of getitems and ops, in order
            if plan_node not in value_ids:
                value_ids[plan_node] = len(value_ids)

        quantized_weights: set[str] = set()
        builder = DelegateMappingBuilder(generated_identifiers=self.generated_identifiers)
        kernels = []
        for plan in plan_kernels(partition.nodes, fuse=self.fuse):
            ops = []
            fault = self._fault_for(plan)
            for node in plan.nodes:
                if _is_getitem(node):
                    continue
                name = op_name(node.target)
                args = list(node.args)
                if fault and fault["kind"] == "epsilon" and name in NORMS_WITH_EPS:
                    index = NORMS_WITH_EPS[name]
                    args += [None] * max(0, index + 1 - len(args))
                    args[index] = float(fault.get("value", 1.5))
                if self.precision == "int8" and name in ANCHORS:
                    weight = args[2] if name == "aten.addmm.default" else args[1]
                    if isinstance(weight, torch.fx.Node) and weight.name in partition.constants:
                        quantized_weights.add(weight.name)
                getitems = [u for u in node.users if _is_getitem(u) and u in member_set]
                if getitems:
                    count = max(getitem_index(g) for g in getitems) + 1
                    outs = [-1] * count
                    for g in getitems:
                        outs[getitem_index(g)] = value_ids[g]
                    multi = True
                else:
                    outs, multi = [value_ids[node]], False
                ops.append(
                    {
                        "op": name,
                        "node": node.name,
                        "handle": int(node.meta[DEBUG_HANDLE_META]),
                        "args": [encode_arg(a, value_id) for a in args],
                        "kwargs": {k: encode_arg(v, value_id) for k, v in node.kwargs.items()},
                        "outputs": outs,
                        "multi": multi,
                        "tensor_names": [self.tensor_name(node, node)],
                    }
                )
            if (
                fault
                and fault["kind"] == "epsilon"
                and not any(o["op"] in NORMS_WITH_EPS for o in ops)
            ):
                raise BackendError(
                    f"backend.fault.kind=epsilon needs a norm op, but the faulted kernel holds "
                    f"{[o['op'] for o in ops]}; pick a layer_norm/batch_norm node or another fault kind"
                )
            identifier = self.make_identifier(builder, plan)
            scale = partition.calibration.get(plan.output.name)
            kernels.append(
                {
                    "identifier": identifier,
                    "name": self.kernel_name(str(ops[0]["op"])),
                    "ops": ops,
                    "output": value_ids[plan.output],
                    "out_scale": (scale / INT8_MAX) if scale else None,
                    "fault": fault,
                }
            )
        for node, vid in value_ids.items():
            if node.op == "placeholder" and node.name in partition.constants:
                weight = partition.constants[node.name]
                consumer = next(iter(n for n in node.users if n in member_set), node)
                name = self.tensor_name(node, consumer)
                if node.name in quantized_weights:
                    q, scales = _quantize_per_channel(weight.float())
                    tensors.append(BlobTensor(name, vid, q, scales))
                elif self.precision == "fp16" and weight.is_floating_point():
                    tensors.append(BlobTensor(name, vid, weight.to(torch.float16)))
                else:
                    tensors.append(BlobTensor(name, vid, weight))
        document = {
            "backend": self.name,
            "precision": self.precision,
            "num_values": len(value_ids),
            "inputs": [value_ids[n] for n in partition.inputs],
            "input_scales": [
                (partition.calibration.get(n.name, 0.0) / INT8_MAX) or None
                for n in partition.inputs
            ],
            "outputs": [value_ids[n] for n in partition.outputs],
            "kernels": kernels,
        }
        return PreprocessResult(encode_blob(document, tensors), builder.get_delegate_mapping())

    generated_identifiers: bool = True

    # Runtime -----------------------------------------------------------------------------
    def kernel_identifier(self, kernel: dict[str, Any]) -> DelegateIdentifier:
        """The identifier a kernel logs under (qnn re-derives it from tensor names)."""
        identifier: DelegateIdentifier = kernel["identifier"]
        return identifier

    def init(self, processed_bytes: bytes, compile_specs: dict[str, Any]) -> _Loaded:
        """The kernels and constants of processed bytes; BackendError for any corrupt field."""
        document, tensors = decode_blob(processed_bytes)
        try:
            return self._load(document, tensors)
        except _CORRUPT_TABLE as exc:
            raise BackendError(
                f"{self.name}: corrupt kernel table in processed bytes "
                f"({type(exc).__name__}: {str(exc)[:200]})"
            ) from exc

    def _load(self, document: dict[str, Any], tensors: list[Any]) -> _Loaded:
        precision = str(document.get("precision", "fp32"))
        constants = []
        for t in tensors:
            value = t.tensor
            if t.scales is not None:
                shape = [-1] + [1] * (value.dim() - 1)
                value = value.to(torch.float32) * t.scales.reshape(shape)
            elif value.dtype == torch.float16:
                value = value.to(torch.float32)
            constants.append((t.value_id, value))
        kernels = []
        for k in document["kernels"]:
            ops = []
            cost_ops = []
            for o in k["ops"]:
                fn = resolve_op(str(o["op"]))
                args = [decode_arg(a) for a in o["args"]]
                kwargs = {str(key): decode_arg(v) for key, v in o["kwargs"].items()}
                kw_binders = {key: bind(v) for key, v in kwargs.items()}
                ops.append(
                    (
                        fn,
                        bind_args(args),
                        kw_binders,
                        [int(v) for v in o["outputs"]],
                        bool(o["multi"]),
                    )
                )
                cost_ops.append((str(o["op"]), bind_args(args), int(o["outputs"][0])))
            kernels.append(
                _Kernel(
                    identifier=self.kernel_identifier(k),
                    name=str(k["name"]),
                    ops=ops,
                    output=int(k["output"]),
                    out_scale=k.get("out_scale"),
                    fault=k.get("fault"),
                    cost_ops=cost_ops,
                )
            )
        self._precision_at_runtime = precision
        return _Loaded(
            num_values=int(document["num_values"]),
            constants=constants,
            inputs=[int(v) for v in document["inputs"]],
            input_scales=list(document.get("input_scales") or [None] * len(document["inputs"])),
            outputs=[int(v) for v in document["outputs"]],
            kernels=kernels,
        )

    def log_kernel(
        self, tracer: EventTracerProtocol, kernel: _Kernel, values: list[Any], run: Any
    ) -> None:
        """Real-time logging around the kernel; qnn overrides with post-time logging."""
        entry = tracer.start_profiling_delegate(kernel.name, kernel.identifier)
        run()
        tracer.end_profiling_delegate(entry, None)

    def execute(
        self, handle: _Loaded, inputs: list[torch.Tensor], tracer: EventTracerProtocol | None
    ) -> list[torch.Tensor]:
        precision = handle_precision = getattr(self, "_precision_at_runtime", self.precision)
        values: list[Any] = [None] * handle.num_values
        for vid, value in handle.constants:
            values[vid] = value
        for vid, scale, value in zip(handle.inputs, handle.input_scales, inputs, strict=True):
            values[vid] = round_to_precision(value, precision, scale)
        capture = (
            tracer is not None
            and tracer.debug_level >= EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS
        )
        for kernel in handle.kernels:

            def run(kernel: _Kernel = kernel) -> None:
                for fn, args, kwargs, outs, multi in kernel.ops:
                    result = fn(*args(values), **{k: b(values) for k, b in kwargs.items()})
                    if multi:
                        for index, vid in enumerate(outs):
                            if vid >= 0:
                                values[vid] = result[index]
                    else:
                        values[outs[0]] = result
                out = round_to_precision(values[kernel.output], handle_precision, kernel.out_scale)
                if kernel.fault:
                    out = apply_output_fault(out, kernel.fault)
                values[kernel.output] = out

            if tracer is None:
                run()
                continue
            self.log_kernel(tracer, kernel, values, run)
            if capture:
                tracer.log_intermediate_output_delegate(
                    None, kernel.identifier, values[kernel.output]
                )
        return [values[v] for v in handle.outputs]
