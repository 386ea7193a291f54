"""Named data members of a lowered program: saved, shared with the weight file beside it, loaded
back exactly, and refused with a clear error when truncated, missing, unlisted or malformed."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from stages.formats.named_data import NamedData, tensor_bytes
from stages.formats.program import Program, ProgramError, SubProgram
from stages.formats.shared_weights import EXTERNAL_MEMBER, open_weight_file
from stages.handover import lowered_program as program_handover
from stages.handover.lowered_program import load_program, save_program


def _program(named: dict[str, torch.Tensor]) -> Program:
    return Program(
        main=SubProgram(num_values=0, inputs=[], instructions=[], outputs=[]),
        constants={},
        constant_tensors={},
        delegate_blobs={},
        named_data={k: NamedData(tensor_bytes(t, k), 16) for k, t in named.items()},
    )


def _tensors() -> dict[str, torch.Tensor]:
    return {"big.weight": torch.randn(64, 64), "small": torch.arange(5, dtype=torch.int64)}


def _load_from_file(path: Path) -> Program:
    program_handover.forget_saved()  # the file, not what this process kept
    return load_program(path)


def test_named_data_round_trips_through_the_file(tmp_path: Path) -> None:
    tensors = _tensors()
    path = tmp_path / "lowered_program.zip"
    save_program(_program(tensors), path)
    with zipfile.ZipFile(path) as z:
        index = json.loads(z.read("named_data.json"))
        stored = z.read("named_data/big.weight")
    assert index == {
        "big.weight": {"nbytes": 64 * 64 * 4, "alignment": 16},
        "small": {"nbytes": 40, "alignment": 16},
    }
    assert stored == tensors["big.weight"].numpy().tobytes()
    loaded = _load_from_file(path).named_data
    assert sorted(loaded) == ["big.weight", "small"]
    for key, tensor in tensors.items():
        assert loaded[key].alignment == 16 and loaded[key].data.data_ptr() % 16 == 0
        assert torch.equal(loaded[key].data, tensor_bytes(tensor, key))


def test_named_data_equal_to_a_weight_member_is_stored_by_reference(tmp_path: Path) -> None:
    tensors = _tensors()
    weights_path = tmp_path / "exported.pt2"
    with zipfile.ZipFile(weights_path, "w") as z:
        z.writestr("archive/data/weights/weight_0", tensors["big.weight"].numpy().tobytes())
    path = tmp_path / "lowered_program.zip"
    save_program(_program(tensors), path, open_weight_file(weights_path))
    with zipfile.ZipFile(path) as z:
        manifest = json.loads(z.read(EXTERNAL_MEMBER))
        assert z.getinfo("named_data/big.weight").file_size == 0
        assert z.getinfo("named_data/small").file_size == 40  # too small to be worth a reference
    assert manifest["members"] == {
        "named_data/big.weight": [["W", "archive/data/weights/weight_0"]]
    }
    loaded = _load_from_file(path).named_data
    assert torch.equal(loaded["big.weight"].data, tensor_bytes(tensors["big.weight"], "w"))
    weights_path.unlink()
    with pytest.raises(ProgramError, match=r"exported\.pt2 beside it, which is missing"):
        _load_from_file(path)


def _rewritten(source: Path, target: Path, edit: Callable[[dict[str, bytes]], None]) -> Path:
    with zipfile.ZipFile(source) as z:
        members = {n: z.read(n) for n in z.namelist()}
    edit(members)
    with zipfile.ZipFile(target, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return target


_INDEX = {"big.weight": {"nbytes": 64 * 64 * 4}, "small": {"nbytes": 40}}


def _set(name: str, data: bytes) -> Callable[[dict[str, bytes]], None]:
    return lambda members: members.update({name: data})


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda m: m.update({"named_data/big.weight": m["named_data/big.weight"][:-3]}),
            r"'big\.weight' holds 16381 bytes, its index says 16384 \(truncated or corrupt",
        ),
        (lambda m: m.pop("named_data/small"), r"'small' is listed but its member .* is missing"),
        (_set("named_data/extra", b"x"), r"member\(s\) \['extra'\] not in the index"),
        (lambda m: m.pop("named_data.json"), "named data members without named_data.json"),
        (_set("named_data.json", b"[1, 2]"), "named_data.json is not a key -> entry object"),
        (_set("named_data.json", b"{not json"), "corrupt program"),
        (
            _set(
                "named_data.json",
                json.dumps({"big.weight": {"nbytes": "x"}, "small": {"nbytes": 40}}).encode(),
            ),
            r"'big\.weight': malformed index entry",
        ),
        (
            _set("named_data.json", json.dumps({"../up": {"nbytes": 1}, **_INDEX}).encode()),
            "named data key '../up' is not valid",
        ),
        (
            _set(
                "named_data.json",
                json.dumps({**_INDEX, "small": {"nbytes": 40, "alignment": 3}}).encode(),
            ),
            "alignment 3 must be a power of two",
        ),
    ],
    ids=[
        "truncated",
        "missing",
        "unlisted",
        "no-index",
        "index-list",
        "index-json",
        "nbytes",
        "key",
        "alignment",
    ],
)
def test_corrupt_named_data_is_refused_naming_the_file(
    tmp_path: Path, edit: Callable[[dict[str, bytes]], None], message: str
) -> None:
    path = tmp_path / "lowered_program.zip"
    save_program(_program(_tensors()), path)
    evil = _rewritten(path, tmp_path / "evil.zip", edit)
    with pytest.raises(ProgramError, match=message) as caught:
        _load_from_file(evil)
    assert "evil.zip" in str(caught.value)
