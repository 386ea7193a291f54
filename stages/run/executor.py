"""The emulated runtime: executes a lowered program, instruction by instruction.

Everything is resolved once at load (ops, argument binders, delegate handles), so an execution
is a tight loop. With a tracer, each operator call is a profiling event named like ExecuTorch's
(`native_call_<op>.out`, with instruction id and debug handle), each delegate call a
`DELEGATE_CALL` event around the backend's own events, each execution a `Method::execute` event.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from stages.backends.backend_api import BackendDetails, backend_class
from stages.backends.fault_injection import apply_output_fault
from stages.backends.named_data_store import NamedDataMap
from stages.backends.tracer_protocol import EventTracerDebugLogLevel, EventTracerProtocol
from stages.formats.etdump.records import DELEGATE_CALL_EVENT, METHOD_EVENT
from stages.formats.program import (
    CondInstruction,
    DelegateInstruction,
    OperatorInstruction,
    Program,
    SubProgram,
)
from stages.op_encoding import ValueRef, bind, bind_args, resolve_op

Step = Callable[[list[Any], EventTracerProtocol | None], None]


class ExecutionError(Exception):
    """The program cannot run on these inputs; the message says which instruction."""


def _capture(tracer: EventTracerProtocol | None) -> bool:
    return (
        tracer is not None and tracer.debug_level >= EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS
    )


class CompiledSub:
    """A sub-program with its steps pre-bound."""

    def __init__(self, sub: SubProgram, executor: Executor) -> None:
        self.num_values = sub.num_values
        self.inputs = sub.inputs
        self.steps = [executor.compile(i) for i in sub.instructions]
        self.output_binders = [bind(o) for o in sub.outputs]

    def run(self, values: list[Any], tracer: EventTracerProtocol | None) -> list[Any]:
        for step in self.steps:
            step(values, tracer)
        return [b(values) for b in self.output_binders]


class Executor:
    """Load-time: init every delegate from its processed bytes (the program's named data
    installed on its backend). Run-time: `execute(inputs, tracer)`."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._backends: dict[str, BackendDetails] = {}
        self._named_data_map = NamedDataMap(program.named_data)
        target = program.metadata.get("backend_target")
        name = program.metadata.get("backend")
        precision = str(program.metadata.get("precision", "fp32"))
        self._backend_factory = lambda backend: backend_class(
            backend, target if backend == name else None
        )(precision if backend == name else "fp32")
        self.main = CompiledSub(program.main, self)
        self._constants = [
            (vid, program.constant_tensors[name]) for name, vid in program.constants.items()
        ]

    def _backend(self, name: str) -> BackendDetails:
        if name not in self._backends:
            backend = self._backend_factory(name)
            backend.named_data_map = self._named_data_map  # read by its init
            self._backends[name] = backend
        return self._backends[name]

    def compile(self, instruction: Any) -> Step:
        if isinstance(instruction, OperatorInstruction):
            return self._operator(instruction)
        if isinstance(instruction, DelegateInstruction):
            return self._delegate(instruction)
        if isinstance(instruction, CondInstruction):
            return self._cond(instruction)
        raise ExecutionError(f"unknown instruction {instruction!r}")

    def _operator(self, instr: OperatorInstruction) -> Step:
        fn = resolve_op(instr.op)
        args = bind_args(instr.args)
        kwargs = {k: bind(v) for k, v in instr.kwargs.items()}
        outs, multi, fault = instr.outputs, instr.multi_output, instr.fault
        name, handle, iid = instr.name, instr.debug_handle, instr.instruction_id
        primary = outs[0]

        def compute(values: list[Any]) -> Any:
            result = (
                fn(*args(values), **{k: b(values) for k, b in kwargs.items()})
                if kwargs
                else fn(*args(values))
            )
            if multi:
                for index, vid in enumerate(outs):
                    if vid >= 0:
                        values[vid] = result[index]
            else:
                values[primary] = result
            if fault is not None and primary >= 0:
                values[primary] = apply_output_fault(values[primary], fault)
            return result

        def step(values: list[Any], tracer: EventTracerProtocol | None) -> None:
            if tracer is None:
                compute(values)
                return
            entry = tracer.start_profiling(name, 0, handle, iid)
            result = compute(values)
            tracer.end_profiling(entry)
            if _capture(tracer):
                # Every output of a multi-output op, used or not, so positions match the
                # reference's (topk's indices stay output 1 even when its values are unused).
                logged = (
                    [values[v] if v >= 0 else r for v, r in zip(outs, result, strict=False)]
                    if multi
                    else values[primary]
                )
                tracer.log_intermediate_output(handle, iid, logged)

        return step

    def _delegate(self, instr: DelegateInstruction) -> Step:
        backend = self._backend(instr.backend)
        blob = self.program.delegate_blobs.get(instr.blob_member)
        if blob is None:
            raise ExecutionError(
                f"delegate instruction {instr.instruction_id}: missing {instr.blob_member}"
            )
        handle = backend.init(blob, instr.compile_specs)
        ins, outs, iid = instr.inputs, instr.outputs, instr.instruction_id

        def step(values: list[Any], tracer: EventTracerProtocol | None) -> None:
            inputs = [values[v] for v in ins]
            if tracer is None:
                results = backend.execute(handle, inputs, None)
            else:
                entry = tracer.start_profiling(DELEGATE_CALL_EVENT, 0, 0, iid)
                results = backend.execute(handle, inputs, tracer)
                tracer.end_profiling(entry)
                if _capture(tracer):
                    # As ExecuTorch's Method logs a delegate call's values: the partition's
                    # outputs, one event each, so a delegate whose own map or outputs cannot be
                    # used is still compared as a whole.
                    for value in results:
                        tracer.log_intermediate_output(0, iid, value)
            for vid, value in zip(outs, results, strict=True):
                values[vid] = value

        return step

    def _cond(self, instr: CondInstruction) -> Step:
        true_branch = CompiledSub(instr.true_branch, self)
        false_branch = CompiledSub(instr.false_branch, self)
        pred, operands, outs = instr.predicate, instr.operands, instr.outputs
        name, handle, iid, fault = instr.name, instr.debug_handle, instr.instruction_id, instr.fault

        def step(values: list[Any], tracer: EventTracerProtocol | None) -> None:
            branch = true_branch if bool(values[pred]) else false_branch
            local: list[Any] = [None] * branch.num_values
            for vid, operand in zip(branch.inputs, operands, strict=True):
                local[vid] = values[operand]
            entry = tracer.start_profiling(name, 0, handle, iid) if tracer is not None else None
            results = branch.run(local, tracer)
            if fault is not None:
                results = [apply_output_fault(r, fault) for r in results]
            if tracer is not None and entry is not None:
                tracer.end_profiling(entry)
            if _capture(tracer):  # the cond's outputs, after its branch's own ops
                tracer.log_intermediate_output(handle, iid, list(results))  # type: ignore[union-attr]
            for vid, value in zip(outs, results, strict=True):
                if vid >= 0:
                    values[vid] = value

        return step

    def execute(
        self, inputs: Sequence[torch.Tensor], tracer: EventTracerProtocol | None = None
    ) -> list[Any]:
        """One execution of the method; outputs flattened like the exported program's."""
        main = self.main
        if len(inputs) != len(main.inputs):
            raise ExecutionError(f"program takes {len(main.inputs)} inputs, got {len(inputs)}")
        values: list[Any] = [None] * main.num_values
        for vid, tensor in self._constants:
            values[vid] = tensor
        for vid, tensor in zip(main.inputs, inputs, strict=True):
            values[vid] = tensor
        with torch.no_grad():
            if tracer is None:
                return main.run(values, None)
            entry = tracer.start_profiling(METHOD_EVENT, -1, 0, -1)
            outputs = main.run(values, tracer)
            tracer.end_profiling(entry)
        return outputs


__all__ = ["ExecutionError", "Executor", "ValueRef"]
