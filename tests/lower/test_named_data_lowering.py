"""Named data through lower and run: a user backend keeping its weights by key, the emulated
delegates' weights shared with the exported program (in memory and on disk), and a backend
without named data unchanged."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from stages.backends.kernel.runtime import LoadedDelegate
from stages.backends.xnnpack import XnnpackBackend
from stages.formats.shared_weights import EXTERNAL_MEMBER, MIN_SHARED_BYTES
from stages.handover import lowered_program as program_handover
from stages.handover.exported_program import load_exported_program
from stages.handover.lowered_program import load_program
from stages.handover.samples import load_samples
from stages.run.executor import Executor
from stages.run.stage import run_run
from tests.helpers.cli_runner import REPO
from tests.helpers.lowering import export_and_lower, relative_error

KEYED = "tests.helpers.named_data_backends.KeyedWeightsBackend"


def _ran_outputs(cfg: DictConfig, program: Path, inputs: Path, run_dir: Path) -> list[Any]:
    run_dir.mkdir(parents=True, exist_ok=True)
    ran = run_run(OmegaConf.to_object(cfg.runtime), program, inputs, run_dir)  # type: ignore[arg-type]
    return list(load_samples(ran.outputs)[0])


def test_a_user_backend_reads_its_weights_by_key_through_lower_and_run(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = tiny_cfg("mlp", "backend=xnnpack", f"backend._target_={KEYED}", "runtime.iterations=1")
    exported, lowered = export_and_lower(cfg, tmp_path / "run")
    with zipfile.ZipFile(lowered.program) as z:
        index = json.loads(z.read("named_data.json"))
        blobs = [z.read(n) for n in z.namelist() if n.startswith("delegates/")]
    weights = load_exported_program(exported.exported_program).state_dict
    assert set(index) == {f"p_{name.replace('.', '_')}" for name in weights}
    assert all(json.loads(blob)["constants"] for blob in blobs)  # keys, not tensors
    reference = load_samples(exported.reference_outputs)[0]
    for run_dir in ("handed", "from_files"):  # from memory first, then from the file
        outputs = _ran_outputs(cfg, lowered.program, exported.inputs, tmp_path / run_dir)
        assert relative_error(outputs, reference) < 1e-5


def test_a_user_backend_without_named_data_still_lowers_and_runs(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    example = REPO / "docs" / "examples" / "npu_backend.py"
    cfg = tiny_cfg("mlp", f"backend._target_={example}:NpuBackend", "runtime.iterations=1")
    exported, lowered = export_and_lower(cfg, tmp_path / "run")
    with zipfile.ZipFile(lowered.program) as z:
        assert "named_data.json" not in z.namelist()
    assert load_program(lowered.program).named_data == {}
    outputs = _ran_outputs(cfg, lowered.program, exported.inputs, tmp_path / "ran")
    assert relative_error(outputs, load_samples(exported.reference_outputs)[0]) < 1e-5


def _constant_pointers(handles: list[LoadedDelegate]) -> set[int]:
    return {t.data_ptr() for h in handles for _, t in h.constants}


def test_fp32_delegate_constants_are_the_exported_weights_in_memory_and_on_disk(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program_handover.forget_saved()
    exported, lowered = export_and_lower(tiny_cfg("vit", "backend=xnnpack"), tmp_path / "run")
    weights = load_exported_program(exported.exported_program).state_dict  # the held program
    weight_pointers = {t.data_ptr() for t in weights.values()}
    handles: list[LoadedDelegate] = []
    init = XnnpackBackend.init

    def recorded(self: XnnpackBackend, blob: bytes, specs: dict[str, Any]) -> LoadedDelegate:
        handles.append(init(self, blob, specs))
        return handles[-1]

    monkeypatch.setattr(XnnpackBackend, "init", recorded)
    Executor(load_program(lowered.program))  # from memory: what the run stage gets
    assert handles and _constant_pointers(handles) <= weight_pointers
    # On disk every weight is stored once: exported.pt2 holds it, the program refers to it.
    with zipfile.ZipFile(lowered.program) as z:
        sizes = {i.filename: i.file_size for i in z.infolist()}
        manifest = json.loads(z.read(EXTERNAL_MEMBER))["members"]
        index = json.loads(z.read("named_data.json"))
    big = [k for k, e in index.items() if e["nbytes"] >= MIN_SHARED_BYTES]
    assert big and all(sizes[f"named_data/{k}"] == 0 for k in big)
    assert all(manifest[f"named_data/{k}"][0][0] == "W" for k in big)
    weight_bytes = sum(t.nbytes for t in weights.values())
    assert sum(sizes.values()) < weight_bytes / 2
    handles.clear()
    Executor(load_program(lowered.program))  # from the file: weights read from exported.pt2
    assert handles and not _constant_pointers(handles) & weight_pointers


@pytest.mark.parametrize(("backend", "precision"), [("xnnpack", "fp16"), ("qnn", "int8")])
def test_converted_weights_are_named_data_of_their_own(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path, backend: str, precision: str
) -> None:
    cfg = tiny_cfg("mlp", f"backend={backend}", f"backend.precision={precision}")
    exported, lowered = export_and_lower(cfg, tmp_path / "run")
    named = load_program(lowered.program).named_data
    suffix = ".fp16" if precision == "fp16" else ".int8"
    assert any(k.endswith(suffix) for k in named)
    if precision == "int8":
        assert any(k.endswith(".int8.scales") for k in named)
    outputs = _ran_outputs(cfg, lowered.program, exported.inputs, tmp_path / "ran")
    assert relative_error(outputs, load_samples(exported.reference_outputs)[0]) < 0.1
