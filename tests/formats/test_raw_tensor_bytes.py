"""Raw weight bytes are never mistaken for a pickle, whatever their first byte (issue 12.4)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
import torch

from stages.formats.exported_program import ExportedProgramError, exported_program_bytes
from stages.handover.exported_program import load_exported_program
from tests.helpers.hostile_files import pickle_payload, rewrite_zip, torch_zip_with_pickle


class _EveryFirstByte(torch.nn.Module):
    """256 weights; weight i's raw bytes start with byte i (0x80, a pickle's first byte, too)."""

    def __init__(self) -> None:
        super().__init__()
        for value in range(256):
            raw = torch.tensor([value, 1, 2, 3], dtype=torch.uint8).view(torch.float32)
            self.register_parameter(
                f"w{value}", torch.nn.Parameter(raw.clone(), requires_grad=False)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.cat(list(self.parameters())).nan_to_num().sum()


@pytest.fixture(scope="module")
def archive() -> bytes:
    program = torch.export.export(_EveryFirstByte(), (torch.zeros(1),))
    return exported_program_bytes(program)


def test_weights_starting_with_every_byte_load(archive: bytes) -> None:
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        firsts = {z.read(n)[0] for n in z.namelist() if "/data/weights/weight_" in n and z.read(n)}
    assert firsts == set(range(256))
    program = load_exported_program(archive)
    loaded = {name: p for name, p in program.state_dict.items()}
    assert loaded["w128"].view(torch.uint8)[0] == 0x80
    assert len(loaded) == 256


def test_a_weight_declared_pickled_is_still_refused(archive: bytes, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        config_name = next(n for n in z.namelist() if n.endswith("model_weights_config.json"))
        config = json.loads(z.read(config_name))
    first = next(iter(config["config"].values()))
    first["use_pickle"] = True
    weight = config_name.rsplit("/", 1)[0] + "/" + first["path_name"]
    hostile = rewrite_zip(
        archive, {config_name: json.dumps(config).encode(), weight: torch_zip_with_pickle(marker)}
    )
    with pytest.raises(ExportedProgramError, match="use_pickle: true"):
        load_exported_program(hostile)
    assert not marker.exists()


def test_a_pickle_in_a_raw_weight_file_is_only_bytes(archive: bytes, tmp_path: Path) -> None:
    """Declared raw, a pickle's bytes are tensor data: read as numbers, never unpickled."""
    marker = tmp_path / "ran"
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        weight = next(n for n in z.namelist() if n.endswith("/data/weights/weight_0"))
        size = len(z.read(weight))
    payload = (pickle_payload(marker, 2) * 8)[:size]
    program = load_exported_program(rewrite_zip(archive, {weight: payload}))
    assert program is not None and not marker.exists()
