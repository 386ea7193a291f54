"""The lowered program the lower stage of this process has just saved, kept for the run stage of
the same invocation: it takes the program from memory instead of reading `lowered_program.zip`
and splicing the weights back in from `exported.pt2` (hundreds of MB read again at ViT-B).

The program is found by the sha256 of the file the run stage is given (`written_files`: the one
declared when it was written), so only that exact file, unchanged, gets it; its weight file must still
be the pinned one, and its tensors must not have been written to since. Anything else is read
from disk as before. One program is kept, and handed over once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from stages.formats.named_data import NamedData
from stages.formats.program import Program, program_from_document, read_program
from stages.formats.shared_weights import SharedWeightsError, WeightFile, weight_file_beside
from stages.handover.tensor_versions import tensor_versions
from stages.handover.written_files import WrittenFiles
from stages.safe_io.file_digests import file_sha256


@dataclass(frozen=True)
class SavedProgram:
    """What `load_program` would read back from the file: its program.json text, constant
    tensors, delegate blobs and named data (weights spliced in: the very tensors written), and
    the weight file it refers to."""

    document: str
    constant_tensors: dict[str, torch.Tensor]
    delegate_blobs: dict[str, bytes]
    weights: dict[str, str] | None  # {"file": name beside it, "sha256": pinned digest}
    versions: tuple[int, ...]  # of constant_tensors, then of named data, when kept
    named_data: dict[str, NamedData]

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor handed over, whose versions must not change before it is taken."""
        return [*self.constant_tensors.values(), *(e.data for e in self.named_data.values())]


_saved: WrittenFiles[SavedProgram] = WrittenFiles()


def save_program(program: Program, path: Path, weights: WeightFile | None = None) -> str:
    """Write atomically and return the file's sha256 (`Program.write`), and keep what was written
    for the run stage of this invocation."""
    path = Path(path)
    written = program.write(path, weights)
    keep_saved(
        path,
        written.document,
        program.constant_tensors,
        program.delegate_blobs,
        written.weights,
        program.named_data,
    )
    return written.sha256


def load_program(path: Path) -> Program:
    """Read and validate a lowered program; every problem is a ProgramError naming the file.
    The program the lower stage of this process saved at `path` comes from memory."""
    path = Path(path)
    saved = take_saved(path)
    if saved is not None:
        return program_from_document(
            saved.document, saved.constant_tensors, saved.delegate_blobs, saved.named_data, path
        )
    return read_program(path)


def keep_saved(
    path: Path,
    document: str,
    constant_tensors: dict[str, torch.Tensor],
    delegate_blobs: dict[str, bytes],
    weights: dict[str, str] | None,
    named_data: dict[str, NamedData] | None = None,
) -> None:
    """Keep what was just written at `path` (replacing any program kept before)."""
    _saved.clear()
    named = dict(named_data or {})
    tensors = [*constant_tensors.values(), *(e.data for e in named.values())]
    versions = tensor_versions(tensors)
    if versions is not None:
        _saved.keep(
            path,
            SavedProgram(
                document, dict(constant_tensors), dict(delegate_blobs), weights, versions, named
            ),
        )


def holds_saved(path: Path) -> bool:
    """Whether a program is kept for this exact, unchanged file (it is one this tool wrote)."""
    return _saved.get(path) is not None


def take_saved(path: Path) -> SavedProgram | None:
    """The program kept for this exact file, once; None when there is none or it no longer fits."""
    saved = _saved.take(path)
    if saved is None:
        return None
    if tensor_versions(saved.tensors()) != saved.versions:
        return None  # something wrote into a constant in place: read the file instead
    if saved.weights is not None and not _weights_unchanged(path, saved.weights):
        return None  # the file load refuses it with the reason
    return saved


def _weights_unchanged(program: Path, weights: dict[str, str]) -> bool:
    try:
        weight_path = weight_file_beside(program, weights)
        return weight_path.is_file() and file_sha256(weight_path) == weights["sha256"]
    except (OSError, SharedWeightsError):
        return False


def forget_saved() -> None:
    """Drop the kept program (tests)."""
    _saved.clear()
