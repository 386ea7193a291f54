"""The exported fp32 program as the reference of an int8/fp16 program: handles by op name, a
quantize/dequantize-only handle filed under the op it serves, an injected fault's under the op it
follows, and a program that is not the source refused with the op that differs."""

from __future__ import annotations

import pytest
import torch

from stages.formats.float_reference import (
    FloatReferenceError,
    activation_qparams,
    injected_faults,
    is_qdq,
    lowered_precision,
    qdq_attribution,
    remapped,
    take_handles,
)
from stages.handles.debug_handles import DEBUG_HANDLE_META

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(600)]  # lowering on 2 shared cores


class _TwoLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def _programs() -> tuple[torch.export.ExportedProgram, torch.export.ExportedProgram]:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from stages.lower.executorch.precision import program_at_precision

    torch.manual_seed(0)
    sample = (torch.randn(2, 8),)
    fp32 = torch.export.export(_TwoLinear().eval(), sample)
    int8 = program_at_precision(fp32, "int8", [sample])
    for handle, node in enumerate(n for n in int8.graph.nodes if n.op == "call_function"):
        node.meta[DEBUG_HANDLE_META] = handle + 1  # one handle per op, as after to_edge
    return fp32, int8


def _handle(program: torch.export.ExportedProgram, name: str) -> int:
    return next(n.meta[DEBUG_HANDLE_META] for n in program.graph.nodes if n.name == name)


def test_qdq_handles_go_to_the_op_they_serve_and_ops_take_their_handles() -> None:
    fp32, int8 = _programs()
    assert lowered_precision(int8) == "int8" and lowered_precision(fp32) == "fp32"
    remap = qdq_attribution(int8)
    qdq = [n for n in int8.graph.nodes if is_qdq(n)]
    assert qdq and {n.meta[DEBUG_HANDLE_META] for n in qdq} == set(remap)
    served = {remap[n.meta[DEBUG_HANDLE_META]] for n in qdq}
    assert served == {_handle(int8, "linear"), _handle(int8, "relu"), _handle(int8, "linear_1")}
    # an op's output quantization serves that op; the input's quantize the op it feeds
    first_q = next(n for n in qdq if n.args[0].op == "placeholder" and n.args[0].name == "x")
    assert remap[first_q.meta[DEBUG_HANDLE_META]] == _handle(int8, "linear")
    last_q = next(n for n in qdq if n.args[0].name == "linear_1")
    assert remap[last_q.meta[DEBUG_HANDLE_META]] == _handle(int8, "linear_1")
    reference = take_handles(fp32, int8, "exported.pt2")
    ops = [n for n in reference.graph.nodes if n.op == "call_function"]
    assert [n.name for n in ops] == ["linear", "relu", "linear_1"]
    assert all(n.meta[DEBUG_HANDLE_META] == _handle(int8, n.name) for n in ops)
    assert remapped([1, 2, 2, 3], {1: 3}) == [3, 2, 2, 3]


def test_a_program_that_is_not_the_source_is_refused_with_the_op() -> None:
    fp32, int8 = _programs()
    node = next(n for n in fp32.graph.nodes if n.name == "relu")
    node.target = torch.ops.aten.sigmoid.default
    with pytest.raises(
        FloatReferenceError, match=r"exported\.pt2 .* op relu \(aten\.relu\.default\)"
    ):
        take_handles(fp32, int8, "exported.pt2")


def test_an_injected_fault_is_filed_under_the_op_it_follows() -> None:
    fp32, _ = _programs()
    from stages.lower.executorch.fault import insert_fault

    x = torch.randn(2, 8)
    clean = fp32.module()(x)
    faulted = insert_fault(fp32, "relu", "offset", 2.0)
    for handle, node in enumerate(n for n in faulted.graph.nodes if n.op == "call_function"):
        node.meta[DEBUG_HANDLE_META] = handle + 1
    fault = next(n for n in faulted.graph.nodes if n.name.startswith("injected_fault_"))
    assert fault.args[0].name == "relu" and [u.name for u in fault.users] == ["linear_1"]
    assert qdq_attribution(faulted) == {fault.meta[DEBUG_HANDLE_META]: _handle(faulted, "relu")}
    assert injected_faults(faulted) == [{"kind": "offset", "node": "relu"}]
    assert not torch.allclose(faulted.module()(x), clean)  # the program computes wrongly


def test_each_quantized_value_keeps_its_programs_scale_and_zero_point() -> None:
    _, int8 = _programs()
    found = activation_qparams(int8)
    quantizes = [
        n
        for n in int8.graph.nodes
        if is_qdq(n)
        and "quantize_per_tensor" in str(n.target)
        and "dequantize" not in str(n.target)
    ]
    assert quantizes and set(found) == {n.args[0].name for n in quantizes}
    assert {"x", "linear_1"} <= set(found)  # the user input's and the head's own quantization
    for node in quantizes:
        scale, zero, low, high = found[node.args[0].name]
        assert (scale, zero, low, high) == tuple(node.args[1:5]) and scale > 0 and low < high


class _Embedder(torch.nn.Module):
    """A text model's shape: integer token ids in, float weights inside."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(16, 8), torch.nn.Linear(8, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids))


def test_a_program_with_integer_inputs_is_fp16_by_its_weights() -> None:
    """Token ids in, half weights: fp16 (read as fp32 before, so the analysis took the half
    program as its own reference and expected fp32's error of it)."""
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from stages.lower.executorch.precision import program_at_precision

    ids = (torch.randint(0, 16, (1, 4)),)
    fp32 = torch.export.export(_Embedder().eval(), ids)
    assert lowered_precision(fp32) == "fp32"
    assert lowered_precision(program_at_precision(fp32, "fp16", [ids])) == "fp16"
