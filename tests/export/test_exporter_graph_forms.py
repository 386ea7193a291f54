"""Graph forms users' models export to (issue 12.2): grad/autocast wrappers, in-place ops and
buffer updates, model-defined output classes; other higher-order ops get a clear error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig, OmegaConf
from torch.export.graph_signature import OutputKind
from torch.utils import _pytree as pytree

from stages.export.exporter import export_model
from stages.export.reference_capture import program_outputs
from stages.formats.exported_program import save_exported_program
from stages.handover.exported_program import load_exported_program
from stages.lower.program_builder import UnsupportedHigherOrderOpError
from stages.lower.stage import run_lower


def _export(
    model: torch.nn.Module, tmp_path: Path, *sample: torch.Tensor
) -> torch.export.ExportedProgram:
    return export_model(
        model.eval(),
        sample,
        strict=False,
        decompose=False,
        model_name="m",
        error_log=tmp_path / "log",
    )


class Wrapped(torch.nn.Module):
    """HF-style: a region under `torch.autocast(enabled=False)`, one under `torch.no_grad()`."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", enabled=False):
            y = self.fc(x).float()
        with torch.no_grad():
            return y.sin()


def test_grad_and_autocast_wrappers_are_inlined_with_a_handle_per_op(tmp_path: Path) -> None:
    raw = torch.export.export(Wrapped().eval(), (torch.randn(2, 4),))
    assert {"wrap_with_autocast", "wrap_with_set_grad_enabled"} <= {
        str(n.target) for n in raw.graph.nodes
    }
    program = _export(Wrapped(), tmp_path, torch.randn(2, 4))
    ops = [n for n in program.graph.nodes if n.op == "call_function"]
    assert not any(isinstance(n.target, torch._ops.HigherOrderOperator) for n in ops)
    assert [n.meta["debug_handle"] for n in ops] == list(range(1, len(ops) + 1))


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return torch.relu_(self.fc(x)) * self.count


def test_in_place_ops_become_functional_and_buffer_updates_outputs(tmp_path: Path) -> None:
    program = _export(Counter(), tmp_path, torch.randn(2, 4))
    mutable = [
        n.name
        for n in program.graph.nodes
        if isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable
    ]
    assert mutable == []
    kinds = [s.kind for s in program.graph_signature.output_specs]
    assert kinds == [OutputKind.BUFFER_MUTATION, OutputKind.USER_OUTPUT]
    x = torch.randn(2, 4)
    first, second = program_outputs(program, (x,)), program_outputs(program, (x,))
    assert float(first[0]) == float(second[0]) == 1.0  # each run starts from the initial buffer
    assert float(program.state_dict["count"]) == 0.0


@dataclass
class Prediction:
    logits: torch.Tensor
    best: torch.Tensor


pytree.register_dataclass(Prediction)


class ReturnsItsOwnClass(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Prediction:
        return Prediction(x * 2, x.argmax(-1))


def test_a_model_defined_output_class_is_not_needed_to_load(tmp_path: Path) -> None:
    program = _export(ReturnsItsOwnClass(), tmp_path, torch.randn(2, 4))
    path = tmp_path / "exported.pt2"
    save_exported_program(program, path)
    assert "Prediction" not in str(program.module_call_graph[0].signature.out_spec)
    loaded = load_exported_program(path.read_bytes())
    assert len(program_outputs(loaded, (torch.randn(2, 4),))) == 2


class Loop(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.while_loop import while_loop

        start = torch.zeros((), dtype=torch.int64)
        return while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2), (start, x))[1]


def test_other_higher_order_ops_are_refused_naming_the_node(
    tmp_path: Path, make_cfg: Callable[..., DictConfig]
) -> None:
    program = _export(Loop(), tmp_path, torch.randn(2, 4))
    save_exported_program(program, tmp_path / "exported.pt2")
    torch.save([(torch.randn(2, 4),)], tmp_path / "inputs.pt")
    torch.save([program_outputs(program, (torch.randn(2, 4),))], tmp_path / "reference_outputs.pt")
    backend = OmegaConf.to_object(make_cfg("backend=portable").backend)
    with pytest.raises(UnsupportedHigherOrderOpError, match=r"while_loop.*torch\.cond only"):
        run_lower(
            backend,
            tmp_path / "exported.pt2",
            tmp_path / "inputs.pt",
            tmp_path / "reference_outputs.pt",
            tmp_path,
            model_name="loop",
        )
