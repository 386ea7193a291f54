"""Fault injection changes exactly the chosen kernel; corrupt programs and blobs fail clearly."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from stages.backends.backend_api import BackendError
from stages.backends.kernel.blob import decode_blob
from stages.backends.named_data_store import NamedDataMap
from stages.formats.program import ProgramError
from stages.handover.etrecord import load_etrecord
from stages.handover.lowered_program import load_program
from stages.handover.samples import load_samples
from stages.lower.stage import LoweringError
from stages.run.executor import Executor
from tests.helpers.lowering import export_and_lower, relative_error


@pytest.mark.parametrize("backend", ["xnnpack", "qnn", "portable"])
@pytest.mark.parametrize("kind", ["scale", "offset", "nan", "transpose"])
def test_fault_breaks_the_output_and_is_recorded(
    backend: str, kind: str, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = tiny_cfg(
        "mlp",
        f"backend={backend}",
        "backend.precision=fp32",
        "backend.fault.node=linear_1",
        f"backend.fault.kind={kind}",
    )
    exported, lowered = export_and_lower(cfg, tmp_path)
    report = json.loads(lowered.lowering_report.read_text())
    assert (
        report["fault_injected"]["node"] == "linear_1" and report["fault_injected"]["kind"] == kind
    )
    assert lowered.metrics["fault_injected"] == 1.0
    outputs = Executor(load_program(lowered.program)).execute(load_samples(exported.inputs)[0])
    reference = load_samples(exported.reference_outputs)[0]
    error = relative_error(outputs, reference)
    assert error > 1e-3  # visibly wrong (inf when a NaN reached the output)


def test_epsilon_fault_needs_a_norm_and_changes_layer_norm(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    with pytest.raises(BackendError, match=r"fault\.kind=epsilon needs a norm op"):
        export_and_lower(
            tiny_cfg("mlp", "backend.fault.node=linear", "backend.fault.kind=epsilon"),
            tmp_path / "a",
        )
    exported, lowered = export_and_lower(
        tiny_cfg(
            "vit",
            "backend.fault.node=layer_norm",
            "backend.fault.kind=epsilon",
            "backend.fault.value=10.0",
        ),
        tmp_path / "b",
    )
    outputs = Executor(load_program(lowered.program)).execute(load_samples(exported.inputs)[0])
    assert relative_error(outputs, load_samples(exported.reference_outputs)[0]) > 1e-3


def test_unknown_fault_target_names_the_option(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    with pytest.raises(LoweringError, match=r"backend\.fault\.node='nope' is not a node"):
        export_and_lower(tiny_cfg("mlp", "backend.fault.node=nope"), tmp_path)
    with pytest.raises(LoweringError, match=r"backend\.fault\.debug_handle=999 does not exist"):
        export_and_lower(tiny_cfg("mlp", "backend.fault.debug_handle=999"), tmp_path / "b")


def test_corrupt_program_and_blob_raise_named_errors(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    _, lowered = export_and_lower(tiny_cfg("mlp"), tmp_path)
    data = lowered.program.read_bytes()
    truncated = tmp_path / "truncated.pte"
    truncated.write_bytes(data[: len(data) // 3])
    with pytest.raises(ProgramError, match=r"truncated\.pte"):
        load_program(truncated)
    loaded = load_program(lowered.program)
    blob, named = loaded.delegate_blobs["delegates/0.bin"], NamedDataMap(loaded.named_data)
    with zipfile.ZipFile(lowered.program) as z:
        document = json.loads(z.read("program.json"))
    decode_blob(blob, named)
    with pytest.raises(BackendError, match="bad magic"):
        decode_blob(b"X" * len(blob), named)
    with pytest.raises(BackendError, match="truncated kernel table"):
        decode_blob(blob[:-8], named)
    with pytest.raises(BackendError, match="'p_inp_weight' is not in the program"):
        decode_blob(blob)  # its weights are the program's named data
    document["version"] = 42
    newer = tmp_path / "newer.pte"
    with zipfile.ZipFile(lowered.program) as zin, zipfile.ZipFile(newer, "w") as zout:
        for item in zin.infolist():
            zout.writestr(
                item.filename,
                json.dumps(document)
                if item.filename == "program.json"
                else zin.read(item.filename),
            )
    with pytest.raises(ProgramError, match="program version 42 is not supported"):
        load_program(newer)
    document["version"] = 1
    document["main"]["instructions"][0] = {
        **document["main"]["instructions"][0],
        "kind": "operator",
        "op": "builtins.exec.default",
        "args": [],
        "kwargs": {},
        "outputs": [0],
        "multi_output": False,
        "debug_handle": 1,
        "name": "x",
        "instruction_id": 0,
    }
    evil = tmp_path / "evil.pte"
    with zipfile.ZipFile(lowered.program) as zin, zipfile.ZipFile(evil, "w") as zout:
        for item in zin.infolist():
            zout.writestr(
                item.filename,
                json.dumps(document)
                if item.filename == "program.json"
                else zin.read(item.filename),
            )
    with pytest.raises(ProgramError, match="not an 'aten"):
        load_program(evil)


def test_qnn_tensor_names_embed_handles_and_runtime_parses_them(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    from stages.backends.qnn import QnnBackend

    _, lowered = export_and_lower(tiny_cfg("mlp", "backend=qnn"), tmp_path)
    loaded = load_program(lowered.program)
    blob, named = loaded.delegate_blobs["delegates/0.bin"], NamedDataMap(loaded.named_data)
    _, tensors = decode_blob(blob, named)
    assert all("__debugID_" in t.name for t in tensors)
    backend = QnnBackend("fp16")
    backend.named_data_map = named  # as the runtime installs it before init
    runtime = backend.init(blob, {})
    record = load_etrecord(lowered.etrecord)
    assert {k.identifier for k in runtime.kernels} == set(record.delegate_maps[0].debug_handle_map)
