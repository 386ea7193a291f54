"""Hugging Face architectures nobody here wrote, through the documented override (issue 12.6).

Tiny configs, random weights, nothing downloaded. Each runs on every backend at fp32: the
verdict passes with every gap exact, and lowering.json's table of delegated and left-out ops
agrees with the exported program and the backend's declared support.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import open_dict

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded, even by accident
pytest.importorskip(
    "transformers", reason="needs Hugging Face transformers: pip install -e '.[hf]'"
)

from pipeline.runner import run_pipeline
from stages.backends.backend_api import backend_class
from stages.export.zoo.hf import ARCHITECTURES
from stages.handover.exported_program import load_exported_program
from stages.op_encoding import op_name
from tests.helpers.configs import compose_config

TESTED = ["bert", "gpt2", "llama", "t5", "whisper_encoder", "vit", "convnext"]


@pytest.fixture(scope="module")
def run_hf(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("hf")

    def _run(arch: str, backend: str) -> Path:
        overrides = [
            "model=custom",
            "model._target_=stages.export.zoo.hf.make",
            f"model.kwargs.arch={arch}",
            f"model.inputs={ARCHITECTURES[arch].example_inputs}",
            f"backend={backend}",
            "backend.precision=fp32",
            "tracking=none",
            "runtime.iterations=2",
            f"cache_dir={root / 'cache'}",
        ]
        cfg = compose_config(root / f"{arch}-{backend}", overrides)
        with open_dict(cfg):
            cfg.run_dir = str(root / f"{arch}-{backend}" / "run")
        run_pipeline(cfg, print_summary=False)
        return Path(cfg.run_dir)

    return _run


def _expected_reason(node: torch.fx.Node, backend: str, supported: frozenset[str]) -> str | None:
    """Why this op should be left out, derived from the node and the backend's op list."""
    if isinstance(node.target, torch._ops.HigherOrderOperator):
        return "control flow"
    if backend == "portable":
        return "the portable backend runs every op"
    name = op_name(node.target)
    if name not in supported:
        return f"{name} is not supported by {backend}"
    val = node.meta.get("val")
    if not (isinstance(val, torch.Tensor) and val.is_floating_point()):
        return "non-floating"
    return None


def _check_lowering_table(run_dir: Path, backend: str) -> dict[str, Any]:
    lowering = json.loads((run_dir / "lowering.json").read_text())
    program = load_exported_program((run_dir / "exported.pt2").read_bytes())
    nodes = {
        n.name: n
        for n in program.graph.nodes
        if n.op == "call_function" and not re.fullmatch(r"getitem(_\d+)?", n.name)
    }
    delegated = [op for p in lowering["partitions"] for op in p["ops"] if op in nodes]
    rejected = {r["node"]: r for r in lowering["rejected_ops"]}
    assert len(delegated) == len(set(delegated)), "an op in two partitions"
    assert set(delegated).isdisjoint(rejected) and set(delegated) | set(rejected) == set(nodes)
    supported = getattr(backend_class(backend), "supported_ops", frozenset())
    for name, node in nodes.items():
        expected = _expected_reason(node, backend, supported)
        if expected is None:
            assert name not in rejected, (name, rejected.get(name))
        else:
            assert name in rejected and expected in rejected[name]["reason"], (name, expected)
            assert rejected[name]["debug_handle"] == node.meta["debug_handle"]
    return lowering


@pytest.mark.e2e
@pytest.mark.parametrize("backend", ["xnnpack", "qnn", "portable"])
@pytest.mark.parametrize("arch", TESTED)
def test_architecture_passes_exactly_and_its_lowering_table_is_right(
    run_hf, arch: str, backend: str
) -> None:  # type: ignore[no-untyped-def]
    run_dir = run_hf(arch, backend)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["verdict"] == "pass", summary["first_divergence"]
    assert summary["compared_outputs"] > 10 and summary["max_gap"] == "inf"
    lowering = _check_lowering_table(run_dir, backend)
    if backend == "portable":
        assert not lowering["partitions"]
    else:
        assert lowering["partitions"], f"{arch} on {backend}: nothing delegated"
