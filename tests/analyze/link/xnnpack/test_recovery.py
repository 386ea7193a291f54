"""ExecuTorch's own XNNPACK kernel events linked to ops by recovery, on real ExecuTorch programs.

Each model is lowered by ExecuTorch (`backend=executorch_xnnpack`), run by its runtime and
analysed; kernels are linked from the `.pte`'s serialized XNNPACK graphs and must agree in type
with their ops (`tests.helpers.xnnpack_kernel_types`, independent of the recovery).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import pytest
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from stages.analyze.config import AnalyzeConfig
from stages.analyze.load.loading import AnalyzeInputError
from stages.analyze.stage import run_analyze
from stages.formats.artifacts import ArtifactName
from stages.formats.etdump import read_etdump
from stages.formats.etdump.records import Event
from stages.formats.etdump.writer import write_etdump
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config
from tests.helpers.xnnpack_kernel_types import disagreements

pytestmark = pytest.mark.executorch
os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded, even by accident


@pytest.fixture(autouse=True)
def _needs_executorch() -> None:
    pytest.importorskip(
        "executorch.exir", reason="needs the executorch extra: pip install -e '.[executorch]'"
    )


def _hf_overrides(arch: str) -> list[str]:
    pytest.importorskip(
        "transformers", reason="needs Hugging Face transformers: pip install -e '.[hf]'"
    )
    from stages.export.zoo.hf import ARCHITECTURES

    return [
        "model=custom",
        "model._target_=stages.export.zoo.hf.make",
        f"model.kwargs.arch={arch}",
        f"model.inputs={ARCHITECTURES[arch].example_inputs}",
    ]


@pytest.fixture(scope="module")
def executorch_run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("xnnpack-recovery")
    done: dict[str, Path] = {}

    def _run(model: str) -> Path:
        if model not in done:
            model_overrides = (
                _hf_overrides(model.removeprefix("hf_"))
                if model.startswith("hf_")
                else TINY_MODEL_OVERRIDES[model]
            )
            overrides = [
                *model_overrides,
                "backend=executorch_xnnpack",
                "tracking=none",
                "runtime.iterations=2",
                f"cache_dir={root / 'cache'}",
            ]
            cfg = compose_config(root / model, overrides)
            with open_dict(cfg):
                cfg.run_dir = str(root / model / "run")
            run_pipeline(cfg, print_summary=False)
            done[model] = Path(cfg.run_dir)
        return done[model]

    return _run


def _kernel_events(run_dir: Path) -> list[dict[str, Any]]:
    with (run_dir / ArtifactName.EVENTS_CSV).open() as fh:
        rows = list(csv.DictReader(fh))
    return [
        r for r in rows if r["delegate_debug_identifier"] and r["event_block_name"] == "Execute"
    ]


@pytest.mark.parametrize("model", ["vit", "mobilenet_v2", "hf_bert"])
def test_kernels_link_to_ops_of_their_own_type(executorch_run: Any, model: str) -> None:
    run_dir = executorch_run(model)
    kernels = _kernel_events(run_dir)
    assert kernels, "ExecuTorch's XNNPACK logged no kernel events"
    linked = [k for k in kernels if k["link_source"] == "recovered"]
    assert len(linked) >= 0.9 * len(kernels), [
        (k["delegate_debug_identifier"], k["link_source"]) for k in kernels
    ]
    assert {k["link_source"] for k in kernels} <= {"recovered", "none"}  # never called a map
    assert disagreements(kernels) == []
    summary = json.loads((run_dir / ArtifactName.SUMMARY_JSON).read_text())
    recovery = summary["xnnpack_recovery"]
    assert recovery["linked"] + recovery["unlinked"] == recovery["kernels"]
    assert recovery["graph_source"].startswith("pte: ")
    assert summary["link_sources"]["recovered"] == len(linked)


def test_per_op_latency_reaches_report_trace_and_explorer(executorch_run: Any) -> None:
    run_dir = executorch_run("vit")
    trace = json.loads((run_dir / ArtifactName.TRACE_JSON).read_text())
    slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    kernels = [s for s in slices if s["args"].get("link_source") == "recovered"]
    assert any(s["name"] == "linear" for s in kernels), sorted({s["name"] for s in slices})[:20]
    assert all(s["args"]["delegate_debug_identifier"] for s in kernels)  # in its delegate lane
    overlay = json.loads((run_dir / "explorer_latency.json").read_text())
    latency = overlay["graph"]["results"]
    # Only ops an event links to get a value; a tiny kernel may take 0 us in XNNPACK's count.
    assert {"linear", "softmax", "gelu", "conv2d"} <= set(latency), sorted(latency)[:20]
    assert any(v["value"] > 0 for v in latency.values())
    report = (run_dir / ArtifactName.REPORT_HTML).read_text()
    assert "XNNPACK kernel links" in report and "recovered" in report


def test_shuffled_kernel_sequence_stays_unlinked_with_a_reason(
    executorch_run: Any, tmp_path: Path
) -> None:
    run_dir = executorch_run("vit")
    dump = read_etdump(run_dir / ArtifactName.ETDUMP)
    for block in dump.run_data:  # each call's kernels in reverse order, in every execution
        by_call: dict[int, list[int]] = {}
        for i, event in enumerate(block.events):
            if _is_kernel(event):
                by_call.setdefault(event.profile_event.instruction_id, []).append(i)  # type: ignore[union-attr]
        for slots in by_call.values():
            names = [block.events[i].profile_event.delegate_debug_id_str for i in slots]  # type: ignore[union-attr]
            for i, name in zip(slots, reversed(names), strict=True):
                pe = block.events[i].profile_event
                block.events[i] = Event(profile_event=pe._replace(delegate_debug_id_str=name))  # type: ignore[union-attr]
    write_etdump(tmp_path / "shuffled.etdp", dump)
    out = tmp_path / "out"
    out.mkdir()
    artifacts = run_analyze(
        AnalyzeConfig(),
        tmp_path / "shuffled.etdp",
        None,
        run_dir / ArtifactName.ETRECORD,
        out,
        pte=run_dir / ArtifactName.EXECUTORCH_PROGRAM,
    )
    summary = json.loads(artifacts.summary.read_text())
    recovery = summary["xnnpack_recovery"]
    assert recovery["unlinked"] > 0
    reasons = " ".join(recovery["unlinked_reasons"])
    assert "does not match the serialized graph" in reasons
    kernels = _kernel_events(out)
    assert disagreements(kernels) == []  # whatever was still placed is right


def _is_kernel(event: Event) -> bool:
    pe = event.profile_event
    return pe is not None and bool(pe.delegate_debug_id_str)


def test_without_the_pte_kernels_stay_unlinked_and_say_what_to_pass(
    executorch_run: Any, tmp_path: Path
) -> None:
    run_dir = executorch_run("vit")
    artifacts = run_analyze(
        AnalyzeConfig(),
        run_dir / ArtifactName.ETDUMP,
        None,
        run_dir / ArtifactName.ETRECORD,
        tmp_path,
    )
    recovery = json.loads(artifacts.summary.read_text())["xnnpack_recovery"]
    assert recovery["linked"] == 0 and recovery["unlinked"] == recovery["kernels"] > 0
    assert any("analyze.pte=PATH" in why for why in recovery["unlinked_reasons"])


def test_a_pte_of_another_program_is_refused(executorch_run: Any, tmp_path: Path) -> None:
    vit, other = executorch_run("vit"), executorch_run("mobilenet_v2")
    with pytest.raises(AnalyzeInputError, match=r"analyze\.pte=.*another program"):
        run_analyze(
            AnalyzeConfig(),
            vit / ArtifactName.ETDUMP,
            None,
            vit / ArtifactName.ETRECORD,
            tmp_path,
            pte=other / ArtifactName.EXECUTORCH_PROGRAM,
        )


def test_analyze_pte_option_reaches_a_stages_analyze_run(
    executorch_run: Any, tmp_path: Path
) -> None:
    run_dir = executorch_run("vit")
    overrides = [
        *TINY_MODEL_OVERRIDES["vit"],
        "stages=[analyze]",
        "tracking=none",
        f"analyze.etdump={run_dir / ArtifactName.ETDUMP}",
        f"analyze.etrecord={run_dir / ArtifactName.ETRECORD}",
        f"analyze.pte={run_dir / ArtifactName.EXECUTORCH_PROGRAM}",
        f"cache_dir={tmp_path / 'cache'}",
    ]
    cfg = compose_config(tmp_path, overrides)
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    run_pipeline(cfg, print_summary=False)
    summary = json.loads((tmp_path / "run" / ArtifactName.SUMMARY_JSON).read_text())
    assert summary["xnnpack_recovery"]["linked"] > 0
