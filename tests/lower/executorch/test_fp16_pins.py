"""backend.precision=fp16 on a Hugging Face decoder with token-id inputs (issue 44): its export
pins float32 where the model calls `.float()` / `.to(x.dtype)` (rotary embedding, RMSNorm) as
`_assert_tensor_metadata` checks and casts; halved, the program once failed its own check
("Tensor dtype mismatch! Expected: torch.float32, Got: torch.float16"). The pins follow the
program to half, and the run lowers, runs and is analysed (tapped: fp16 values are logged as
program outputs)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig

from stages.formats.artifacts import ArtifactName

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(900)]  # lowering on 2 shared cores
TOKENS = "[{shape:[1,8],dtype:int64,high:128}]"


def _float32_pins(program: torch.export.ExportedProgram) -> list[str]:
    found = []
    for node in program.graph.nodes:
        pinned: list[object] = []
        torch.fx.node.map_aggregate((node.args, node.kwargs), pinned.append)
        if any(value is torch.float32 for value in pinned):
            found.append(node.name)
    return found


def test_a_llama_program_halved_keeps_no_float32_pin(tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason="needs Hugging Face transformers: the hf extra")
    from stages.export.exporter import export_model
    from stages.export.zoo.hf import make
    from stages.lower.executorch.precision import program_at_precision

    sample = (torch.randint(0, 128, (1, 8)),)
    program = export_model(
        make(arch="llama"), sample, strict=False, decompose=False, model_name="llama",
        error_log=tmp_path / "export_error.log",
    )  # fmt: skip
    asserts = [
        n for n in program.graph.nodes if n.target == torch.ops.aten._assert_tensor_metadata.default
    ]
    assert any(torch.float32 in n.args for n in asserts)  # the pins the export leaves
    half = program_at_precision(program, "fp16", [sample])
    assert _float32_pins(half) == []
    with torch.no_grad():
        (logits,) = half.module()(*sample)
        reference = program.module()(*sample)[0]
    assert logits.dtype == torch.float16 and logits.shape == reference.shape
    error = (logits.float() - reference).pow(2).mean() / reference.var()
    assert float(error) < 1e-3  # half precision's error, not another computation


def test_fp16_llama_lowers_runs_and_is_analysed_on_executorch_xnnpack(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    pytest.importorskip("transformers", reason="needs Hugging Face transformers: the hf extra")
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from tests.helpers.executorch_runs import run_on_executorch

    summary, rows, run_dir = run_on_executorch(
        make_cfg,
        tmp_path / "run",
        tmp_path / "cache",
        "model=custom",
        "model._target_=stages.export.zoo.hf.make",
        "+model.kwargs.arch=llama",
        f"model.inputs={TOKENS}",
        "backend.precision=fp16",
        "runtime.observe=tap",
    )
    lowering = json.loads((run_dir / ArtifactName.LOWERING_REPORT).read_text())
    assert lowering["precision"] == "fp16" and lowering["partitions"]
    assert summary["verdict"] == "pass", summary["verdict_reason"]
    assert len(rows) >= 20 and all(r["status"] == "ok" for r in rows)
    instrumentation = summary["instrumentation"]
    # Every delegated op has a compared row, but the rotary group's: it ends at a metadata check
    # and compares no sample, so its ops are listed as not evaluated, with the reason.
    not_evaluated = instrumentation["not_evaluated"]
    assert {"sin", "cos"} <= set(not_evaluated), not_evaluated
    assert all("compared 0 samples" in reason for reason in not_evaluated.values())
    assert instrumentation["ops_with_rows"] + len(not_evaluated) == instrumentation["ops_delegated"]
