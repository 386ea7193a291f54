"""The labels file task accuracy reads (labels.pt, or `analyze.labels`): the format of inputs.pt,
one `(label_tensor,)` per sample, read weights-only and bounded."""

from __future__ import annotations

from pathlib import Path

import torch

from stages.safe_io.safe_load import UnsafePayloadError, load_tensor_file

LABELS_OPTION = "analyze.labels"
# Labels are a few bytes per sample; a larger file is not a labels file.
MAX_LABELS_BYTES = 256 << 20


class LabelsFileError(ValueError):
    """A labels file that cannot be read as labels; the message names the file and the option."""

    fix_the_command = True


def read_labels(path: Path) -> list[torch.Tensor]:
    """One label tensor per sample, in the samples' order."""
    where = f"{path} ({LABELS_OPTION}, or labels.pt beside inputs.pt)"
    if not path.is_file():
        raise LabelsFileError(f"{where}: no such file")
    size = path.stat().st_size
    if size > MAX_LABELS_BYTES:
        raise LabelsFileError(
            f"{where}: {size} bytes, over the {MAX_LABELS_BYTES >> 20} MB a labels file may have"
        )
    try:
        loaded = load_tensor_file(path, where)
    except UnsafePayloadError as exc:
        raise LabelsFileError(str(exc)) from exc
    if not isinstance(loaded, list | tuple) or not loaded:
        raise LabelsFileError(
            f"{where}: expected a non-empty list with one (label_tensor,) per sample, as "
            "stages.formats.samples.write_samples writes it"
        )
    labels = []
    for index, sample in enumerate(loaded):
        label = sample[0] if isinstance(sample, list | tuple) and len(sample) == 1 else sample
        if not isinstance(label, torch.Tensor):
            raise LabelsFileError(
                f"{where}: sample {index} is a {type(sample).__name__}, not (label_tensor,)"
            )
        labels.append(label)
    return labels
