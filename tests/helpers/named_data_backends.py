"""A user backend of the tests' own that keeps its weights as named data (docs/delegate_authors.md):
written only against `stages.backends.api`, its processed bytes are a JSON kernel list whose
constants are keys; `init` reads them from `self.named_data_map`."""

from __future__ import annotations

import json
from typing import Any

import torch

from stages.backends.api import (
    BackendDetails,
    BackendError,
    DelegateMappingBuilder,
    EventTracerProtocol,
    NamedDataStore,
    PartitionGraph,
    PreprocessResult,
    op_name,
)

_OPS = frozenset({"aten.linear.default", "aten.relu.default"})


def _encode(arg: Any, slots: dict[str, int]) -> Any:
    if isinstance(arg, torch.fx.Node):
        return {"slot": slots[arg.name]}
    if isinstance(arg, list | tuple):
        return [_encode(a, slots) for a in arg]
    return arg


def _decode(arg: Any, values: list[Any]) -> Any:
    if isinstance(arg, dict):
        return values[arg["slot"]]
    if isinstance(arg, list):
        return [_decode(a, values) for a in arg]
    return arg


class KeyedWeightsBackend(BackendDetails):
    """linear and relu, one kernel per op; weights by key, never inside the processed bytes."""

    name = "keyed_npu"

    @classmethod
    def precisions(cls) -> tuple[str, ...]:
        return ("fp32",)

    def unsupported_reason(self, node: torch.fx.Node) -> str | None:
        try:
            return None if op_name(node.target) in _OPS else "not a keyed_npu op"
        except ValueError:
            return "not an ATen op"

    def preprocess(
        self, partition: PartitionGraph, compile_specs: dict[str, Any]
    ) -> PreprocessResult:
        names = [n.name for n in partition.inputs] + list(partition.constants)
        slots = {name: i for i, name in enumerate(names)}
        for node in partition.nodes:
            slots[node.name] = len(slots)
        store = NamedDataStore()
        constants = []
        for name, tensor in partition.constants.items():
            store.add_named_data(name, tensor.detach().contiguous())  # by reference, no copy
            dtype = str(tensor.dtype).removeprefix("torch.")
            constants.append(
                {"slot": slots[name], "key": name, "dtype": dtype, "shape": list(tensor.shape)}
            )
        builder = DelegateMappingBuilder(generated_identifiers=True)
        kernels = [
            {
                "identifier": builder.insert_delegate_mapping_entry(nodes=[node]),
                "op": op_name(node.target),
                "args": _encode(list(node.args), slots),
                "out": slots[node.name],
            }
            for node in partition.nodes
        ]
        blob = {
            "constants": constants,
            "kernels": kernels,
            "num_values": len(slots),
            "inputs": [slots[n.name] for n in partition.inputs],
            "outputs": [slots[n.name] for n in partition.outputs],
        }
        return PreprocessResult(
            json.dumps(blob).encode(),
            builder.get_delegate_mapping(),
            store.get_named_data_store_output(),
        )

    def init(self, processed_bytes: bytes, compile_specs: dict[str, Any]) -> dict[str, Any]:
        try:
            blob = json.loads(processed_bytes)
        except ValueError as exc:
            raise BackendError(f"keyed_npu: processed bytes are not JSON ({exc})") from exc
        blob["constants"] = [
            (
                c["slot"],
                self.named_data_map.get_tensor(c["key"], getattr(torch, c["dtype"]), c["shape"]),
            )
            for c in blob["constants"]
        ]
        return blob

    def execute(
        self, handle: dict[str, Any], inputs: list[torch.Tensor], tracer: EventTracerProtocol | None
    ) -> list[torch.Tensor]:
        values: list[Any] = [None] * handle["num_values"]
        for slot, tensor in handle["constants"]:
            values[slot] = tensor
        for slot, tensor in zip(handle["inputs"], inputs, strict=True):
            values[slot] = tensor
        for kernel in handle["kernels"]:
            entry = (
                tracer.start_profiling_delegate(kernel["op"], kernel["identifier"])
                if tracer
                else None
            )
            op = getattr(torch.ops.aten, kernel["op"].split(".")[1]).default
            values[kernel["out"]] = op(*_decode(kernel["args"], values))
            if tracer is not None:
                tracer.end_profiling_delegate(entry, None)
        return [values[slot] for slot in handle["outputs"]]
