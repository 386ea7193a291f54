"""No input runs code: a generated corpus of hostile files through every entry point that loads."""

from __future__ import annotations

import contextlib
import io
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from stages.analyze.load.loading import load_inputs
from stages.export.config import InputsConfig, InputSpec, InputsSource, ModelConfig
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.selection import select_inputs
from stages.export.model_factory import ModelConfigError, build_model
from stages.formats.etrecord import ETRecord, ETRecordError
from stages.formats.exported_program import ExportedProgramError
from stages.formats.program import ProgramError
from stages.handover.etrecord import pack_etrecord
from stages.handover.exported_program import load_exported_program
from stages.handover.lowered_program import load_program
from stages.handover.samples import load_samples
from stages.lower.stage import run_lower
from stages.run.stage import run_run
from stages.safe_io.safe_load import UnsafePayloadError
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config
from tests.helpers.hostile_files import (
    Hostile,
    hostile_etrecords,
    hostile_executorch_etrecords,
    hostile_programs,
    hostile_pt2,
    hostile_tensor_files,
    pickle_payload,
)
from tests.helpers.lowering import export_and_lower

MLP = ModelConfig(
    name="mlp",
    _target_="stages.export.zoo.mlp.build_mlp",
    kwargs={"in_features": 32, "hidden": 64, "out_features": 10, "layers": 2},
    inputs=[InputSpec(shape=[4, 32])],
)


@dataclass(frozen=True)
class Clean:
    run_dir: Path
    exported: Path
    etrecord: Path
    program: Path
    inputs: Path
    cfg: object


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Clean:
    root = tmp_path_factory.mktemp("clean")
    cfg = compose_config(root, [*TINY_MODEL_OVERRIDES["mlp"], "backend=portable"])
    exported, lowered = export_and_lower(cfg, root / "run")
    run_run(OmegaConf.to_object(cfg.runtime), lowered.program, exported.inputs, root / "run")  # type: ignore[arg-type]
    # Self-contained, so every member (the program's included) can be made hostile.
    packed = root / "etrecord_full.zip"
    pack_etrecord(lowered.etrecord, packed)
    return Clean(
        root / "run",
        exported.exported_program,
        packed,
        lowered.program,
        exported.inputs,
        cfg,
    )


@dataclass(frozen=True)
class Corpus:
    marker: Path
    files: list[Hostile]


@pytest.fixture(scope="module")
def corpus(clean: Clean, tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    marker = tmp_path_factory.mktemp("marker") / "code_ran"
    files = [
        *hostile_tensor_files(marker),
        *hostile_pt2(clean.exported.read_bytes(), marker),
        *hostile_etrecords(clean.etrecord.read_bytes(), clean.exported.read_bytes(), marker),
        *hostile_executorch_etrecords(marker),
        *hostile_programs(clean.program.read_bytes(), marker),
    ]
    return Corpus(marker, files)


def _write(tmp_path: Path, hostile: Hostile, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(hostile.data)
    return path


def _entry_points(
    clean: Clean, tmp: Path
) -> dict[str, list[tuple[str, Callable[[Path], object], type]]]:
    """Per kind: (entry point, call with the hostile path, the format's error type)."""
    cfg = clean.cfg
    backend = OmegaConf.to_object(cfg.backend)  # type: ignore[attr-defined]
    runtime = OmegaConf.to_object(cfg.runtime)  # type: ignore[attr-defined]

    def checkpoint(path: Path) -> object:
        return build_model(ModelConfig(**{**MLP.__dict__, "checkpoint": str(path)}))

    return {
        "tensors": [
            ("model.checkpoint=", checkpoint, ModelConfigError),
            (
                "inputs.path=",
                lambda p: select_inputs(
                    MLP.inputs, InputsConfig(InputsSource.files, path=str(p)), p.parent
                ),
                InputsConfigError,
            ),
            ("cached inputs.pt / reference_outputs.pt", load_samples, UnsafePayloadError),
            (
                "run stage inputs.pt",
                lambda p: run_run(runtime, clean.program, p, tmp / "run"),  # type: ignore[arg-type]
                UnsafePayloadError,
            ),
        ],
        "pt2": [
            ("cached exported.pt2", load_exported_program, ExportedProgramError),
            (
                "lower stage exported.pt2",
                lambda p: run_lower(backend, p, clean.etrecord, clean.inputs, tmp / "lower"),  # type: ignore[arg-type]
                ExportedProgramError,
            ),
        ],
        "etrecord": [
            ("ETRecord.load", ETRecord.load, ETRecordError),
            (
                "analyze.etrecord=",
                lambda p: load_inputs(clean.run_dir / "etdump.etdp", None, p),
                ETRecordError,
            ),
        ],
        "executorch_etrecord": [
            ("ETRecord.load", ETRecord.load, ETRecordError),
            (
                "analyze.etrecord=",
                lambda p: load_inputs(clean.run_dir / "etdump.etdp", None, p),
                ETRecordError,
            ),
        ],
        "program": [
            ("load_program", load_program, ProgramError),
            (
                "run stage lowered_program.zip",
                lambda p: run_run(runtime, p, clean.inputs, tmp / "run"),  # type: ignore[arg-type]
                ProgramError,
            ),
        ],
    }


def test_the_corpus_is_large_and_its_payloads_are_live(corpus: Corpus, tmp_path: Path) -> None:
    """>= 20 hostile files over every kind; the payload really runs when unpickled unsafely."""
    assert len(corpus.files) >= 20
    assert {h.kind for h in corpus.files} == {
        "tensors",
        "pt2",
        "etrecord",
        "executorch_etrecord",
        "program",
    }
    marker = tmp_path / "live"
    pickle.loads(pickle_payload(marker, 0))
    assert marker.exists()


def test_torch_export_load_would_run_the_known_exploits(clean: Clean, tmp_path: Path) -> None:
    """The corpus is not a straw man: plain torch.export.load runs three of its payloads."""
    marker = tmp_path / "ran"
    files = {h.name: h.data for h in hostile_pt2(clean.exported.read_bytes(), marker)}
    for name in (
        "pt2: protocol-0 pickle as sample_inputs/model.pt",
        "pt2: weight with use_pickle: true",
        "pt2: opaque constant member named opaque_obj_0.json",
    ):
        marker.unlink(missing_ok=True)
        with contextlib.suppress(Exception):  # the payload runs before torch notices anything
            torch.export.load(io.BytesIO(files[name]))
        assert marker.exists(), name


def test_every_hostile_file_is_refused_by_every_entry_point_without_running_code(
    clean: Clean, corpus: Corpus, tmp_path: Path
) -> None:
    entry_points = _entry_points(clean, tmp_path)
    checked = 0
    for index, hostile in enumerate(corpus.files):
        path = _write(tmp_path, hostile, f"hostile_{index}.bin")
        for entry, call, error in entry_points[hostile.kind]:
            with pytest.raises(error) as raised:
                call(path)
            message = str(raised.value)
            assert str(path) in message, (hostile.name, entry, message)
            assert not corpus.marker.exists(), (hostile.name, entry)
            checked += 1
    assert checked >= 40


def test_refusals_say_what_was_refused(clean: Clean, corpus: Corpus, tmp_path: Path) -> None:
    """Pickled weights, opaque constants and payload members are named for what they are."""
    expected = {
        "pt2: weight with use_pickle: true": "use_pickle: true",
        "pt2: opaque constant member named opaque_obj_0.json": "opaque/pickled",
        "pt2: torchbind custom_obj constant": "opaque/pickled",
        "pt2: node target torch.os.system": "torch.os.system",
        "pt2: shape expression that sympify would eval": "symbolic shape expression",
        "pt2: duplicate sample_inputs member carrying a payload": "two members named",
        "tensors: raw pickle protocol 0": "not a torch.save zip",
        "tensors: torch.save zip with a payload data.pkl": "GLOBAL",
        "etrecord: debug_handles.json is a pickle": "debug_handles.json",
    }
    by_name = {h.name: h for h in corpus.files}
    for name, phrase in expected.items():
        path = _write(tmp_path, by_name[name], "file.bin")
        loader = load_samples if by_name[name].kind == "tensors" else None
        with pytest.raises((UnsafePayloadError, ExportedProgramError, ETRecordError)) as raised:
            (
                loader
                or (ETRecord.load if by_name[name].kind == "etrecord" else load_exported_program)
            )(path)
        assert phrase in str(raised.value), (name, str(raised.value))
