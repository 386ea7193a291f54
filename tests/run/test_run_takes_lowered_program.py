"""After the lower stage of the same invocation, the run stage takes the lowered program from
memory: it reads neither `lowered_program.zip` nor `exported.pt2` again, stamps the file's
sha256, and writes what a run from the files writes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

import stages.formats.shared_weights as shared_weights
from stages.formats.etdump import read_debug_buffer, read_etdump
from stages.formats.etdump.records import FINGERPRINT_EVENT, read_stamp
from stages.handover import lowered_program as program_handover
from stages.handover.samples import load_samples
from stages.run.stage import RunArtifacts, run_run
from tests.helpers.lowering import export_and_lower


def _run(cfg: DictConfig, program: Path, inputs: Path, run_dir: Path) -> RunArtifacts:
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_run(OmegaConf.to_object(cfg.runtime), program, inputs, run_dir)


@pytest.mark.parametrize("backend", ["xnnpack", "qnn"])
def test_the_run_after_lower_reads_no_program_file_and_writes_the_same(
    tiny_cfg: Callable[..., DictConfig],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    cfg = tiny_cfg("vit", f"backend={backend}", "runtime.iterations=2")
    program_handover.forget_saved()
    exported, lowered = export_and_lower(cfg, tmp_path / "run")
    with monkeypatch.context() as patch:

        def no_second_read(path: Path) -> shared_weights.WeightFile:
            raise AssertionError(f"{path} read again by the run stage")

        patch.setattr(shared_weights, "open_weight_file", no_second_read)
        handed = _run(cfg, lowered.program, exported.inputs, tmp_path / "handed")
    from_files = _run(cfg, lowered.program, exported.inputs, tmp_path / "from_files")

    program_sha256 = hashlib.sha256(lowered.program.read_bytes()).hexdigest()
    for ran in (handed, from_files):
        assert read_stamp(read_etdump(ran.etdump), FINGERPRINT_EVENT) == program_sha256
    assert (
        read_debug_buffer(handed.debug_buffer).content_sha256()
        == read_debug_buffer(from_files.debug_buffer).content_sha256()
    )
    for a, b in zip(load_samples(handed.outputs), load_samples(from_files.outputs), strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
