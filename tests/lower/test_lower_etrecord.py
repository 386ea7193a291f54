"""The lower stage writes its ETRecord as a new file (the program referred to by hash, not copied)
and never touches what it read."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from pipeline.tools.pack_etrecord import main as pack_main
from stages.export.stage import run_export
from stages.formats.etrecord import ETRecordError
from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.handles.graph_handles import iter_operator_nodes
from stages.handover.etrecord import etrecord_program, load_etrecord
from stages.lower.stage import run_lower
from tests.helpers.lowering import export_and_lower


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_lower_leaves_its_inputs_alone_and_its_etrecord_refers_to_the_program_by_hash(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    cfg = tiny_cfg("vit", "inputs.count=2")
    exported = run_export(
        OmegaConf.to_object(cfg.model),
        OmegaConf.to_object(cfg.inputs),
        OmegaConf.to_object(cfg.export),
        run_dir,
    )
    inputs = [exported.exported_program, exported.inputs, exported.reference_outputs]
    before = {p.name: (_sha(p), p.stat().st_ino) for p in inputs}
    assert not (run_dir / "etrecord.zip").exists()

    lowered = run_lower(
        OmegaConf.to_object(cfg.backend), *inputs, run_dir, model_name=str(cfg.model.name)
    )
    assert {p.name: (_sha(p), p.stat().st_ino) for p in inputs} == before

    # The program is stored once: the ETRecord holds its hash, not a second copy.
    with zipfile.ZipFile(lowered.etrecord) as archive:
        names = set(archive.namelist())
    assert "reference_program.pt2" not in names and "reference_program_ref.json" in names
    program_size = exported.exported_program.stat().st_size
    assert lowered.etrecord.stat().st_size < program_size / 2

    # Carried alone, it is refused by name; packed, it has everything the analysis needs.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    carried = Path(shutil.copy(lowered.etrecord, elsewhere / "etrecord.zip"))
    with pytest.raises(ETRecordError, match=r"analyze\.exported_program=PATH.*pack_etrecord"):
        load_etrecord(carried)
    assert pack_main([str(run_dir), "--out", str(elsewhere / "etrecord_full.zip")]) == 0
    carried.unlink()
    record = load_etrecord(elsewhere / "etrecord_full.zip")
    assert record.model_name == "vit" and len(record.representative_inputs) == 2
    assert record.program_bytes() == exported.exported_program.read_bytes()
    program = etrecord_program(record)
    handles = {n.meta[DEBUG_HANDLE_META] for n in iter_operator_nodes(program.graph_module)}
    assert set(record.handles) == handles
    assert record.delegate_maps and record.lowered_graph
    assert record.lowering_info["lowered_program_fingerprint"] == _sha(lowered.program)
    qkv = [
        info for info in record.handles.values() if any("qkv" in m for m in info.module_hierarchy)
    ]
    assert qkv and any("vit.py" in t for info in qkv for t in info.stack_traces)


def test_left_out_ops_are_one_log_line_counted_by_reason(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="stages.lower.stage"):
        _, lowered = export_and_lower(tiny_cfg("vit", "backend=xnnpack"), tmp_path)
    rejected = json.loads(lowered.lowering_report.read_text())["rejected_ops"]
    assert len(rejected) >= 2  # tiny vit: expand + select ops stay on the portable runtime
    lines = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith(f"[lower] {len(rejected)} ops left out of delegation (")
    reasons: dict[str, int] = {}
    for item in rejected:
        reasons[item["reason"]] = reasons.get(item["reason"], 0) + 1
    for reason, count in reasons.items():
        assert f"{count} × {reason}" in line
    assert "lowering.json" in line
