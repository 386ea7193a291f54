"""A worked example delegate backend for docs/delegate_authors.md: an emulated NPU.

Plug it in without copying anything into the tool (see the page for the three ways):

    delegate-debugger model=mlp backend._target_=./npu_backend.py:NpuBackend

What it shows: partitioner rules (`unsupported_reason`), a fused `linear+relu` kernel, string
identifiers built with `DelegateMappingBuilder`, processed bytes that the runtime half rebuilds
kernels from (nothing else is shared between `preprocess` and `init`), real-time delegate events
with metadata bytes, delegate intermediate outputs, and `backend.fault.*` support.
Everything it imports from the tool comes from `stages.backends.api`.

`backend.compile_specs.bug=NAME` switches on one bug an author meets, to see what the tool says
of it (docs/delegate_authors.md, "Checking your backend"): `map_first_op_only` (a fused kernel
maps only its first op), `log_shifted` (kernel k's output logged under kernel k+1's
identifier), `clock_us` (post-time stamps in µs while `ticks_per_ms` says ns) and `no_outputs`
(no intermediate outputs: a partition blamed as a whole).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

import torch

from stages.backends.api import (
    BackendDetails,
    BackendError,
    DelegateIdentifier,
    DelegateMappingBuilder,
    EventTracerDebugLogLevel,
    EventTracerProtocol,
    PartitionGraph,
    PreprocessResult,
    apply_output_fault,
    with_fault_eps,
)

# Partitioner rule: the ops the NPU runs. Everything else stays an operator call of the program.
SUPPORTED_OPS = frozenset(
    {
        "aten.linear.default",
        "aten.addmm.default",
        "aten.relu.default",
        "aten.gelu.default",
        "aten.add.Tensor",
        "aten.mul.Tensor",
        "aten.layer_norm.default",
        "aten.permute.default",
        "aten.view.default",
        "aten.reshape.default",
    }
)
FUSABLE = ("aten.linear.default", "aten.addmm.default")  # ... followed by a relu: one kernel
RELU = "aten.relu.default"
# Metadata bytes on every event: ops in the kernel, elements written (parse_delegate_metadata).
_METADATA = struct.Struct("<II")
BUGS = ("map_first_op_only", "log_shifted", "clock_us", "no_outputs")
ELEMENTS_PER_US = 64  # the emulated cost model of `clock_us`: a kernel's time from its size


@dataclass
class _Kernel:
    """One kernel as the runtime rebuilds it: its ops, the value it writes, its fault."""

    name: str
    identifier: DelegateIdentifier
    ops: list[dict[str, Any]]
    output: int
    fault: dict[str, Any] | None


@dataclass
class _Loaded:
    """What `init` returns and `execute` receives: the kernels and the partition's value slots."""

    kernels: list[_Kernel]
    num_values: int
    inputs: list[int]
    outputs: list[int]
    constants: list[tuple[int, torch.Tensor]]
    bug: str = ""


def _is_float(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _group_kernels(nodes: list[torch.fx.Node]) -> list[list[torch.fx.Node]]:
    """Partition nodes (topological order) grouped into kernels: linear→relu fuses."""
    kernels: list[list[torch.fx.Node]] = []
    for node in nodes:
        previous = kernels[-1] if kernels else None
        if (
            previous is not None
            and len(previous) == 1
            and str(previous[0].target) in FUSABLE
            and str(node.target) == RELU
            and node.args[0] is previous[0]
            and len(previous[0].users) == 1
        ):
            previous.append(node)
        else:
            kernels.append([node])
    return kernels


class NpuBackend(BackendDetails):
    """An emulated NPU: fp32 kernels run with torch, one real-time event per kernel."""

    name = "npu"  # labels the run dir, events, lowering.json and MLflow
    applies_faults = True  # preprocess takes `backend.fault.*` through `self.fault_for`

    @classmethod
    def precisions(cls) -> tuple[str, ...]:
        return ("fp32",)

    # AOT half: which ops, and how a partition becomes bytes + a debug-handle map -------------
    def unsupported_reason(self, node: torch.fx.Node) -> str | None:
        op = str(node.target)
        if op not in SUPPORTED_OPS:
            return f"{op} is not an NPU op"
        if not _is_float(node):
            return f"{op} does not produce one float tensor"
        return None

    def preprocess(
        self, partition: PartitionGraph, compile_specs: dict[str, Any]
    ) -> PreprocessResult:
        bug = _bug(compile_specs)
        slots: dict[str, int] = {}
        for node in partition.inputs:
            slots[node.name] = len(slots)
        for name in partition.constants:
            slots[name] = len(slots)
        for node in partition.nodes:
            slots[node.name] = len(slots)

        def encode(arg: Any) -> Any:
            if isinstance(arg, torch.fx.Node):
                return {"value": slots[arg.name]}
            if isinstance(arg, list | tuple):
                return [encode(a) for a in arg]
            return arg

        builder = DelegateMappingBuilder(generated_identifiers=False)
        kernels = []
        for index, nodes in enumerate(_group_kernels(partition.nodes)):
            label = "+".join(str(n.target).split(".")[1] for n in nodes)
            identifier = f"npu/p{partition.partition_id}/k{index}:{label}"  # a string identifier
            # Every op of a fused kernel is mapped: the analysis ties the kernel to all of them.
            mapped = nodes[:1] if bug == "map_first_op_only" else nodes
            builder.insert_delegate_mapping_entry(nodes=mapped, identifier=identifier)
            fault = self.fault_for(nodes)  # the fault if this kernel holds its target, else None
            ops = [
                {
                    "op": str(n.target),
                    "args": encode(with_fault_eps(str(n.target), list(n.args), fault)),
                    "kwargs": {k: encode(v) for k, v in n.kwargs.items()},
                    "out": slots[n.name],
                }
                for n in nodes
            ]
            kernels.append(
                {
                    "name": f"npu_{label}",
                    "identifier": identifier,
                    "ops": ops,
                    "output": slots[nodes[-1].name],
                    "fault": fault,
                }
            )
        blob = {
            "kernels": kernels,
            "num_values": len(slots),
            "inputs": [slots[n.name] for n in partition.inputs],
            "outputs": [slots[n.name] for n in partition.outputs],
            "constants": {str(slots[k]): v.contiguous() for k, v in partition.constants.items()},
            "bug": bug,
        }
        buffer = io.BytesIO()
        torch.save(blob, buffer)
        return PreprocessResult(buffer.getvalue(), builder.get_delegate_mapping())

    # Runtime half: rebuild kernels from the bytes alone, run them, log events ----------------
    def init(self, processed_bytes: bytes, compile_specs: dict[str, Any]) -> _Loaded:
        try:
            blob = torch.load(io.BytesIO(processed_bytes), weights_only=True)
        except Exception as exc:
            raise BackendError(f"npu: processed bytes cannot be read ({exc})") from exc
        kernels = [_Kernel(**k) for k in blob["kernels"]]
        constants = [(int(k), v) for k, v in blob["constants"].items()]
        return _Loaded(
            kernels, blob["num_values"], blob["inputs"], blob["outputs"], constants, blob["bug"]
        )

    def execute(
        self, handle: _Loaded, inputs: list[torch.Tensor], tracer: EventTracerProtocol | None
    ) -> list[torch.Tensor]:
        values: list[Any] = [None] * handle.num_values
        for slot, tensor in handle.constants:
            values[slot] = tensor
        for slot, tensor in zip(handle.inputs, inputs, strict=True):
            values[slot] = tensor
        capture = (
            tracer is not None
            and tracer.debug_level >= EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS
        )
        clock = 0  # `clock_us`: the emulated NPU's own µs counter, from its cost model
        for position, kernel in enumerate(handle.kernels):
            # Real-time event: the tracer reads its own clock at start and end.
            real_time = tracer is not None and handle.bug != "clock_us"
            entry = (
                tracer.start_profiling_delegate(kernel.name, kernel.identifier)
                if real_time
                else None
            )
            _run_kernel(kernel, values)
            if tracer is None:
                continue
            output = values[kernel.output]
            metadata = _METADATA.pack(len(kernel.ops), int(output.numel()))
            if real_time:
                tracer.end_profiling_delegate(entry, metadata)
            else:  # post time, stamped in µs: wrong while ticks_per_ms says ns (the bug)
                cost = 1 + int(output.numel()) // ELEMENTS_PER_US
                tracer.log_profiling_delegate(
                    kernel.name, kernel.identifier, clock, clock + cost, metadata
                )
                clock += cost
            if capture and handle.bug != "no_outputs":
                # What the kernel computed, under the identifier the map resolves.
                ident = _logged_identifier(handle, position)
                if ident is not None:
                    tracer.log_intermediate_output_delegate(None, ident, output)
        return [values[slot] for slot in handle.outputs]

    @staticmethod
    def parse_delegate_metadata(metadata: bytes) -> dict[str, Any]:
        if len(metadata) != _METADATA.size:
            return {"raw": metadata.hex()} if metadata else {}
        ops, elements = _METADATA.unpack(metadata)
        return {"ops": ops, "elements": elements}


def _bug(compile_specs: dict[str, Any]) -> str:
    """`backend.compile_specs.bug`, checked: one of BUGS, or '' for none."""
    bug = str(compile_specs.get("bug") or "")
    if bug and bug not in BUGS:
        raise BackendError(f"npu: backend.compile_specs.bug={bug!r}: give one of {list(BUGS)}")
    return bug


def _logged_identifier(handle: _Loaded, position: int) -> DelegateIdentifier | None:
    """The identifier kernel `position` logs its output under (`log_shifted`: the next one's)."""
    if handle.bug != "log_shifted":
        return handle.kernels[position].identifier
    following = position + 1
    return handle.kernels[following].identifier if following < len(handle.kernels) else None


def _decode(arg: Any, values: list[Any]) -> Any:
    if isinstance(arg, dict) and set(arg) == {"value"}:
        return values[arg["value"]]
    if isinstance(arg, list):
        return [_decode(a, values) for a in arg]
    return arg


def _aten(name: str) -> Any:
    """'aten.linear.default' -> torch.ops.aten.linear.default."""
    _, op, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, op), overload)


def _run_kernel(kernel: _Kernel, values: list[Any]) -> None:
    for op in kernel.ops:
        args = _decode(op["args"], values)
        kwargs = {k: _decode(v, values) for k, v in op["kwargs"].items()}
        values[op["out"]] = _aten(op["op"])(*args, **kwargs)
    if kernel.fault:  # backend.fault.*: this kernel holds the target, its output is wrong
        values[kernel.output] = apply_output_fault(values[kernel.output], kernel.fault)
