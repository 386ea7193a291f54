"""A user's model with every output structure runs on every backend and precision (issue 12.2).

Integer and bool outputs are compared exactly (12.3): at fp32 with no mismatch, and a kernel
that reorders argmax's indices is caught as an index error, not excused as a tie flip.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from stages.handover.samples import load_samples
from tests.helpers.configs import compose_config
from tests.helpers.user_models import STRUCTURES_INPUTS

TARGET = "model._target_=tests.helpers.user_models.make_structures"
OUTPUTS = 8  # 2 buffer mutations + 6 tensor leaves; None/3/0.5/True are constants


@pytest.fixture(scope="module")
def run_structures(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("structures")

    def _run(label: str, *overrides: str) -> Path:
        cfg = compose_config(
            root / label,
            [
                *("model=custom", TARGET, STRUCTURES_INPUTS, "tracking=none", "inputs.count=2"),
                f"cache_dir={root / 'cache'}",
                *overrides,
            ],
        )
        with open_dict(cfg):
            cfg.run_dir = str(root / label / "run")
        run_pipeline(cfg, print_summary=False)
        return Path(cfg.run_dir)

    return _run


def _gaps(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "numeric_gap.csv").open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
@pytest.mark.parametrize("backend", ["xnnpack", "qnn", "portable"])
def test_every_structure_runs_and_passes(run_structures, backend: str, precision: str) -> None:  # type: ignore[no-untyped-def]
    run_dir = run_structures(
        f"{backend}-{precision}", f"backend={backend}", f"backend.precision={precision}"
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["verdict"] == "pass", summary["first_divergence"]
    gaps = _gaps(run_dir)
    kinds = {g["comparison"] for g in gaps if g["status"] == "ok"}
    assert {"float", "exact", "index"} <= kinds
    for row in gaps:
        if row["comparison"] == "exact":  # bool mask, argmax cast input: counted, never SNR
            assert row["snr"] == "" and row["local_mismatches"] == "0.0", row
    outputs = load_samples(run_dir / "run_outputs.pt")
    references = load_samples(run_dir / "reference_outputs.pt")
    assert len(outputs) == len(references) == 2 and len(outputs[0]) == OUTPUTS
    # Each execution starts from the program's initial buffers: both samples count to 1.
    assert [float(o[0]) for o in outputs] == [1.0, 1.0] == [float(r[0]) for r in references]
    for out, ref in zip(outputs[0], references[0], strict=True):
        if not ref.is_floating_point():
            assert torch.equal(out, ref)
    if precision == "fp32":
        floats = [g for g in gaps if g["comparison"] == "float" and g["status"] == "ok"]
        assert floats and all(g["snr"] == "inf" for g in floats)
        assert all(g["mismatches"] == "0.0" for g in gaps if g["comparison"] != "float")


def test_a_wrong_index_kernel_is_an_error_not_a_tie_flip(run_structures) -> None:  # type: ignore[no-untyped-def]
    run_dir = run_structures(
        "fault", "backend=portable", "backend.fault.node=argmax", "backend.fault.kind=transpose"
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    first = summary["first_divergence"]
    assert summary["verdict"] == "fail" and first["op_names"] == ["argmax"], first
    assert first["comparison"] == "index"
    assert first["local_mismatches"] > first["local_tie_flips"]


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_python_numbers_computed_at_run_time_are_logged_and_compared(
    run_structures, backend: str
) -> None:  # type: ignore[no-untyped-def]
    run_dir = run_structures(
        f"item-{backend}",
        "model._target_=tests.helpers.user_models.make_item_outputs",
        "model.inputs=[{shape:[2,4]}]",
        f"backend={backend}",
    )
    assert json.loads((run_dir / "summary.json").read_text())["verdict"] == "pass"
    items = {g["op_names"]: g for g in _gaps(run_dir) if "item" in g["op_names"]}
    assert items['["item"]']["comparison"] == "float" and items['["item"]']["snr"] == "inf"
    assert items['["item_1"]']["comparison"] == "exact"
    assert items['["item_1"]']["mismatches"] == "0.0"


@pytest.mark.parametrize("backend", ["xnnpack", "qnn"])
def test_a_clean_fp16_run_is_not_failed_by_tie_flips(run_structures, backend: str) -> None:  # type: ignore[no-untyped-def]
    run_dir = run_structures(
        f"tie-{backend}",
        "model._target_=tests.helpers.user_models.make_near_tie",
        "model.inputs=[{shape:[1,16]}]",
        f"backend={backend}",
        "backend.precision=fp16",
    )
    assert json.loads((run_dir / "summary.json").read_text())["verdict"] == "pass"
    argmax = next(g for g in _gaps(run_dir) if g["op_names"] == '["argmax"]')
    assert argmax["comparison"] == "index"
    # The reference picks 10.001, the fp16 run sees a tie and picks the first: a tie flip.
    assert argmax["mismatches"] == argmax["tie_flips"] == "2.0"  # two samples
    assert argmax["local_mismatches"] == "0.0"
