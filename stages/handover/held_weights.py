"""exported.pt2's weight members served from the program this process holds, not read again.

When the export stage of the same process has just written exported.pt2 and still holds that
program (same sha256, tensors never written to since), each weight member's bytes are the bytes
of a held tensor: torch.export.save stores a tensor's whole storage as one member, and the
archive's own payload configs (`data/{weights,constants}/*_config.json`) say which tensor went
to which member. Only those small configs and the central directory are read. Anything that
does not fit exactly (a tensor missing, a view, another size, a pickled payload) gives None,
and the caller reads the members from the file as before: never a wrong reference.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, TypeGuard, cast

import torch

from stages.formats.shared_weights import WeightFile, shared_payload_names
from stages.handover.exported_program import held_exported_tensors
from stages.handover.tensor_versions import has_version
from stages.safe_io.bounded_zip import BoundedZip, ZipLimitError
from stages.safe_io.file_digests import known_sha256_of

log = logging.getLogger(__name__)

# Payload config members, by the directory whose payloads they describe: which tensors of the
# held program (state dict or constants) those payloads hold.
_CONFIG_DIRS = {"/data/weights/": "state_dict", "/data/constants/": "constants"}
_CONFIG_SUFFIX = "_config.json"
# A config entry is a few hundred bytes; a billion-parameter model has a few thousand tensors.
MAX_CONFIG_BYTES = 64 << 20


class _NotServable(Exception):
    """Why the held tensors cannot stand for the file's members (the file is read instead)."""


def held_weight_file(path: Path, sha256: str) -> WeightFile | None:
    """The weight file at `path` (whose sha256 is `sha256`) with its payload members served from
    the held program's tensors, or None when that cannot be proven exact (then read the file)."""
    held = held_exported_tensors(sha256)
    if held is None:
        return None
    try:
        with BoundedZip(Path(path), str(path)) as archive:
            status = archive.file_status()
            if status is None or known_sha256_of(status) != sha256:
                raise _NotServable("the file on disk is not the one the held program was saved to")
            names = shared_payload_names(archive)
            sizes = {name: archive.member_size(name) for name in names}
            owners = _payload_owners(archive)
    except (OSError, ZipLimitError, _NotServable) as exc:
        log.debug("[lower] %s: weights read from the file (%s)", path, exc)
        return None
    state_dict, constants = held
    tensors = {"state_dict": state_dict, "constants": constants}
    try:
        members = {
            name: _member_bytes(name, sizes[name], owners.get(name, []), tensors) for name in names
        }
    except (_NotServable, RuntimeError, TypeError, ValueError) as exc:
        log.debug("[lower] %s: weights read from the file (%s)", path, exc)
        return None
    # Read-only memoryviews (format "B") are bytes-like: the matchers slice, hash and compare them.
    return WeightFile(Path(path).name, sha256, cast(dict[str, bytes], members), sizes)


def _payload_owners(archive: BoundedZip) -> dict[str, list[tuple[str, str]]]:
    """Payload member -> (holder, tensor name) of every tensor a payload config puts in it;
    a payload marked pickled (not raw tensor bytes) cannot be served."""
    owners: dict[str, list[tuple[str, str]]] = {}
    for member in archive.names():
        found = [(d, h) for d, h in _CONFIG_DIRS.items() if d in member]
        if not member.endswith(_CONFIG_SUFFIX) or len(found) != 1:
            continue
        directory, holder = found[0]
        if archive.member_size(member) > MAX_CONFIG_BYTES:
            raise _NotServable(f"{member} is larger than {MAX_CONFIG_BYTES} bytes")
        prefix = member[: member.index(directory) + len(directory)]
        for tensor_name, entry in _config_entries(archive, member).items():
            if not isinstance(entry, dict) or not isinstance(entry.get("path_name"), str):
                raise _NotServable(f"{member}: unexpected entry for {tensor_name!r}")
            if entry.get("use_pickle") is not False:
                raise _NotServable(f"{member}: {tensor_name!r} is pickled")
            owners.setdefault(prefix + entry["path_name"], []).append((holder, str(tensor_name)))
    return owners


def _config_entries(archive: BoundedZip, member: str) -> dict[str, Any]:
    try:
        document = json.loads(archive.read(member))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _NotServable(f"{member} is not JSON ({exc})") from exc
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise _NotServable(f"{member} has no config object")
    return config


def _member_bytes(
    member: str, size: int, owners: list[tuple[str, str]], tensors: dict[str, dict[str, Any]]
) -> memoryview:
    """The bytes of a tensor whose storage is exactly this member (torch.export.save writes a
    tensor's whole storage), as a read-only view; tensors that are views of more are skipped."""
    for holder, name in owners:
        tensor = tensors[holder].get(name)
        if _whole_storage(tensor, size):
            raw: Any = tensor.detach().reshape(-1).view(torch.uint8).numpy()
            view = memoryview(raw).toreadonly()
            if view.nbytes == size:
                return view
    raise _NotServable(f"no held tensor is exactly member {member} ({size} bytes)")


def _whole_storage(tensor: Any, size: int) -> TypeGuard[torch.Tensor]:
    """A plain dense CPU tensor, contiguous from its storage's start to its end, of `size` bytes."""
    return (
        type(tensor) in (torch.Tensor, torch.nn.Parameter)
        and tensor.layout == torch.strided
        and tensor.device.type == "cpu"
        and not tensor.is_quantized
        and has_version(tensor)
        and tensor.is_contiguous()
        and tensor.storage_offset() == 0
        and tensor.numel() * tensor.element_size() == size
        and tensor.untyped_storage().nbytes() == size
    )
