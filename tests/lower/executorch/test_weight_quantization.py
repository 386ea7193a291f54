"""backend.precision=8da4w: torchao's scheme applied to an exported program's linears (issue
46.1). A linear whose input features the group size does not divide stays in float and is
listed; a group size that divides none is refused naming the option; the program holds plain
tensors and computes what torchao's eager quantized module computes."""

from __future__ import annotations

import pytest
import torch

from stages.lower.executorch.precision import ExecuTorchPrecisionError, program_at_precision
from stages.lower.executorch.weight_quantization import LeftInFloat

pytest.importorskip("torchao", reason="needs torchao: the executorch extra")


class ThreeLinears(torch.nn.Module):
    """64 → 128 → 48 → 10: the last linear's 48 input features are no multiple of 32."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(64, 128)
        self.b = torch.nn.Linear(128, 48)
        self.c = torch.nn.Linear(48, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def _program() -> tuple[torch.nn.Module, torch.export.ExportedProgram, torch.Tensor]:
    torch.manual_seed(0)
    model = ThreeLinears().eval()
    sample = torch.randn(3, 64)
    return model, torch.export.export(model, (sample,)), sample


def _ops(program: torch.export.ExportedProgram) -> list[str]:
    return [str(n.target) for n in program.graph.nodes if n.op == "call_function"]


def test_8da4w_quantizes_the_divisible_linears_and_lists_the_others() -> None:
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    model, program, sample = _program()
    left: list[LeftInFloat] = []
    quantized = program_at_precision(
        program, "8da4w", [(sample,)], group_size=32, left_in_float=left
    )
    assert [f.line() for f in left] == ["linear_2 (in_features 48 not divisible by group 32)"]
    ops = _ops(quantized)
    assert ops.count("torchao.choose_qparams_affine.default") == 2  # one per quantized linear
    assert not any(op.startswith("export.") for op in ops)  # no tensor subclass left
    assert all(type(t) in (torch.Tensor, torch.nn.Parameter) for t in quantized.state_dict.values())
    eager = ThreeLinears().eval()
    eager.load_state_dict(model.state_dict())
    config = Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4,  # type: ignore[attr-defined]
        weight_granularity=PerGroup(32),
    )
    quantize_(
        eager,
        config,
        filter_fn=lambda m, _: isinstance(m, torch.nn.Linear) and m.in_features % 32 == 0,
    )
    with torch.no_grad():
        assert torch.equal(quantized.module()(sample), eager(sample))
        assert not torch.equal(quantized.module()(sample), model(sample))


def test_a_group_size_that_divides_no_linear_is_refused_naming_the_option() -> None:
    _, program, sample = _program()
    with pytest.raises(
        ExecuTorchPrecisionError,
        match=r"backend.group_size=256: no linear .*in_features 64 not divisible by group 256",
    ):
        program_at_precision(program, "8da4w", [(sample,)], group_size=256)
