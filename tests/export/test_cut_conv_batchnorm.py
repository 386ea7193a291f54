"""A cut holding conv + BatchNorm (search=reduce's windows, runtime.observe=bisect's prefixes)
lowers at int8 on ExecuTorch's XNNPACK (issue 44): the cut's weights stay parameters, so
torchao's conv-BatchNorm folding can write the folded weight back under the conv weight's name
(the cut once held them as buffers: "KeyError: attribute 'c_1' already exists")."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig
from torch import nn

from stages.export.exporter import export_model
from stages.export.subgraph_cut import cut_ops, write_cut
from stages.formats.artifacts import ArtifactName

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(900)]  # lowering on 2 shared cores
SHAPE = (1, 3, 8, 8)


def _conv_bn_net() -> nn.Module:
    """Two conv -> BatchNorm -> activation blocks (in place: the export has BatchNorm's
    getitems) and a head; BatchNorm statistics re-estimated on random batches."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.Hardswish(inplace=True),
        nn.Conv2d(8, 8, 3, padding=1, groups=8),
        nn.BatchNorm2d(8),
        nn.ReLU(inplace=True),
        nn.Conv2d(8, 4, 1),
    )
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, *SHAPE[1:]))
    return model.eval()


def test_a_conv_bn_cut_keeps_its_weights_parameters_and_lowers_at_int8(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")

    samples: list[tuple[torch.Tensor, ...]] = [(torch.randn(SHAPE),) for _ in range(2)]
    program = export_model(
        _conv_bn_net(), samples[0], strict=False, decompose=False, model_name="m",
        error_log=tmp_path / "export_error.log",
    )  # fmt: skip
    ops = [n.name for n in cut_ops(program)]
    end = ops.index("relu")  # conv, BN, hardswish, depthwise conv, BN, relu
    assert sum("batch_norm" in name for name in ops[: end + 1]) == 2
    cut = write_cut(program, samples, 1, end, tmp_path / "cut")  # from the first BatchNorm on
    loaded = torch.export.load(cut.directory / ArtifactName.EXPORTED_PROGRAM)
    kinds = {spec.target: spec.kind.name for spec in loaded.graph_signature.input_specs}
    assert {kinds[name] for name in ("c_1", "c_2")} == {"PARAMETER"}  # BatchNorm's affine
    assert "BUFFER" in kinds.values()  # its running statistics stay buffers
    from tests.helpers.executorch_runs import run_on_executorch

    summary, _, run_dir = run_on_executorch(
        make_cfg,
        cut.directory,
        tmp_path / "cache",
        "stages=[lower,run,analyze]",  # as a reduce trial runs a cut
        "backend.precision=int8",
    )
    lowering = json.loads((run_dir / ArtifactName.LOWERING_REPORT).read_text())
    assert {"conv2d", "relu"} <= set(lowering["delegated_ops"])  # BatchNorm folded into its conv
    assert summary["verdict"] == "pass", summary["verdict_reason"]
