"""A corpus of hostile files, generated at test time from clean ones (no committed binaries).

Every payload, if anything ever ran it, creates `marker` (open(marker, "w")), so a test proves
that no code ran by checking the marker does not exist. Each hostile file names the loader it
targets (`kind`) so a test can send it through every entry point of that kind.
"""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class Hostile:
    """One hostile file: what it is, which loader kind it targets, its bytes."""

    name: str
    kind: str  # "tensors" | "pt2" | "etrecord" | "executorch_etrecord" | "program"
    data: bytes


class _OpenMarker:
    """Unpickling this creates the marker file: proof that a pickle payload ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Callable[..., object], tuple[str, str]]:
        return (open, (self.marker, "w"))


def pickle_payload(marker: Path, protocol: int) -> bytes:
    return pickle.dumps(_OpenMarker(marker), protocol=protocol)


def sympify_payload(marker: Path) -> str:
    """A shape expression that sympy.sympify would eval into open(marker, "w")."""
    code = f"open({str(marker)!r}, 'w')"
    return "exec(" + "+".join(f"chr({ord(c)})" for c in code) + ")"


def torch_zip_with_pickle(marker: Path) -> bytes:
    """A well-formed torch.save zip whose data.pkl is the payload."""
    clean = io.BytesIO()
    torch.save([(torch.ones(2),)], clean)
    return rewrite_zip(
        clean.getvalue(),
        {n: pickle_payload(marker, 2) for n in _names(clean.getvalue(), "data.pkl")},
    )


def _names(data: bytes, suffix: str) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [n for n in archive.namelist() if n.endswith(suffix)]


def rewrite_zip(
    data: bytes,
    replace: dict[str, bytes] | None = None,
    add: dict[str, bytes] | None = None,
    duplicate: dict[str, bytes] | None = None,
) -> bytes:
    """A copy of a zip with members replaced, added, or written a second time under one name."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            dst.writestr(item.filename, (replace or {}).get(item.filename, src.read(item)))
        for name, payload in (add or {}).items():
            dst.writestr(name, payload)
        for name, payload in (duplicate or {}).items():
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dst.writestr(name, payload)
    return out.getvalue()


def _member(data: bytes, suffix: str) -> str:
    return next(iter(_names(data, suffix)))


def _json_member(data: bytes, suffix: str) -> dict:  # type: ignore[type-arg]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return json.loads(archive.read(_member(data, suffix)))  # type: ignore[no-any-return]


def hostile_pt2(clean: bytes, marker: Path) -> list[Hostile]:
    """torch.export archives that each make torch.export.load run the payload (or try to)."""
    root = _member(clean, "archive_format").removesuffix("archive_format")
    inputs, graph = root + "data/sample_inputs/model.pt", root + "models/model.json"
    weights_cfg = root + "data/weights/model_weights_config.json"
    constants_cfg = root + "data/constants/model_constants_config.json"
    weights = _json_member(clean, "model_weights_config.json")
    first = next(iter(weights["config"]))
    pickled_weight = json.loads(json.dumps(weights))
    pickled_weight["config"][first]["use_pickle"] = True
    opaque = {
        "config": {
            "evil": {
                "path_name": "opaque_obj_0.json",
                "is_param": False,
                "use_pickle": True,
                "tensor_meta": None,
            }
        }
    }
    custom = {
        "config": {
            "evil": {
                "path_name": "custom_obj_0",
                "is_param": False,
                "use_pickle": True,
                "tensor_meta": None,
            }
        }
    }
    graph_doc = _json_member(clean, "models/model.json")
    bad_target = json.loads(json.dumps(graph_doc))
    bad_target["graph_module"]["graph"]["nodes"][0]["target"] = "torch.os.system"
    bad_expr = json.loads(json.dumps(graph_doc))
    node = bad_expr["graph_module"]["graph"]["nodes"][0]
    node["inputs"].append(
        {
            "name": "x",
            "arg": {"as_sym_int": {"as_expr": {"expr_str": sympify_payload(marker), "hint": None}}},
            "kind": 1,
        }
    )
    weight_file = root + "data/weights/" + weights["config"][first]["path_name"]
    p0 = pickle_payload(marker, 0)
    return [
        Hostile(
            "pt2: protocol-0 pickle as sample_inputs/model.pt",
            "pt2",
            rewrite_zip(clean, {inputs: p0}),
        ),
        Hostile(
            "pt2: torch.save zip with a payload as sample inputs",
            "pt2",
            rewrite_zip(clean, {inputs: torch_zip_with_pickle(marker)}),
        ),
        Hostile(
            "pt2: weight with use_pickle: true",
            "pt2",
            rewrite_zip(
                clean,
                {
                    weights_cfg: json.dumps(pickled_weight).encode(),
                    weight_file: torch_zip_with_pickle(marker),
                },
            ),
        ),
        Hostile(
            "pt2: opaque constant member named opaque_obj_0.json",
            "pt2",
            rewrite_zip(
                clean,
                {constants_cfg: json.dumps(opaque).encode()},
                add={root + "data/constants/opaque_obj_0.json": p0},
            ),
        ),
        Hostile(
            "pt2: torchbind custom_obj constant",
            "pt2",
            rewrite_zip(
                clean,
                {constants_cfg: json.dumps(custom).encode()},
                add={root + "data/constants/custom_obj_0": p0},
            ),
        ),
        Hostile(
            "pt2: legacy pickled weights file data/weights/model.pt",
            "pt2",
            rewrite_zip(clean, add={root + "data/weights/model.pt": p0}),
        ),
        Hostile(
            "pt2: node target torch.os.system",
            "pt2",
            rewrite_zip(clean, {graph: json.dumps(bad_target).encode()}),
        ),
        Hostile(
            "pt2: shape expression that sympify would eval",
            "pt2",
            rewrite_zip(clean, {graph: json.dumps(bad_expr).encode()}),
        ),
        Hostile(
            "pt2: pickle inside models/model.json",
            "pt2",
            rewrite_zip(clean, {graph: pickle_payload(marker, 4)}),
        ),
        Hostile(
            "pt2: AOTInductor shared library member",
            "pt2",
            rewrite_zip(clean, add={root + "data/aotinductor/model/model.so": b"\x7fELF"}),
        ),
        Hostile(
            "pt2: second model with pickled sample inputs",
            "pt2",
            rewrite_zip(
                clean,
                add={
                    root + "models/evil.json": json.dumps(graph_doc).encode(),
                    root + "data/sample_inputs/evil.pt": p0,
                },
            ),
        ),
        Hostile(
            "pt2: duplicate sample_inputs member carrying a payload",
            "pt2",
            rewrite_zip(clean, duplicate={inputs: p0}),
        ),
    ]


def hostile_tensor_files(marker: Path) -> list[Hostile]:
    """Tensor files (checkpoint, inputs.pt, reference outputs, constants.pt) carrying payloads."""
    raw = [
        Hostile(f"tensors: raw pickle protocol {p}", "tensors", pickle_payload(marker, p))
        for p in range(6)
    ]
    clean = io.BytesIO()
    torch.save([(torch.ones(2),)], clean)
    return [
        *raw,
        Hostile(
            "tensors: torch.save zip with a payload data.pkl",
            "tensors",
            torch_zip_with_pickle(marker),
        ),
        Hostile(
            "tensors: payload pickle followed by a valid zip (polyglot)",
            "tensors",
            pickle_payload(marker, 2) + clean.getvalue(),
        ),
    ]


def by_reference(clean: bytes, reference: bytes) -> bytes:
    """A self-contained ETRecord turned into one that refers to its program by `reference`."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(clean)) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            if item.filename != "reference_program.pt2":
                dst.writestr(item.filename, src.read(item))
        dst.writestr("reference_program_ref.json", reference)
    return out.getvalue()


def hostile_program_references(clean: bytes, marker: Path) -> list[Hostile]:
    """ETRecords whose program reference points outside their directory or carries a payload."""
    sha = "0" * 64

    def ref(file_name: str) -> bytes:
        return json.dumps({"sha256": sha, "size": 10, "file": file_name}).encode()

    return [
        Hostile(
            f"etrecord: program reference names {name!r}",
            "etrecord",
            by_reference(clean, ref(name)),
        )
        for name in ("../exported.pt2", "/etc/passwd", "sub/exported.pt2", "..", ".pipeline")
    ] + [
        Hostile(
            "etrecord: program reference is a pickle",
            "etrecord",
            by_reference(clean, pickle_payload(marker, 4)),
        ),
        Hostile(
            "etrecord: both an embedded program and a program reference",
            "etrecord",
            rewrite_zip(clean, add={"reference_program_ref.json": ref("exported.pt2")}),
        ),
    ]


def hostile_etrecords(clean: bytes, clean_pt2: bytes, marker: Path) -> list[Hostile]:
    """Our (self-contained) ETRecord with a payload in each kind of member, nested archives and
    hostile program references included."""
    p4 = pickle_payload(marker, 4)
    nested = [
        Hostile(
            f"etrecord/reference_program.pt2 ← {h.name}",
            "etrecord",
            rewrite_zip(clean, {"reference_program.pt2": h.data}),
        )
        for h in hostile_pt2(clean_pt2, marker)
    ]
    return [
        Hostile(
            "etrecord: etrecord_version.json is a pickle",
            "etrecord",
            rewrite_zip(clean, {"etrecord_version.json": p4}),
        ),
        Hostile(
            "etrecord: debug_handles.json is a pickle",
            "etrecord",
            rewrite_zip(clean, {"debug_handles.json": pickle_payload(marker, 0)}),
        ),
        Hostile(
            "etrecord: representative_inputs.pt is a raw pickle",
            "etrecord",
            rewrite_zip(clean, {"representative_inputs.pt": p4}),
        ),
        Hostile(
            "etrecord: reference_outputs.pt is a torch.save zip with a payload",
            "etrecord",
            rewrite_zip(clean, {"reference_outputs.pt": torch_zip_with_pickle(marker)}),
        ),
        Hostile(
            "etrecord: reference_program.pt2 is a raw pickle",
            "etrecord",
            rewrite_zip(clean, {"reference_program.pt2": p4}),
        ),
        *nested,
        *hostile_program_references(clean, marker),
    ]


def hostile_executorch_etrecords(marker: Path) -> list[Hostile]:
    """ExecuTorch-format ETRecords (ETRECORD_V0) with payloads where its parser unpickles."""
    clean = io.BytesIO()
    torch.save({}, clean)
    graph = {
        "graph_module": {
            "graph": {
                "nodes": [{"target": "torch.ops.aten.relu.default", "inputs": [], "outputs": []}]
            }
        }
    }

    def record(members: dict[str, bytes]) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            archive.writestr("ETRECORD_V0", b"")
            for name, data in members.items():
                archive.writestr(name, data)
        return out.getvalue()

    program = {
        "exported_program": json.dumps(graph).encode(),
        "exported_program_state_dict": clean.getvalue(),
        "exported_program_constants": clean.getvalue(),
        "exported_program_example_inputs": clean.getvalue(),
    }
    bad_expr = json.loads(json.dumps(graph))
    bad_expr["graph_module"]["graph"]["nodes"][0]["inputs"] = [
        {"arg": {"as_sym_int": {"as_expr": {"expr_str": sympify_payload(marker)}}}}
    ]
    return [
        Hostile(
            "executorch etrecord: state_dict with a payload",
            "executorch_etrecord",
            record({**program, "exported_program_state_dict": torch_zip_with_pickle(marker)}),
        ),
        Hostile(
            "executorch etrecord: constants are a raw pickle",
            "executorch_etrecord",
            record({**program, "exported_program_constants": pickle_payload(marker, 2)}),
        ),
        Hostile(
            "executorch etrecord: reference_outputs raw pickle",
            "executorch_etrecord",
            record({**program, "reference_outputs": pickle_payload(marker, 5)}),
        ),
        Hostile(
            "executorch etrecord: shape expression eval",
            "executorch_etrecord",
            record({**program, "exported_program": json.dumps(bad_expr).encode()}),
        ),
        Hostile(
            "executorch etrecord: debug_handle_map is a pickle",
            "executorch_etrecord",
            record({**program, "debug_handle_map": pickle_payload(marker, 1)}),
        ),
    ]


def hostile_programs(clean: bytes, marker: Path) -> list[Hostile]:
    """Lowered programs (lowered_program.zip) with payloads in their tensor and JSON members."""
    document = _json_member(clean, "program.json")
    bad_op = json.loads(json.dumps(document))
    operators = [i for i in bad_op["main"]["instructions"] if i["kind"] == "operator"]
    assert operators, "the clean program needs an operator call (lower it with backend=portable)"
    operators[0]["op"] = "os.system.default"
    return [
        Hostile(
            "program: constants.pt is a raw pickle",
            "program",
            rewrite_zip(clean, {"constants.pt": pickle_payload(marker, 3)}),
        ),
        Hostile(
            "program: constants.pt is a torch.save zip with a payload",
            "program",
            rewrite_zip(clean, {"constants.pt": torch_zip_with_pickle(marker)}),
        ),
        Hostile(
            "program: program.json is a pickle",
            "program",
            rewrite_zip(clean, {"program.json": pickle_payload(marker, 2)}),
        ),
        Hostile(
            "program: an operator outside ATen",
            "program",
            rewrite_zip(clean, {"program.json": json.dumps(bad_op).encode()}),
        ),
    ]
