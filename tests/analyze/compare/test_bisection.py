"""runtime.observe=bisect's parts without a backend: the search (O(log N) judged prefixes), the
prefix cut (every value handed on is an output) and the judgement (an op that itself computes
wrongly diverges; error the precision accumulates along the prefix does not)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from stages.analyze.compare.bisection import BisectInputs, bisect_segment, search
from stages.analyze.compare.prefix_judgement import _walk, expected_outputs, judge_prefix
from stages.export.exporter import export_model
from stages.export.prefix_cut import write_prefix
from stages.export.subgraph_cut import cut_ops
from stages.formats.artifacts import ArtifactName
from stages.handover.exported_program import load_exported_program
from stages.handover.samples import load_samples


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1000])
def test_search_finds_the_first_diverging_prefix_in_log_n_judgements(n: int) -> None:
    for first in sorted({0, n // 3, n - 1}):
        asked: list[int] = []

        def diverges(k: int, first: int = first, asked: list[int] = asked) -> bool:
            asked.append(k)
            return k >= first

        assert search(n, diverges) == first
        assert len(asked) <= math.ceil(math.log2(n)) + 1
        assert len(set(asked)) == len(asked)


def test_search_with_nothing_diverging() -> None:
    asked: list[int] = []

    def never(k: int) -> bool:
        asked.append(k)
        return False

    assert search(16, never, check_whole=True) is None and asked == [15]  # one lowering
    asked.clear()
    assert search(16, never) is None  # the whole is confirmed before it is blamed
    assert asked[-1] == 15 and len(asked) <= 5


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        return self.c(torch.relu(self.b(h)) + h)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], list[str]]:
    """Ops 0..2 (a, relu, b) of _Net cut into a program: b's output and relu's (read by add)."""
    samples = [(torch.randn(4, 16),), (torch.randn(4, 16),)]
    directory = tmp_path_factory.mktemp("prefix")
    program = export_model(
        _Net().eval(),
        samples[0],
        strict=False,
        decompose=False,
        model_name="net",
        error_log=directory / "error.log",
    )
    segment = cut_ops(program)
    cut = write_prefix(program, samples, segment, 2, directory / "cut")
    return cut.directory, cut.names, list(cut.outputs)


def test_the_cut_outputs_every_value_it_hands_on(
    prefix: tuple[Path, dict[str, str], list[str]],
) -> None:
    directory, names, outputs = prefix
    assert list(names) == ["linear", "relu", "linear_1"]
    assert outputs == ["relu", "linear_1"]  # relu is read by the add after the cut
    program = load_exported_program(directory / ArtifactName.EXPORTED_PROGRAM)
    references = load_samples(directory / ArtifactName.REFERENCE_OUTPUTS)
    assert len(references) == 2 and [t.shape[-1] for t in references[0]] == [32, 32]
    assert [n.name for n in cut_ops(program)] == list(names.values())


def _judge(
    directory: Path, runtime: list[list[torch.Tensor]], precision: str
) -> tuple[bool, float]:
    program = load_exported_program(directory / ArtifactName.EXPORTED_PROGRAM)
    verdict = judge_prefix(
        program,
        load_samples(directory / ArtifactName.INPUTS),
        load_samples(directory / ArtifactName.REFERENCE_OUTPUTS),
        runtime,
        precision,
        (6.0, 1.0),
    )
    return verdict.diverged, verdict.worst_excess_db


def test_accumulated_precision_error_passes_and_a_wrong_op_fails(
    prefix: tuple[Path, dict[str, str], list[str]],
) -> None:
    """The prefix computed at int8 as a backend would (every op rounded, weights per channel)
    is within its expected error; the same with the last op's output scaled by 1.5 (a fault's default) is not."""
    directory = prefix[0]
    program = load_exported_program(directory / ArtifactName.EXPORTED_PROGRAM)
    samples = load_samples(directory / ArtifactName.INPUTS)
    int8 = expected_outputs(program, samples, "int8")
    assert int8 is not None
    clean = [[t.clone() for t in sample] for sample in int8]
    assert _judge(directory, clean, "int8")[0] is False
    wrong = [[sample[0], sample[1] * 1.5] for sample in int8]
    diverged, excess = _judge(directory, wrong, "int8")
    assert diverged and excess > 6.0
    # At fp32 the same int8 rounding is far over what fp32 should cost.
    assert _judge(directory, clean, "fp32")[0] is True


def test_fp32_exact_outputs_pass_and_a_missing_output_diverges(
    prefix: tuple[Path, dict[str, str], list[str]],
) -> None:
    directory = prefix[0]
    program = load_exported_program(directory / ArtifactName.EXPORTED_PROGRAM)
    samples = load_samples(directory / ArtifactName.INPUTS)
    exact = [_walk(program, sample, None)[1] for sample in samples]
    assert _judge(directory, exact, "fp32") == (False, -math.inf)
    assert _judge(directory, [s[:1] for s in exact], "fp32")[0] is True
    half = [[t.half() for t in sample] for sample in exact]  # a half runtime's outputs
    assert _judge(directory, half, "fp16")[0] is False


def test_a_prefix_that_cannot_be_lowered_stops_bisection_without_failing(tmp_path: Path) -> None:
    program = export_model(
        _Net().eval(),
        (torch.randn(4, 16),),
        strict=False,
        decompose=False,
        model_name="net",
        error_log=tmp_path / "error.log",
    )

    def refuses(directory: Path, names: dict[str, str]) -> tuple[Path, bool]:
        raise RuntimeError("the backend refuses this prefix")

    inputs = BisectInputs(
        program, [(torch.randn(4, 16),)], "fp32", (6.0, 1.0), tmp_path / "cuts", refuses
    )
    found = bisect_segment(inputs, [n.name for n in cut_ops(program)])
    assert found.op is None and "refuses this prefix" in found.note


def test_a_loaded_program_whose_input_is_renamed_is_cut_from_its_input(tmp_path: Path) -> None:
    """nn.Sequential's `input` loads back as placeholder `input_1` (its signature still says
    `input`): a prefix that reads the model's input takes it by position, not by that name."""
    from stages.formats.exported_program import save_exported_program

    samples = [(torch.randn(2, 16),)]
    model = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4)).eval()
    program = export_model(
        model,
        samples[0],
        strict=False,
        decompose=False,
        model_name="seq",
        error_log=tmp_path / "error.log",
    )
    save_exported_program(program, tmp_path / "exported.pt2")
    loaded = load_exported_program(tmp_path / "exported.pt2")
    placeholders = [n.name for n in loaded.graph.nodes if n.op == "placeholder"]
    user = loaded.graph_signature.user_inputs
    assert placeholders[-1] != user[-1]  # the mismatch this test is about is still there
    cut = write_prefix(loaded, samples, cut_ops(loaded), 1, tmp_path / "cut")
    inputs = load_samples(cut.directory / ArtifactName.INPUTS)
    assert torch.equal(inputs[0][0], samples[0][0])
