"""`inputs=files`: samples from a file, a directory or a glob of .pt/.npy/.npz files, in sorted
path order, one file read at a time; a batched array (leading dim = samples) is split."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from stages.export.config import InputSpec
from stages.export.inputs.data_paths import matched_files
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.file_reading import FileContent, read_data_file
from stages.export.inputs.samples import SourcedSample


def _per_sample(array: torch.Tensor, shape: list[int], what: str) -> list[torch.Tensor]:
    """`array` cut into samples of `shape`: itself, a stack [N, *shape], or N/shape[0] chunks."""
    if list(array.shape) == shape:
        return [array]
    if array.dim() == len(shape) + 1 and list(array.shape[1:]) == shape:
        return [array[i].clone() for i in range(array.shape[0])]
    batch = shape[0] if shape else 0
    if (
        array.dim() == len(shape)
        and batch > 0
        and list(array.shape[1:]) == shape[1:]
        and array.shape[0] % batch == 0
    ):
        return [chunk.clone() for chunk in torch.split(array, batch)]
    raise InputsConfigError(
        f"{what} has shape {list(array.shape)}, which is neither model.inputs' shape {shape} nor "
        f"a batch of it ([N, {', '.join(map(str, shape))}] or [N*{batch}, {', '.join(map(str, shape[1:]))}])"
    )


def _batched_samples(content: FileContent, specs: Sequence[InputSpec], file: Path) -> list[tuple]:
    if len(content.batched) != len(specs):
        raise InputsConfigError(
            f"inputs.path file {file} holds {len(content.batched)} input array(s), model.inputs "
            f"has {len(specs)} (a .npz: one member per input, in order, plus '{'labels'}')"
        )
    columns = [
        _per_sample(a, [int(d) for d in s.shape], f"inputs.path file {file} array {i}")
        for i, (a, s) in enumerate(zip(content.batched, specs, strict=True))
    ]
    counts = {len(c) for c in columns}
    if len(counts) != 1:
        raise InputsConfigError(
            f"inputs.path file {file}: its arrays hold different sample counts {sorted(counts)}"
        )
    return list(zip(*columns, strict=True))


def _labels(content: FileContent, count: int, file: Path) -> list[torch.Tensor | None]:
    """One label per sample (None without labels): `labels[i]` when there is one per sample, or
    equal chunks when there is one per row of a batch cut into samples ([N*4] for [4, ...])."""
    if content.labels is None:
        return [None] * count
    labels = content.labels
    if labels.dim() == 0 or labels.shape[0] % count:
        raise InputsConfigError(
            f"inputs.path file {file}: 'labels' has shape {list(labels.shape)}, need one label "
            f"per sample ({count}) or per row of them"
        )
    rows = labels.shape[0] // count
    if rows == 1:
        return [labels[i].clone() for i in range(count)]
    return [chunk.clone() for chunk in torch.split(labels, rows)]


def file_stream(path: str, specs: Sequence[InputSpec], max_bytes: int) -> Iterator[SourcedSample]:
    """The samples of every matched file in order; a file is read when the stream reaches it."""
    for file in matched_files(path):
        content = read_data_file(file, max_bytes)
        samples = list(content.samples) or _batched_samples(content, specs, file)
        for n, (tensors, label) in enumerate(
            zip(samples, _labels(content, len(samples), file), strict=True)
        ):
            yield SourcedSample(tuple(tensors), label, f"{file}[{n}]")
