"""The lowered program keeps the model's weights once, by reference to exported.pt2 beside it."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from stages.formats.program import ProgramError
from stages.formats.shared_weights import (
    EXTERNAL_MEMBER,
    WeightFile,
    _matches,
    open_weight_file,
    restore,
    share,
    split_member,
)
from stages.handover.lowered_program import load_program
from stages.lower.stage import run_lower
from tests.helpers.lowering import export_and_lower
from tests.helpers.plain_weight_scan import reference_matches


def _rewrite(source: Path, target: Path, manifest: dict) -> None:
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            zout.writestr(
                item.filename, json.dumps(manifest) if item.filename == EXTERNAL_MEMBER else data
            )


@pytest.fixture
def vit_cfg(tiny_cfg: Callable[..., DictConfig]) -> DictConfig:
    return tiny_cfg("vit", "backend=xnnpack")


@pytest.fixture
def lowered_vit(vit_cfg: DictConfig, tmp_path: Path) -> Path:
    _, lowered = export_and_lower(vit_cfg, tmp_path / "run")
    return lowered.program


def test_weights_are_stored_once_and_spliced_back_exactly(lowered_vit: Path) -> None:
    exported = lowered_vit.parent / "exported.pt2"
    weights = open_weight_file(exported)
    weight_bytes = sum(len(b) for b in weights.members.values())
    with zipfile.ZipFile(lowered_vit) as z:
        manifest = json.loads(z.read(EXTERNAL_MEMBER))
        stored = sum(i.file_size for i in z.infolist())
    assert manifest["sha256"] == weights.sha256 and manifest["members"]
    referenced = {s[1] for segs in manifest["members"].values() for s in segs if s[0] == "W"}
    assert sum(len(weights.members[n]) for n in referenced) > 0.9 * weight_bytes
    program = load_program(lowered_vit)
    total = sum(len(b) for b in program.delegate_blobs.values())
    total += sum(e.nbytes for e in program.named_data.values())
    assert stored < total  # the delegates' bytes as loaded are larger than what the file holds
    # The delegates' fp32 weights are named data, each a whole weight member kept by reference.
    named = {m: segs for m, segs in manifest["members"].items() if m.startswith("named_data/")}
    assert named and all(len(segs) == 1 and segs[0][0] == "W" for segs in named.values())
    assert not any(split_member(blob, weights) for blob in program.delegate_blobs.values())


def test_loaded_program_equals_the_unshared_one(
    lowered_vit: Path, vit_cfg: DictConfig, tmp_path: Path
) -> None:
    program = load_program(lowered_vit)
    run = lowered_vit.parent
    plain_dir = tmp_path / "plain"  # exported.pt2 is not beside it: everything inline
    plain_dir.mkdir()
    plain = run_lower(
        OmegaConf.to_object(vit_cfg.backend),
        run / "exported.pt2",
        run / "inputs.pt",
        run / "reference_outputs.pt",
        plain_dir,
    ).program
    with zipfile.ZipFile(plain) as z:
        assert EXTERNAL_MEMBER not in z.namelist()
    assert plain.stat().st_size > 2 * lowered_vit.stat().st_size
    again = load_program(plain)
    assert again.delegate_blobs == program.delegate_blobs
    assert again.named_data.keys() == program.named_data.keys()
    assert all(torch.equal(again.named_data[k].data, e.data) for k, e in program.named_data.items())
    assert all(
        torch.equal(again.constant_tensors[k], v) for k, v in program.constant_tensors.items()
    )


def test_a_missing_or_other_exported_program_is_refused(
    lowered_vit: Path, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(lowered_vit, alone / "lowered_program.zip")
    with pytest.raises(ProgramError, match=r"exported\.pt2 beside it, which is missing"):
        load_program(alone / "lowered_program.zip")
    _, other = export_and_lower(
        tiny_cfg("vit", "backend=xnnpack", "model.kwargs.dim=48"), tmp_path / "other"
    )
    shutil.copy(other.program.parent / "exported.pt2", alone / "exported.pt2")
    with pytest.raises(ProgramError, match=r"was lowered from another exported\.pt2"):
        load_program(alone / "lowered_program.zip")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.update(file="../exported.pt2"), "names no valid weight file"),
        (
            lambda m: next(iter(m["members"].values())).append(["W", "archive/nope"]),
            "bad weight reference",
        ),
        (
            lambda m: next(iter(m["members"].values())).append(["L", 10**9]),
            "bad weight reference",
        ),
        (
            lambda m: next(iter(m["members"].values())).extend(
                [["W", next(s[1] for s in next(iter(m["members"].values())) if s[0] == "W")]] * 5000
            ),
            "expand past",
        ),
        (lambda m: m["members"].update({"delegates/99.bin": []}), "names no member"),
    ],
)
def test_hostile_references_are_refused(
    lowered_vit: Path, tmp_path: Path, edit: Callable[[dict], None], message: str
) -> None:
    with zipfile.ZipFile(lowered_vit) as z:
        manifest = json.loads(z.read(EXTERNAL_MEMBER))
    edit(manifest)
    target = lowered_vit.parent / "hostile.pte"
    _rewrite(lowered_vit, target, manifest)
    with pytest.raises(ProgramError, match=message):
        load_program(target)


def _original_members(program: Path) -> dict[str, bytes]:
    """The constants, delegate blobs and named data as the backend produced them (references
    spliced back)."""
    with zipfile.ZipFile(program) as z:
        names = [
            n
            for n in z.namelist()
            if n == "constants.pt" or n.startswith(("delegates/", "named_data/"))
        ]
        members = {n: z.read(n) for n in names}
        if EXTERNAL_MEMBER not in z.namelist():
            return members
        manifest = json.loads(z.read(EXTERNAL_MEMBER))
    return restore(members, manifest, program.parent / "exported.pt2", str(program))


def _plain_share(members: dict[str, bytes], weights: WeightFile) -> dict[str, list[list]]:
    """The manifest's members as the plain scan (the lower stage's former matching) cuts them."""
    spliced: dict[str, list[list]] = {}
    for name, data in members.items():
        segments: list[list] = []
        cursor = 0
        for pos, member in reference_matches(data, weights.members):
            if pos > cursor:
                segments.append(["L", pos - cursor])
            segments.append(["W", member])
            cursor = pos + len(weights.members[member])
        if segments and cursor < len(data):
            segments.append(["L", len(data) - cursor])
        if segments:
            spliced[name] = segments
    return spliced


@pytest.mark.parametrize(
    "backend",
    [("backend=xnnpack",), ("backend=qnn", "backend.precision=fp16"), ("backend=portable",)],
    ids=["xnnpack-fp32", "qnn-fp16", "portable"],
)
def test_real_programs_share_exactly_what_the_plain_scan_finds(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path, backend: tuple[str, ...]
) -> None:
    _, lowered = export_and_lower(
        tiny_cfg("vit", "model.kwargs.dim=64", *backend), tmp_path / "run"
    )
    weights = open_weight_file(lowered.program.parent / "exported.pt2")
    members = _original_members(lowered.program)
    for data in members.values():
        assert _matches(data, weights) == reference_matches(data, weights.members)
    with zipfile.ZipFile(lowered.program) as z:
        shared = EXTERNAL_MEMBER in z.namelist()
        written = json.loads(z.read(EXTERNAL_MEMBER))["members"] if shared else {}
    assert written == _plain_share(members, weights)
    references = sum(s[0] == "W" for segments in written.values() for s in segments)
    if "backend.precision=fp16" in backend:  # the blob holds converted weights: none to share
        assert references == 0
    else:
        assert references >= 8


def test_real_weights_at_odd_offsets_in_reversed_order_are_shared_and_restored(
    lowered_vit: Path, tmp_path: Path
) -> None:
    exported = lowered_vit.parent / "exported.pt2"
    weights = open_weight_file(exported)
    parts: list[bytes] = [b"header"]
    for i, payload in enumerate(reversed(list(weights.members.values()))):
        parts += [payload, b"\x07" * (2 * i + 1)]  # odd gaps: no alignment at all
    parts.append(next(iter(weights.members.values()))[:-1])  # a truncated copy is not a match
    blob = b"".join(parts)
    members = {"delegates/odd.bin": blob}
    assert _matches(blob, weights) == reference_matches(blob, weights.members)
    stored, manifest = share(members, weights)
    assert [s[1] for s in manifest["members"]["delegates/odd.bin"] if s[0] == "W"] == list(
        reversed(list(weights.members))
    )
    weight_bytes = sum(len(payload) for payload in weights.members.values())
    assert len(stored["delegates/odd.bin"]) == len(blob) - weight_bytes
    assert restore(stored, manifest, exported, "odd blob") == members
