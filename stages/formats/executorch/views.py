"""The instructions of ExecuTorch's `.pte` that only re-point a tensor (`executorch_prim::et_view`).

A program with dynamic shapes keeps its views as runtime instructions (a static one plans them
away). ExecuTorch's emitter gives them no debug handle, so the ETRecord names none of their
`OPERATOR_CALL` events: they stand for no operator of the model, as `Method::execute` does.
Read from `ExecutionPlan.chains[0].instructions[]` (`KernelCall.op_index` into `operators[]`).
"""

from __future__ import annotations

from stages.formats.executorch.delegates import MAX_TABLES, ExecuTorchProgramError
from stages.formats.executorch.program import is_executorch_program
from stages.safe_io.checked_flatbuffer import CheckedBuffer

KERNEL_CALL = 1  # InstructionArguments union: KernelCall=1, DelegateCall=2, ...
VIEW_OPERATORS = frozenset({"executorch_prim::et_view"})


def read_view_instructions(data: bytes, where: str, method: str = "forward") -> frozenset[int]:
    """The instruction ids of `method` (chain 0) that call a view operator."""
    if not is_executorch_program(data[:8]):
        raise ExecuTorchProgramError(
            f"{where}: not ExecuTorch's program (.pte): no ETnn flatbuffer identifier at bytes 4..8"
        )
    program = CheckedBuffer(data, where, ExecuTorchProgramError).root()
    plan = next((p for p in program.tables(1, MAX_TABLES) if p.string(0) == method), None)
    if plan is None:
        return frozenset()
    operators = [op.string(0) for op in plan.tables(6, MAX_TABLES)]
    chains = plan.tables(5, MAX_TABLES)
    found = set()
    for instruction_id, instruction in enumerate(chains[0].tables(2, MAX_TABLES) if chains else []):
        call = instruction.sub(1) if instruction.ubyte(0) == KERNEL_CALL else None
        index = call.int32(0) if call is not None else -1
        if 0 <= index < len(operators) and operators[index] in VIEW_OPERATORS:
            found.add(instruction_id)
    return frozenset(found)
