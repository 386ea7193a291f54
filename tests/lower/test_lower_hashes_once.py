"""The lower stage hashes exported.pt2 once and never reads its own program back to hash it,
and every fingerprint it writes is the hash of the file it names."""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

from stages.safe_io import file_digests
from tests.helpers.lowering import export, lower

# The exported-program loader keeps its own memo keyed by the bytes' hash; it is not the lower
# stage's hashing under test here.
_LOADER = str(Path("stages", "formats", "exported_program.py"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_lower_hashes_each_file_once_and_its_fingerprints_name_the_files(
    tiny_cfg: Callable[..., DictConfig],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    cfg = tiny_cfg("vit", "model.kwargs.dim=64", f"backend={backend}")
    run_dir = tmp_path / "run"
    exported = export(cfg, run_dir)
    program_size = exported.exported_program.stat().st_size
    real_sha256 = hashlib.sha256
    hashed_sizes: list[int] = []

    def counting_sha256(data: Any = b"", **kwargs: Any) -> Any:
        if not sys._getframe(1).f_code.co_filename.endswith(_LOADER):
            hashed_sizes.append(memoryview(data).nbytes)
        return real_sha256(data, **kwargs)

    file_digests.forget_all()  # as in a process that did not write exported.pt2 itself
    monkeypatch.setattr(hashlib, "sha256", counting_sha256)
    lowered = lower(cfg, exported, run_dir)
    monkeypatch.undo()
    program_size_lowered = lowered.program.stat().st_size
    assert hashed_sizes.count(program_size) == 1, hashed_sizes
    assert program_size_lowered not in hashed_sizes  # hashed while written, never read back

    exported_sha, lowered_sha = _sha(exported.exported_program), _sha(lowered.program)
    report = json.loads(lowered.lowering_report.read_text())
    assert report["program_fingerprint"] == exported_sha
    assert report["lowered_program_fingerprint"] == lowered_sha
    with zipfile.ZipFile(lowered.program) as archive:
        metadata = json.loads(archive.read("program.json"))["metadata"]
        if "external_weights.json" in archive.namelist():
            assert json.loads(archive.read("external_weights.json"))["sha256"] == exported_sha
    assert metadata["program_fingerprint"] == exported_sha
    with zipfile.ZipFile(lowered.etrecord) as archive:
        marker = json.loads(archive.read("etrecord_version.json"))
        reference = json.loads(archive.read("reference_program_ref.json"))
        info = json.loads(archive.read("lowering_info.json"))
    assert marker["program_fingerprint"] == reference["sha256"] == exported_sha
    assert reference["size"] == program_size
    assert info["lowered_program_fingerprint"] == lowered_sha
