"""The local re-run: a group fed exactly the reference's inputs takes the reference's values
(its ops are not run again); any other input runs them on the runtime's values."""

from __future__ import annotations

from typing import Any

import torch

from stages.analyze.compare.gap.groups import GapGroup
from stages.analyze.compare.local_rerun import rerun


class _Counted:
    """An op that counts its calls (stands in for an expensive kernel)."""

    __name__ = "counted"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * 2.0 + 1.0


def _graph(op: _Counted) -> tuple[torch.fx.Graph, torch.fx.Node, torch.fx.Node]:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(op, (x,))
    graph.output(y)
    return graph, x, y


def _run(op: _Counted, runtime_input: torch.Tensor, reference_input: torch.Tensor) -> Any:
    _, x, y = _graph(op)
    env = {x: reference_input, y: reference_input * 2.0 + 1.0}
    group = GapGroup(handles=(1,), anchor=y, nodes=[y])
    local, _ = rerun(group, env, {x: runtime_input}, fixed={})  # as the graph walk calls it
    return local, env[y]


def test_a_group_fed_the_reference_inputs_takes_the_reference_values() -> None:
    op = _Counted()
    reference = torch.linspace(-1, 1, 7)
    local, expected = _run(op, reference.clone(), reference)  # same bits, another tensor
    assert op.calls == 0
    assert local is expected


def test_a_group_fed_other_inputs_runs_its_ops_on_them() -> None:
    op = _Counted()
    reference = torch.linspace(-1, 1, 7)
    runtime = reference + 1e-3
    local, _ = _run(op, runtime, reference)
    assert op.calls == 1
    assert torch.equal(local, runtime * 2.0 + 1.0)


def test_a_nan_input_is_never_taken_for_the_reference() -> None:
    op = _Counted()
    reference = torch.tensor([1.0, float("nan")])
    local, _ = _run(op, reference.clone(), reference)
    assert op.calls == 1
    assert torch.equal(local[:1], torch.tensor([3.0]))


def _chain() -> tuple[torch.fx.Node, torch.fx.Node, torch.fx.Node]:
    """x → scaled (a delegated op whose output was not logged) → shifted (a logged portable op)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    scaled = graph.call_function(torch.ops.aten.mul.Tensor, (x, 3.7))
    shifted = graph.call_function(torch.ops.aten.add.Tensor, (scaled, 1.0))
    graph.output(shifted)
    return x, scaled, shifted


def _budget_excess(quantized: str) -> tuple[float, float]:
    """Excess dB of a runtime that quantized `scaled` to int8 (scale 0.05), the program's own
    quantize parameters naming `quantized`: with the expected error re-run over the unobserved
    upstream op, and with the group's own ops alone."""
    from stages.analyze.compare.expected_error import PrecisionEmulation, error_budget
    from stages.analyze.compare.local_rerun import emulated_upstream, note_unobserved

    x, scaled, shifted = _chain()
    inputs = torch.linspace(-3, 3, 401)
    env = {x: inputs, scaled: inputs * 3.7, shifted: inputs * 3.7 + 1.0}
    runtime = torch.round(inputs * 3.7 / 0.05).clamp(-128, 127) * 0.05 + 1.0
    group = GapGroup(handles=(2,), anchor=shifted, nodes=[shifted], is_delegated=False)
    note_unobserved(group, subst={})
    assert group.unobserved_inputs == [scaled.name] and group.unobserved_nodes == [scaled]
    names = {"scaled": scaled.name, "other": "other"}
    emulation = PrecisionEmulation("int8", qparams={names[quantized]: (0.05, 0, -128, 127)})
    upstream, exact = emulated_upstream(group, emulation)
    local, _ = rerun(group, env, {})
    emulated, _ = rerun(group, env, {}, emulation=emulation, upstream=upstream, exact=exact)
    with_chain = error_budget([runtime], [local], [emulated], "int8", 1.0)["excess_db"]
    alone = error_budget([runtime], [local], None, "int8", 1.0)["excess_db"]
    return with_chain, alone


def test_the_expected_error_covers_the_unobserved_ops_the_local_gap_holds() -> None:
    """A logged op after an unlogged int8 op: its local gap holds that op's quantization, and
    its expected error now does too (no false alarm); alone it would be far over budget."""
    with_chain, alone = _budget_excess("scaled")
    assert with_chain < 1.0
    assert alone > 10.0


def test_an_upstream_op_the_program_keeps_in_float_stays_exact() -> None:
    """The program's quantize parameters do not name the unlogged op: it ran in float, so the
    same error is still over budget (the chain gives no licence it does not have)."""
    with_chain, alone = _budget_excess("other")
    assert with_chain > 10.0 and alone > 10.0


def _delegated_producer_excess(delegated: bool, fault: float = 1.0) -> float:
    """Excess dB of a portable op (`kept`, logged: a slice of the small values) reading an
    unlogged op the lowered program delegated at int8 (`scaled`, whose scale a large value
    sets), with no PT2E quantize parameters (an emulated backend): the runtime quantized
    `scaled` at that scale (times `fault`). The floor is the pipeline's int8 default."""
    from stages.analyze.compare.expected_error import PrecisionEmulation, error_budget
    from stages.analyze.compare.local_rerun import emulated_upstream, note_unobserved
    from stages.handles.debug_handles import DEBUG_HANDLE_META

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    scaled = graph.call_function(torch.ops.aten.mul.Tensor, (x, 3.7))
    kept = graph.call_function(torch.ops.aten.slice.Tensor, (scaled, 0, 0, 401))
    graph.output(kept)
    scaled.meta[DEBUG_HANDLE_META], kept.meta[DEBUG_HANDLE_META] = 1, 2
    inputs = torch.cat([torch.linspace(-3, 3, 401), torch.tensor([100.0])])
    env = {x: inputs, scaled: inputs * 3.7, kept: (inputs * 3.7)[:401]}
    scale = float((inputs * 3.7).abs().max()) / 127
    runtime = (torch.round(inputs * 3.7 / scale) * scale * fault)[:401]
    group = GapGroup(handles=(2,), anchor=kept, nodes=[kept], is_delegated=False)
    note_unobserved(group, subst={})
    emulation = PrecisionEmulation("int8", delegated=frozenset({1} if delegated else ()))
    upstream, exact = emulated_upstream(group, emulation)
    assert (upstream == [scaled]) is delegated and kept in exact
    assert (scaled in exact) is not delegated  # off the delegate: read as given, in float
    local, _ = rerun(group, env, {})
    emulated, _ = rerun(group, env, {}, emulation=emulation, upstream=upstream, exact=exact)
    budget = error_budget([runtime], [local], [emulated] if upstream else None, "int8", 0.25)
    return budget["excess_db"]


def test_an_op_reading_an_unlogged_delegated_producer_gets_its_precision_error() -> None:
    """MobileNetV2's pad reading a BatchNorm the delegate ran at int8: the pad's expected error
    holds the BatchNorm's int8 error (before: a float budget, a false FAIL); an upstream op the
    program did not delegate gives no such licence."""
    assert _delegated_producer_excess(delegated=True) < 1.0
    assert _delegated_producer_excess(delegated=False) > 10.0


def test_a_fault_in_the_unlogged_delegated_producer_still_exceeds_it() -> None:
    assert _delegated_producer_excess(delegated=True, fault=1.5) > 10.0
