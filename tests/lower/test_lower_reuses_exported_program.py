"""Export then lower in one invocation: lower takes the program export holds instead of loading
`exported.pt2` again, and lowers exactly what a load from the file would give."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

import stages.formats.exported_program as exported_program_module
from stages.export.stage import run_export
from stages.handover import exported_program as ep_handover
from stages.handover.etrecord import load_etrecord
from stages.lower.stage import run_lower


def _lowered_view(etrecord: Path, program: Path) -> tuple[object, ...]:
    record = load_etrecord(etrecord)
    # Timings differ, and so does the zip's sha256 (its members carry their write time): the
    # program itself is compared member by member below.
    info = {
        k: v
        for k, v in record.lowering_info.items()
        if "seconds" not in k and k != "lowered_program_fingerprint"
    }
    with zipfile.ZipFile(program) as archive:
        document = json.loads(archive.read("program.json"))
    return record.handles, record.lowered_graph, record.delegate_maps, info, document


@pytest.mark.parametrize("model", ["vit", "cond_model"])
def test_lower_after_export_loads_nothing_and_lowers_the_same(
    tiny_cfg: Callable[..., DictConfig],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
) -> None:
    cfg = tiny_cfg(model, "backend=xnnpack")
    ep_handover._LOADED.clear()  # only what this export keeps
    exported = run_export(
        OmegaConf.to_object(cfg.model),
        OmegaConf.to_object(cfg.inputs),
        OmegaConf.to_object(cfg.export),
        tmp_path / "run",
    )
    loads: list[str] = []
    real_load = exported_program_module.load_exported_program_bytes

    def counted_load(data: bytes, what: str) -> object:
        loads.append(what)
        return real_load(data, what)

    monkeypatch.setattr(exported_program_module, "load_exported_program_bytes", counted_load)
    files = (exported.exported_program, exported.inputs, exported.reference_outputs)
    backend = OmegaConf.to_object(cfg.backend)
    for name in ("reused", "loaded"):
        (tmp_path / name).mkdir()
    reused = run_lower(backend, *files, tmp_path / "reused", model_name=model)  # type: ignore[arg-type]
    assert loads == []  # the program export holds, not exported.pt2 parsed again

    ep_handover._LOADED.clear()
    loaded = run_lower(backend, *files, tmp_path / "loaded", model_name=model)  # type: ignore[arg-type]
    assert loads == [str(exported.exported_program)]
    assert _lowered_view(reused.etrecord, reused.program) == _lowered_view(
        loaded.etrecord, loaded.program
    )
