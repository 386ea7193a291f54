"""A run's ETRecord refers to `exported.pt2` by sha256: analysed beside it, refused with the option
named when the program is missing or another one, and analysed alone once packed."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
from omegaconf import open_dict

from pipeline.runner import StageFailedError, run_pipeline
from pipeline.tools.pack_etrecord import main as pack_main
from stages.analyze.config import AnalyzeConfig
from stages.analyze.stage import run_analyze
from stages.formats.etrecord import ETRecordError, ReferencedProgramError
from tests.helpers.analyze_runs import RunTiny, read_summary
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config


def _analyze(out: Path, run: Path, etrecord: Path, cfg: AnalyzeConfig | None = None) -> None:
    out.mkdir(exist_ok=True)
    run_analyze(cfg or AnalyzeConfig(), run / "etdump.etdp", run / "debug.bin", etrecord, out)


def test_by_hash_etrecord_is_analysed_and_packed_one_alone_elsewhere(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    run = run_tiny("xnnpack_mlp", "mlp")
    with zipfile.ZipFile(run / "etrecord.zip") as archive:
        assert "reference_program.pt2" not in archive.namelist()
    _analyze(tmp_path / "by_hash", run, run / "etrecord.zip")
    by_hash = read_summary(tmp_path / "by_hash")
    assert by_hash["verdict"] != "not_evaluated" and not by_hash.get("not_evaluated")

    # Packed, then carried alone (no exported.pt2 beside it) with the ETDump and debug buffer.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert pack_main([str(run), "--out", str(elsewhere / "etrecord.zip")]) == 0
    for name in ("etdump.etdp", "debug.bin"):
        shutil.copy(run / name, elsewhere / name)
    assert not (elsewhere / "exported.pt2").exists()
    _analyze(tmp_path / "packed", elsewhere, elsewhere / "etrecord.zip")
    packed = read_summary(tmp_path / "packed")
    assert packed["verdict"] == by_hash["verdict"]
    assert (tmp_path / "packed" / "numeric_gap.csv").read_text() == (
        tmp_path / "by_hash" / "numeric_gap.csv"
    ).read_text()


def test_missing_program_is_refused_with_the_option_named(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    run = run_tiny("xnnpack_mlp", "mlp")
    carried = Path(shutil.copy(run / "etrecord.zip", tmp_path / "etrecord.zip"))
    with pytest.raises(ReferencedProgramError) as raised:
        _analyze(tmp_path / "out", run, carried)
    message = str(raised.value)
    assert str(carried) in message and "does not exist" in message
    assert "analyze.exported_program=PATH" in message and "pack_etrecord" in message
    # Passing the program by the option it names is the fix.
    program = AnalyzeConfig(exported_program=str(run / "exported.pt2"))
    _analyze(tmp_path / "out", run, carried, program)
    assert read_summary(tmp_path / "out")["verdict"] != "not_evaluated"


@pytest.mark.parametrize("change", ["same_size_other_bytes", "other_size"])
def test_another_program_is_refused_with_the_option_named(
    run_tiny: RunTiny, tmp_path: Path, change: str
) -> None:
    run = run_tiny("xnnpack_mlp", "mlp")
    data = bytearray((run / "exported.pt2").read_bytes())
    if change == "other_size":
        data += b"\0"
    else:
        data[len(data) // 2] ^= 0xFF
    other = tmp_path / "other.pt2"
    other.write_bytes(bytes(data))
    cfg = AnalyzeConfig(exported_program=str(other))
    with pytest.raises(ReferencedProgramError) as raised:
        _analyze(tmp_path / "out", run, run / "etrecord.zip", cfg)
    message = str(raised.value)
    assert f"analyze.exported_program={other}" in message
    assert "do not belong together" in message and "re-run the lower stage" in message


def test_pipeline_analyze_stage_names_the_option(run_tiny: RunTiny, tmp_path: Path) -> None:
    """Through the runner: the stage registry hands analyze.exported_program to the loader."""
    run = run_tiny("xnnpack_mlp", "mlp")
    wrong = tmp_path / "wrong.pt2"
    wrong.write_bytes(b"not the program")
    cfg = compose_config(
        tmp_path,
        [
            *TINY_MODEL_OVERRIDES["mlp"],
            "tracking=none",
            "stages=[analyze]",
            f"analyze.etdump={run / 'etdump.etdp'}",
            f"analyze.etrecord={run / 'etrecord.zip'}",
            f"analyze.exported_program={wrong}",
        ],
    )
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    with pytest.raises(StageFailedError) as raised:
        run_pipeline(cfg, print_summary=False)
    assert isinstance(raised.value.__cause__, ETRecordError)
    assert f"analyze.exported_program={wrong}" in str(raised.value.__cause__)
