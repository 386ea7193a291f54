"""Hostile files cost little: ~2 MB zip bombs are refused in < 1 s and < 200 MB of extra memory.

Bombs declare (or, lying, inflate to) 1.5 GiB; two more files sit just inside the ratio limits,
the most a ~2 MB file may make the reader inflate.

Cost is measured in a fresh process that first loads clean files of each kind (imports and
caches paid), resets Linux's peak-RSS mark, then reads every bomb: peak minus the resident set
before the first bomb is what the bombs cost. A control process inflating one bomb unbounded shows the measure sees it.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
import torch

from stages.handover.etrecord import pack_etrecord
from tests.helpers.cli_runner import REPO
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config
from tests.helpers.lowering import export_and_lower
from tests.helpers.zip_bombs import (
    BOMB_MIB,
    bomb_member,
    replace_member,
    stored_member,
    within_limits_member,
    write_zip,
)

# Work, not time: a refusal inflates at most a few members' worth, never the bomb's 1.5 GiB.
MAX_INFLATED_BYTES = 64 << 20
MAX_EXTRA_BYTES = 200 << 20


def _pt2_member(pt2: bytes, suffix: str) -> str:
    with zipfile.ZipFile(io.BytesIO(pt2)) as archive:
        return next(n for n in archive.namelist() if n.endswith(suffix))


def _executorch_etrecord_bomb() -> bytes:
    """ExecuTorch's ETRecord layout (marker + a recorded program) whose graph JSON is a bomb."""
    empty = io.BytesIO()
    torch.save({}, empty)
    return write_zip(
        [
            stored_member("ETRECORD_V0", b""),
            bomb_member("exported_program"),
            stored_member("exported_program_state_dict", empty.getvalue()),
        ]
    )


def _bombs(clean: dict[str, bytes]) -> dict[str, tuple[bytes, str, str]]:
    """name -> (file bytes, loader, error it must raise)."""
    etrecord, pt2, program = clean["etrecord"], clean["pt2"], clean["program"]
    graph = _pt2_member(pt2, "models/model.json")
    nested = replace_member(pt2, graph, bomb_member(graph))
    etrecord_load = "stages.formats.etrecord:ETRecord.load"
    return {
        "etrecord: reference program inflates to 1.5 GiB": (
            replace_member(etrecord, "reference_program.pt2", bomb_member("reference_program.pt2")),
            etrecord_load,
            "stages.formats.etrecord:ETRecordError",
        ),
        "etrecord: reference program declares 4 KiB, inflates to 1.5 GiB": (
            replace_member(
                etrecord, "reference_program.pt2", bomb_member("reference_program.pt2", 4096)
            ),
            etrecord_load,
            "stages.formats.etrecord:ETRecordError",
        ),
        "etrecord: nested pt2 whose graph inflates to 1.5 GiB": (
            replace_member(
                etrecord, "reference_program.pt2", stored_member("reference_program.pt2", nested)
            ),
            etrecord_load,
            "stages.formats.etrecord:ETRecordError",
        ),
        "executorch etrecord: graph inflates to 1.5 GiB": (
            _executorch_etrecord_bomb(),
            etrecord_load,
            "stages.formats.etrecord:ETRecordError",
        ),
        "etrecord: reference program inflates 8x, just inside the limits": (
            replace_member(
                etrecord, "reference_program.pt2", within_limits_member("reference_program.pt2")
            ),
            etrecord_load,
            "stages.formats.etrecord:ETRecordError",
        ),
        "program: program.json inflates 8x, just inside the limits": (
            replace_member(program, "program.json", within_limits_member("program.json")),
            "stages.handover.lowered_program:load_program",
            "stages.formats.program:ProgramError",
        ),
        "program: program.json inflates to 1.5 GiB": (
            replace_member(program, "program.json", bomb_member("program.json")),
            "stages.handover.lowered_program:load_program",
            "stages.formats.program:ProgramError",
        ),
        "program: constants.pt declares 4 KiB, inflates to 1.5 GiB": (
            replace_member(program, "constants.pt", bomb_member("constants.pt", 4096)),
            "stages.handover.lowered_program:load_program",
            "stages.formats.program:ProgramError",
        ),
        "exported.pt2: graph inflates to 1.5 GiB": (
            nested,
            "stages.handover.exported_program:load_exported_program",
            "stages.formats.exported_program:ExportedProgramError",
        ),
        "tensor file: data.pkl declares 4 KiB, inflates to 1.5 GiB": (
            replace_member(
                clean["inputs"],
                _pt2_member(clean["inputs"], "data.pkl"),
                bomb_member(_pt2_member(clean["inputs"], "data.pkl"), 4096),
            ),
            "stages.safe_io.safe_load:load_tensor_file",
            "stages.safe_io.tensor_file:UnsafePayloadError",
        ),
    }


@pytest.fixture(scope="module")
def clean_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("clean")
    cfg = compose_config(root, [*TINY_MODEL_OVERRIDES["mlp"], "backend=portable"])
    exported, lowered = export_and_lower(cfg, root / "run")
    packed = root / "etrecord_full.zip"  # self-contained: its program member can be a bomb
    pack_etrecord(lowered.etrecord, packed)
    return {
        "etrecord": packed,
        "pt2": exported.exported_program,
        "program": lowered.program,
        "inputs": exported.inputs,
    }


def _measure(spec: dict[str, Any], path: Path) -> dict[str, Any]:
    path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.refusal_cost", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_zip_bombs_are_refused_without_inflating_them(
    clean_files: dict[str, Path], tmp_path: Path
) -> None:
    clean = {kind: path.read_bytes() for kind, path in clean_files.items()}
    cases = []
    for index, (name, (data, loader, error)) in enumerate(_bombs(clean).items()):
        path = tmp_path / f"bomb_{index}.bin"
        path.write_bytes(data)
        assert 1 << 20 < len(data) < 3 << 20, (name, len(data))  # a ~2 MB file ...
        cases.append({"name": name, "path": str(path), "loader": loader, "error": error})
    warmups = [
        {"loader": "stages.formats.etrecord:ETRecord.load", "path": str(clean_files["etrecord"])},
        {
            "loader": "stages.handover.lowered_program:load_program",
            "path": str(clean_files["program"]),
        },
        {
            "loader": "stages.handover.exported_program:load_exported_program",
            "path": str(clean_files["pt2"]),
        },
        {"loader": "stages.safe_io.safe_load:load_tensor_file", "path": str(clean_files["inputs"])},
    ]
    spec = {"warmups": warmups, "cases": cases}
    measured = _measure(spec, tmp_path / "bombs.json")
    assert len(measured["cases"]) == len(cases) >= 10
    for case in measured["cases"]:
        # ... that would inflate to 1.5 GiB is refused by the format's own error, naming the file.
        assert case["expected_error"], case
        assert "bomb_" in case["message"], case
        if "declares" not in case["name"] and "1.5 GiB" in case["name"]:  # refused unread
            assert "refusing it before inflating" in case["message"], case
        assert case["inflated_bytes"] < MAX_INFLATED_BYTES, case
    # Peak RSS (reset after the warm-ups) minus the resident set before the first bomb.
    extra = measured["peak_rss"] - measured["rss_before_cases"]
    seconds = {c["name"]: round(c["seconds"], 4) for c in measured["cases"]}
    peaks = {
        c["name"]: (c["peak_rss"] - measured["rss_before_cases"]) >> 20 for c in measured["cases"]
    }
    print(f"extra memory {extra >> 20} MiB; peak MiB after each case {peaks}; seconds {seconds}")
    assert extra < MAX_EXTRA_BYTES, (extra >> 20, seconds)
    # The measure sees memory: inflating one bomb without bounds shows up as >= 250 MiB.
    control = [{**cases[0], "loader": "tests.helpers.refusal_cost:inflate_largest_member"}]
    unbounded = _measure({**spec, "cases": control}, tmp_path / "control.json")
    assert unbounded["peak_rss"] - unbounded["rss_before_cases"] > 250 << 20, unbounded
    assert unbounded["cases"][0]["inflated_bytes"] > 250 << 20, unbounded  # the counter sees it


def test_the_bombs_are_real(clean_files: dict[str, Path]) -> None:
    """Each bomb member really inflates beyond 1 GiB (streamed here, never held in memory)."""
    clean = {kind: path.read_bytes() for kind, path in clean_files.items()}
    data, _, _ = _bombs(clean)["program: constants.pt declares 4 KiB, inflates to 1.5 GiB"]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo("constants.pt")
        assert info.file_size == 4096
        offset = info.header_offset + 30 + len(info.filename)
        stream = data[offset : offset + info.compress_size]
    inflater, total = zlib.decompressobj(-15), 0
    for start in range(0, len(stream), 1 << 16):
        chunk = inflater.decompress(stream[start : start + (1 << 16)], 1 << 24)
        total += len(chunk)
        while inflater.unconsumed_tail:
            total += len(inflater.decompress(inflater.unconsumed_tail, 1 << 24))
    assert total == BOMB_MIB << 20 > 1 << 30
