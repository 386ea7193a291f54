"""Files analysed together prove they belong together, or the summary says it cannot be proven."""

from __future__ import annotations

from pathlib import Path

import pytest

from stages.analyze.config import AnalyzeConfig
from stages.analyze.link.linking import ProgramMismatchError
from stages.analyze.load.loading import AnalyzeInputError
from stages.analyze.report.terminal_report import format_terminal_report
from stages.analyze.stage import run_analyze
from stages.formats.etdump import read_debug_buffer, read_etdump, write_etdump
from stages.formats.etdump.records import STAMP_EVENTS
from tests.helpers.analyze_runs import RunTiny, read_summary
from tests.helpers.executorch_fixtures import executorch_fixtures

MLP = ("mlp", "backend=xnnpack")


def _without_stamps(etdump: Path, out: Path) -> Path:
    """The ETDump as a tool that does not stamp its files (ExecuTorch) would have written it."""
    dump = read_etdump(etdump)
    dump.run_data = [b for b in dump.run_data if b.name not in STAMP_EVENTS]
    for block in dump.run_data:
        block.allocators = [a for a in block.allocators if a.split(" ")[0] not in STAMP_EVENTS]
        block.events = [
            e
            for e in block.events
            if e.profile_event is None or e.profile_event.name not in STAMP_EVENTS
        ]
    write_etdump(out, dump)
    return out


def _payload_only(debug_buffer: Path, out: Path) -> Path:
    """The debug buffer without our trailer, as ExecuTorch's runtime writes one."""
    out.write_bytes(bytes(read_debug_buffer(debug_buffer).payload))
    return out


def test_our_files_are_proven_to_belong_together(run_tiny: RunTiny) -> None:
    run_dir = run_tiny("clean-mlp-xnnpack", *MLP)
    buffer = read_debug_buffer(run_dir / "debug.bin")
    assert buffer.has_trailer and buffer.program_fingerprint is not None
    identity = read_summary(run_dir)["program_identity"]
    assert identity == {
        "status": "proven",
        "reasons": [],
        "checked_outputs": 0,
        "shape_or_dtype_mismatches": 0,
        "mismatch_examples": [],
    }
    assert "program identity" not in format_terminal_report(run_dir / "summary.json")


def test_debug_buffer_of_a_same_shaped_run_with_other_weights_is_refused(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    mine = run_tiny("clean-mlp-xnnpack", *MLP)
    other = run_tiny("mlp-xnnpack-seed1", *MLP, "model.seed=1")
    assert (mine / "debug.bin").stat().st_size == (other / "debug.bin").stat().st_size
    files = (mine / "etdump.etdp", other / "debug.bin", mine / "etrecord.zip", tmp_path)
    with pytest.raises(ProgramMismatchError, match=r"is not the debug buffer .* was written with"):
        run_analyze(AnalyzeConfig(), *files)
    # An ETDump without our stamps: the buffer's own trailer still names its program.
    stripped = _without_stamps(mine / "etdump.etdp", tmp_path / "stripped.etdp")
    with pytest.raises(ProgramMismatchError, match=r"debug.bin was written by lowered program"):
        run_analyze(AnalyzeConfig(), stripped, other / "debug.bin", mine / "etrecord.zip", tmp_path)
    # A stamped ETDump and a trailer-less buffer: the ETDump's record of the bytes decides.
    bare = _payload_only(other / "debug.bin", tmp_path / "bare.bin")
    with pytest.raises(ProgramMismatchError, match="is not the debug buffer"):
        run_analyze(AnalyzeConfig(), mine / "etdump.etdp", bare, mine / "etrecord.zip", tmp_path)


def test_altered_or_truncated_debug_buffer_is_refused(run_tiny: RunTiny, tmp_path: Path) -> None:
    run_dir = run_tiny("clean-mlp-xnnpack", *MLP)
    data = bytearray((run_dir / "debug.bin").read_bytes())
    data[100] ^= 0x01
    flipped = tmp_path / "flipped.bin"
    flipped.write_bytes(bytes(data))
    args = (run_dir / "etrecord.zip", tmp_path)
    with pytest.raises(AnalyzeInputError, match=r"flipped.bin: its tensor bytes do not match"):
        run_analyze(AnalyzeConfig(), run_dir / "etdump.etdp", flipped, *args)
    cut = tmp_path / "cut.bin"
    cut.write_bytes(bytes(data[:200]) + bytes(data[-80:]))
    with pytest.raises(AnalyzeInputError, match=r"cut.bin: its trailer records \d+ bytes"):
        run_analyze(AnalyzeConfig(), run_dir / "etdump.etdp", cut, *args)
    # Without stamps or trailer, a buffer too short for the ETDump's tensors is still refused.
    stripped = _without_stamps(run_dir / "etdump.etdp", tmp_path / "stripped.etdp")
    short = tmp_path / "short.bin"
    short.write_bytes(bytes(read_debug_buffer(run_dir / "debug.bin").payload)[:100])
    with pytest.raises(ProgramMismatchError, match=r"ends at byte \d+, but .*short.bin holds 100"):
        run_analyze(AnalyzeConfig(), stripped, short, *args)


def test_foreign_etdump_is_checked_and_reported_as_unproven(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    run_dir = run_tiny("clean-mlp-xnnpack", *MLP)
    stripped = _without_stamps(run_dir / "etdump.etdp", tmp_path / "stripped.etdp")
    bare = _payload_only(run_dir / "debug.bin", tmp_path / "bare.bin")
    artifacts = run_analyze(AnalyzeConfig(), stripped, bare, run_dir / "etrecord.zip", tmp_path)
    summary = read_summary(tmp_path)
    identity = summary["program_identity"]
    assert identity["status"] == "unproven"
    assert any("no program fingerprint" in r for r in identity["reasons"])
    assert any("no debug-buffer sha256" in r for r in identity["reasons"])
    assert identity["checked_outputs"] > 0 and identity["shape_or_dtype_mismatches"] == 0
    assert summary["verdict"] == "pass" and summary["compared_outputs"] > 0  # still analysed
    text = format_terminal_report(artifacts.summary)
    assert "program identity NOT proven" in text and "shapes and dtypes agree" in text
    assert "program identity NOT proven" in artifacts.report.read_text()


def test_foreign_etdump_with_other_shapes_names_the_disagreement(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    run_dir = run_tiny("clean-mlp-xnnpack", *MLP)
    wide = run_tiny("mlp-xnnpack-batch8", *MLP, "model.inputs=[{shape:[8,32]}]")
    stripped = _without_stamps(wide / "etdump.etdp", tmp_path / "stripped.etdp")
    bare = _payload_only(wide / "debug.bin", tmp_path / "bare.bin")
    artifacts = run_analyze(AnalyzeConfig(), stripped, bare, run_dir / "etrecord.zip", tmp_path)
    identity = read_summary(tmp_path)["program_identity"]
    assert identity["status"] == "unproven"
    assert identity["shape_or_dtype_mismatches"] == identity["checked_outputs"] > 0
    assert "logged [8, " in identity["mismatch_examples"][0]
    assert "reference [4, " in identity["mismatch_examples"][0]
    text = format_terminal_report(artifacts.summary)
    assert "disagree in shape/dtype" in text and "may not belong together" in text


@pytest.mark.parametrize("name", ["etdump_1run.etdp", "etdump_1run_debug.etdp"])
def test_executorch_files_still_analyze(name: str, tmp_path: Path) -> None:
    fixtures = executorch_fixtures()
    buffer = fixtures / "debug_buffer_1run.bin"
    parsed = read_debug_buffer(buffer)
    assert not parsed.has_trailer and len(parsed.payload) == buffer.stat().st_size
    run_analyze(AnalyzeConfig(), fixtures / name, buffer, None, tmp_path)
    summary = read_summary(tmp_path)
    assert summary["program_identity"]["status"] == "no_etrecord"
    assert summary["latency_p50_ms"] > 0


def test_executorch_debug_etdump_with_a_too_short_buffer_is_refused(tmp_path: Path) -> None:
    fixtures = executorch_fixtures()
    short = tmp_path / "short.bin"
    short.write_bytes((fixtures / "debug_buffer_1run.bin").read_bytes()[:1000])
    with pytest.raises(ProgramMismatchError, match="holds 1000 bytes of tensors"):
        run_analyze(AnalyzeConfig(), fixtures / "etdump_1run_debug.etdp", short, None, tmp_path)
