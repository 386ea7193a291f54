"""Conv -> BatchNorm -> activation networks at int8 on ExecuTorch's XNNPACK (issue 44), through
the pipeline as a user runs them: a clean run passes (its expected error once fell back to the
floor at the BatchNorm's `getitem`, a false FAIL), and a fault on a conv that a BatchNorm
follows lowers (ExecuTorch once could not serialize it) and is found."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import DictConfig
from torch import nn

from stages.formats.artifacts import ArtifactName

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(900)]  # lowering on 2 shared cores
SKIP_REASON = "needs the executorch extra: pip install -e '.[executorch]'"
INPUTS = "[{shape:[1,3,16,16]}]"


def _block(cin: int, cout: int, groups: int, act: type[nn.Module]) -> nn.Sequential:
    conv = nn.Conv2d(cin, cout, 3, 1, 1, groups=groups, bias=False)
    return nn.Sequential(conv, nn.BatchNorm2d(cout), act(inplace=True))


def conv_bn_stack(depth: int = 8) -> nn.Module:
    """MobileNet-like blocks (conv or depthwise conv, BatchNorm, ReLU or hardswish in place, so
    the export has BatchNorm's three getitems), a feature map out. BatchNorm scales spread per
    channel and statistics re-estimated on random batches, so activations have a trained
    network's scale and int8 costs what it costs on one."""
    torch.manual_seed(0)
    layers = [_block(3, 16, 1, nn.Hardswish)]
    for i in range(depth):
        layers.append(_block(16, 16, 16 if i % 2 else 1, nn.ReLU if i % 3 else nn.Hardswish))
    model = nn.Sequential(*layers, nn.Conv2d(16, 8, 1))
    with torch.no_grad():
        for norm in (m for m in model.modules() if isinstance(m, nn.BatchNorm2d)):
            norm.weight.copy_(torch.exp(torch.randn(norm.num_features)))
            norm.bias.copy_(0.5 * torch.randn(norm.num_features))
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, 16, 16))
    return model.eval()


def _run(make_cfg: Callable[..., DictConfig], tmp_path: Path, *overrides: str) -> Path:
    pytest.importorskip("executorch.exir", reason=SKIP_REASON)
    from tests.helpers.executorch_runs import run_on_executorch

    return run_on_executorch(
        make_cfg,
        tmp_path / "run",
        tmp_path / "cache",
        "model=custom",
        f"model._target_={__name__}.conv_bn_stack",
        f"model.inputs={INPUTS}",
        "backend.precision=int8",
        *overrides,
    )[2]


def _results(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, str]]]:
    summary = json.loads((run_dir / ArtifactName.SUMMARY_JSON).read_text())
    with (run_dir / ArtifactName.NUMERIC_GAP_CSV).open() as fh:
        return summary, list(csv.DictReader(fh))


def test_a_clean_int8_conv_bn_network_passes_against_its_expected_error(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    summary, rows = _results(_run(make_cfg, tmp_path))
    assert rows and all(not r.get("expected_fallback") for r in rows), rows
    assert summary["verdict"] == "pass", summary["verdict_reason"]
    for row in rows:  # the precision's own error, computed, not the floor alone
        expected, observed = float(row["expected_snr_db"]), float(row["observed_snr_db"])
        assert math.isfinite(expected) and expected < 45.0
        assert float(row["excess_db"]) < float(row["margin_db"])
        assert observed > 20.0
    assert summary["accuracy"]["met"] is True


def test_a_fault_on_a_conv_a_batchnorm_follows_lowers_and_is_found(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    run_dir = _run(
        make_cfg,
        tmp_path,
        "backend.fault.node=conv2d_3",  # a plain conv, its BatchNorm and ReLU after it
        "backend.fault.kind=scale",
        "backend.fault.value=1.5",
    )
    lowering = json.loads((run_dir / ArtifactName.LOWERING_REPORT).read_text())
    assert lowering["fault_injected"]["node"] == "conv2d_3"
    summary, rows = _results(run_dir)
    assert summary["verdict"] == "fail"
    first = summary["first_divergence"]
    assert "conv2d_3" in first["op_names"], first
    assert all(not r.get("expected_fallback") for r in rows)
