"""Turn the partitioned exported graph into the lowered program the run stage executes."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.backends.backend_api import PartitionGraph, PreprocessResult
from stages.backends.fault_injection import fault_hits, require_norm_for_epsilon, with_fault_eps
from stages.backends.named_data_store import merged_named_data
from stages.backends.op_support import base_name
from stages.formats.program import (
    CondInstruction,
    DelegateInstruction,
    Instruction,
    OperatorInstruction,
    Program,
    SubProgram,
)
from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.op_encoding import encode_arg, op_name, output_slots


class UnsupportedHigherOrderOpError(ValueError):
    """A higher-order op the lowered program cannot run; the message names the node."""


def _branch(gm: torch.fx.GraphModule, attr: Any, node: torch.fx.Node) -> torch.fx.GraphModule:
    """The GraphModule a cond branch argument names (a get_attr of a submodule)."""
    sub = (
        getattr(gm, str(attr.target), None)
        if isinstance(attr, torch.fx.Node) and attr.op == "get_attr"
        else None
    )
    if not isinstance(sub, torch.fx.GraphModule):
        raise UnsupportedHigherOrderOpError(
            f"torch.cond node {node.name}: branch {attr} is not a submodule of the graph"
        )
    return sub


class _Builder:
    def __init__(self, constants: dict[str, torch.Tensor], fault: dict[str, Any] | None) -> None:
        self.constants = constants
        self.used_constants: dict[str, int] = {}
        self.fault = fault
        self.next_instruction = 0

    def _instruction_id(self) -> int:
        self.next_instruction += 1
        return self.next_instruction - 1

    def sub_program(
        self,
        gm: torch.fx.GraphModule,
        partitions: list[PartitionGraph],
        results: dict[int, PreprocessResult],
        backend: str,
        compile_specs: dict[str, Any],
        top_level: bool,
    ) -> SubProgram:
        ids: dict[torch.fx.Node, int] = {}
        owner = {n: p for p in partitions for n in p.nodes}
        emitted: set[int] = set()
        inputs: list[int] = []
        instructions: list[Instruction] = []
        outputs: list[Any] = []

        def vid(node: torch.fx.Node) -> int:
            if node not in ids:
                ids[node] = len(ids)
            return ids[node]

        for node in gm.graph.nodes:
            if node.op == "placeholder":
                if top_level and node.name in self.constants:
                    if any(u not in owner for u in node.users):
                        self.used_constants[node.name] = vid(node)
                else:
                    inputs.append(vid(node))
            elif node.op == "get_attr" or node.target is operator.getitem:
                continue  # getitems are folded into their source's outputs
            elif node.op == "call_function" and node in owner:
                part = owner[node]
                if part.partition_id in emitted:
                    continue
                emitted.add(part.partition_id)
                instructions.append(
                    DelegateInstruction(
                        instruction_id=self._instruction_id(),
                        partition_id=part.partition_id,
                        backend=backend,
                        blob_member=f"delegates/{part.partition_id}.bin",
                        compile_specs=dict(compile_specs),
                        inputs=[vid(n) for n in part.inputs],
                        outputs=[vid(n) for n in part.outputs],
                    )
                )
            elif node.op == "call_function" and isinstance(
                node.target, torch._ops.HigherOrderOperator
            ):
                instructions.append(self._cond(node, gm, vid, backend, compile_specs))
            elif node.op == "call_function":
                instructions.append(self._operator(node, vid))
            elif node.op == "output":
                outputs = [encode_arg(a, vid) for a in node.args[0]]
        return SubProgram(
            num_values=len(ids), inputs=inputs, instructions=instructions, outputs=outputs
        )

    def _outputs(self, node: torch.fx.Node, vid: Any) -> tuple[list[int], bool]:
        return output_slots(node, vid)

    def _operator(self, node: torch.fx.Node, vid: Any) -> OperatorInstruction:
        name = op_name(node.target)
        fault = fault_hits(self.fault, [node])
        require_norm_for_epsilon(fault, [name], f"{node.name} is {name}")
        encoded = [encode_arg(a, vid) for a in with_fault_eps(name, list(node.args), fault)]
        outputs, multi = self._outputs(node, vid)
        return OperatorInstruction(
            instruction_id=self._instruction_id(),
            op=name,
            args=encoded,
            kwargs={k: encode_arg(v, vid) for k, v in node.kwargs.items()},
            outputs=outputs,
            multi_output=multi,
            debug_handle=int(node.meta[DEBUG_HANDLE_META]),
            name=f"native_call_{base_name(name)}.out",
            fault=fault,
        )

    def _cond(
        self,
        node: torch.fx.Node,
        gm: torch.fx.GraphModule,
        vid: Any,
        backend: str,
        specs: dict[str, Any],
    ) -> CondInstruction:
        hop = node.target.name() if isinstance(node.target, torch._ops.HigherOrderOperator) else ""
        if hop != "cond" or len(node.args) != 4:
            raise UnsupportedHigherOrderOpError(
                f"node {node.name} calls the higher-order op {hop or node.target!r}; the lowered "
                "program runs torch.cond only (the export stage inlines grad/autocast wrappers). "
                "Rewrite it with torch.cond, or export with export.decompose=true"
            )
        predicate, true_attr, false_attr, operands = node.args
        true_gm, false_gm = _branch(gm, true_attr, node), _branch(gm, false_attr, node)
        fault = fault_hits(self.fault, [node])
        require_norm_for_epsilon(fault, ["cond"], f"{node.name} is a torch.cond")
        instruction_id = self._instruction_id()
        outputs, _ = self._outputs(node, vid)
        return CondInstruction(
            instruction_id=instruction_id,
            debug_handle=int(node.meta[DEBUG_HANDLE_META]),
            predicate=vid(predicate),
            operands=[vid(o) for o in operands],  # type: ignore[union-attr]
            true_branch=self.sub_program(true_gm, [], {}, backend, specs, top_level=False),
            false_branch=self.sub_program(false_gm, [], {}, backend, specs, top_level=False),
            outputs=outputs,
            fault=fault,
        )


def build_program(
    program: ExportedProgram,
    partitions: list[PartitionGraph],
    results: dict[int, PreprocessResult],
    constants: dict[str, torch.Tensor],
    backend: str,
    compile_specs: dict[str, Any],
    fault: dict[str, Any] | None,
    metadata: dict[str, Any],
) -> Program:
    """The lowered program: operator calls, delegate calls with processed bytes, cond branches,
    and the named data of every partition (merged by key)."""
    builder = _Builder(constants, fault)
    main = builder.sub_program(
        program.graph_module, partitions, results, backend, compile_specs, top_level=True
    )
    return Program(
        main=main,
        constants=dict(builder.used_constants),
        constant_tensors={name: constants[name] for name in builder.used_constants},
        delegate_blobs={f"delegates/{pid}.bin": r.processed_bytes for pid, r in results.items()},
        metadata=metadata,
        named_data=merged_named_data((pid, r.data_store_output) for pid, r in results.items()),
    )
