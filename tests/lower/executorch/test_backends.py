"""Backends that are ExecuTorch itself: its lowering, its .pte, its ETRecord, its runtime, and the
same analysis, cache and sweep comparison as the emulated backends."""

from __future__ import annotations

import csv
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, open_dict

from pipeline.errors import ConfigValueError
from pipeline.runner import run_pipeline
from stages.formats.artifacts import ArtifactName
from stages.formats.etdump import read_etdump
from stages.formats.executorch.program import is_executorch_program
from tests.helpers.cli_runner import run_module

pytestmark = pytest.mark.executorch
SKIP_REASON = "needs the executorch extra: pip install -e '.[executorch]'"


@pytest.fixture(autouse=True)
def _needs_executorch() -> None:
    pytest.importorskip("executorch.exir", reason=SKIP_REASON)


def _cfg(tiny_cfg: Callable[..., DictConfig], tmp_path: Path, *overrides: str) -> DictConfig:
    cfg = tiny_cfg("mlp", "tracking=none", f"cache_dir={tmp_path / 'cache'}", *overrides)
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    return cfg


@pytest.mark.parametrize("backend", ["executorch_xnnpack", "executorch_portable"])
def test_executorch_lowers_runs_and_is_analysed(
    backend: str, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = _cfg(tiny_cfg, tmp_path, f"backend={backend}", "runtime.iterations=3")
    result = run_pipeline(cfg, print_summary=False)
    run_dir = result.run_dir
    program = run_dir / ArtifactName.EXECUTORCH_PROGRAM
    assert is_executorch_program(program.read_bytes()[:8])  # ExecuTorch's flatbuffer
    assert not (run_dir / ArtifactName.PROGRAM).exists()
    with zipfile.ZipFile(run_dir / ArtifactName.ETRECORD) as etrecord:
        assert "ETRECORD_V0" in etrecord.namelist()  # ExecuTorch's ETRecord format
    dump = read_etdump(run_dir / ArtifactName.ETDUMP)
    assert [b.name for b in dump.run_data].count("Execute") == 3  # warm-up left out
    summary = json.loads((run_dir / ArtifactName.SUMMARY_JSON).read_text())
    assert summary["verdict"] == "pass" and summary["compared_outputs"] >= 1
    assert summary["program_identity"]["shape_or_dtype_mismatches"] == 0
    # ExecuTorch's XNNPACK logs no intermediate outputs of its own: its partition is compared
    # as a whole (docs/delegate_map_check.md), which is all that is not evaluated.
    kinds = {f["kind"] for f in summary["delegate_map_check"]}
    assert kinds <= {"no_intermediate_outputs"}
    assert all("per op inside partition" in n["what"] for n in summary["not_evaluated"])
    # ... and each says what it hides and what sees inside (tap here, bisect anywhere).
    assert all(n["option"] == "runtime.observe" for n in summary["not_evaluated"])
    assert all("runtime.observe=tap" in n["why"] for n in summary["not_evaluated"])
    assert all("below the precision's own error" in n["why"] for n in summary["not_evaluated"])
    with (run_dir / ArtifactName.NUMERIC_GAP_CSV).open() as fh:
        gaps = list(csv.DictReader(fh))
    assert all(float(g["snr"]) > 100 for g in gaps)  # fp32 kernels against the ATen reference
    assert {op for g in gaps for op in json.loads(g["op_names"])} >= {"linear", "linear_1"}
    if backend == "executorch_xnnpack":
        assert summary["partitions"] >= 1 and summary["delegated_op_ratio"] > 0.5
    else:
        assert summary["partitions"] == 0
    if backend == "executorch_xnnpack":  # the same stage cache: a second run reuses all
        again_cfg = _cfg(tiny_cfg, tmp_path / "again", f"backend={backend}", "runtime.iterations=3")
        with open_dict(again_cfg):
            again_cfg.cache_dir = str(tmp_path / "cache")
        again = run_pipeline(again_cfg, print_summary=False)
        assert [s.status for s in again.stages] == ["reused"] * 4


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["backend=executorch_portable", "backend.precision=fp16"],
            r"backend\.precision='fp16': backend executorch_portable lowers fp32, int8",
        ),
        (
            [
                "backend=executorch_xnnpack",
                "backend.fault.node=linear",
                "backend.fault.kind=epsilon",
            ],
            r"backend\.fault\.kind=epsilon: backend executorch_xnnpack .*\['scale', 'offset', 'nan'\]",
        ),
        (
            ["backend=executorch_xnnpack", "backend.fault.node=true_graph_0.add"],
            r"backend\.fault\.node=true_graph_0\.add: .* top-level ops only",
        ),
    ],
)
def test_options_executorch_cannot_honour_are_refused(
    overrides: list[str], message: str, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = _cfg(tiny_cfg, tmp_path, *overrides)
    # Refused before any stage runs (pipeline.config.options), naming the option.
    with pytest.raises(ConfigValueError, match=message):
        run_pipeline(cfg, print_summary=False)
    assert not (tmp_path / "run").exists()


def test_keep_off_goes_through_the_xnnpack_partitioner_and_keep_float_needs_int8(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = _cfg(tiny_cfg, tmp_path, "backend=executorch_xnnpack", "backend.keep_off=[linear_1]")
    run_dir = run_pipeline(cfg, print_summary=False).run_dir
    report = json.loads((run_dir / ArtifactName.LOWERING_REPORT).read_text())
    assert report["op_overrides"] == {"keep_float": [], "keep_off": ["linear_1"]}
    # The delegates' ops by name (what the searches try), linear_1 not among them.
    assert "linear" in report["delegated_ops"] and "linear_1" not in report["delegated_ops"]
    with (run_dir / ArtifactName.EVENTS_CSV).open() as fh:
        events = [e for e in csv.DictReader(fh) if json.loads(e["op_names"] or "[]")]
    placed = {op: e["delegate_backend_name"] for e in events for op in json.loads(e["op_names"])}
    assert placed["linear_1"] == "" and placed["linear"] == "XnnpackBackend"
    summary = json.loads((run_dir / ArtifactName.SUMMARY_JSON).read_text())
    assert summary["verdict"] == "pass" and summary["accuracy"]["met"] is True
    refused = _cfg(tiny_cfg, tmp_path, "backend=executorch_xnnpack", "backend.keep_float=[linear]")
    with pytest.raises(ConfigValueError, match=r"backend\.keep_float: .* only in an int8 program"):
        run_pipeline(refused, print_summary=False)


@pytest.mark.timeout(600)
def test_keep_float_leaves_an_op_unquantized_in_the_int8_program(tmp_path: Path) -> None:
    """backend.keep_float on executorch_xnnpack int8: the quantizer's filter leaves the kept op's
    weight unquantized (a float parameter, no dequantize), the others' weights quantized. (Its
    input may still arrive through a dequantize: the op before it quantizes its own output.)"""
    import torch

    from stages.lower.executorch.precision import program_at_precision

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    samples = [(torch.randn(2, 4),)]
    exported = torch.export.export(model, samples[0])

    def quantized_weights(kept: frozenset[str]) -> dict[str, bool]:
        program = program_at_precision(exported, "int8", samples, kept)
        return {
            n.name: "dequantize" in str(getattr(n.args[1], "target", ""))
            for n in program.graph.nodes
            if n.op == "call_function" and "linear" in str(n.target)
        }

    assert set(quantized_weights(frozenset()).values()) == {True}
    kept = quantized_weights(frozenset({"linear_1"}))
    assert kept == {"linear": True, "linear_1": False}, kept


def test_sweep_compares_emulated_and_executorch(tmp_path: Path) -> None:
    done = run_module(
        "pipeline",
        "-m",
        "model=mlp",
        "backend=xnnpack,executorch_xnnpack",
        "hydra/launcher=basic",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    comparison = tmp_path / "sweep" / "comparison"
    with (comparison / "comparison_runs.csv").open() as fh:
        runs = {r["backend"]: r for r in csv.DictReader(fh)}
    assert set(runs) == {"xnnpack", "executorch_xnnpack"}
    assert all(r["verdict"] == "pass" for r in runs.values())
    with (comparison / "comparison_ops_mlp.csv").open() as fh:
        ops = list(csv.DictReader(fh))
    # Rows are keyed by the exported program's ops: every row spans exactly the ops of the
    # kernels that ran them, so the emulated kernels and ExecuTorch's delegate line up on the
    # same rows, each p50 labelled with the runtime that measured it.
    emulated_col, real_col = (
        "p50_ms[xnnpack-fp32 @ emulated]",
        "p50_ms[executorch_xnnpack-fp32 @ executorch]",
    )
    both = [o for o in ops if o[emulated_col] and o[real_col]]
    assert both, ops
    covered = {h for o in both for h in json.loads(o["debug_handles"])}
    assert {"linear", "linear_1", "linear_2"} <= {n for o in both for n in o["op"].split("+")}
    assert len(covered) >= 3
    # Emulated Python kernels and ExecuTorch's C++ kernels are never ranked against each other.
    assert "slowest" not in ops[0]
    assert {"slowest[emulated]", "slowest[executorch]"} <= set(ops[0])
    assert all(not o["slowest[emulated]"] and not o["slowest[executorch]"] for o in ops)


def test_the_keep_float_hook_keeps_an_op_out_of_xnnpack_quantization() -> None:
    """The hook `backend.keep_float` needs once executorch_xnnpack quantizes (issue 36.2)."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    from stages.lower.executorch.keep_off import keep_float_filter

    def observed_outputs(kept: frozenset[str]) -> dict[str, bool]:
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
        graph = torch.export.export(model, (torch.randn(2, 4),)).module()
        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
        quantizer.set_filter_function(keep_float_filter(kept))
        prepared = prepare_pt2e(graph, quantizer)
        return {
            n.name: any("activation_post_process" in u.name for u in n.users)
            for n in prepared.graph.nodes
            if n.op == "call_function"
        }

    assert observed_outputs(frozenset())["linear_1"] is True
    assert observed_outputs(frozenset({"linear_1"}))["linear_1"] is False
