"""What the export stage's fingerprint hashes for the inputs option: the data files `inputs.path`
matches, a loader's source file, and the samples the loader yields (what it reads from elsewhere
may change while its source does not: a cached export must not keep the old samples)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import torch

from stages.export.config import InputsConfig, InputSpec, InputsSource
from stages.export.inputs.data_paths import matched_files
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.loader_source import loader_stream
from stages.export.inputs.split_counts import effective_source, wanted_counts
from stages.python_target import target_source_file


def data_files(cfg: InputsConfig) -> list[Path]:
    """inputs=files: every file `inputs.path` matches, resolved, in sorted order."""
    if effective_source(cfg) != InputsSource.files or not cfg.path:
        return []
    return [path.resolve() for path in matched_files(str(cfg.path))]


def loader_source(cfg: InputsConfig) -> list[Path]:
    """inputs=loader: the Python file defining the loader, when it can be found."""
    if effective_source(cfg) != InputsSource.loader or not cfg._target_:
        return []
    source = target_source_file(str(cfg._target_), Path.cwd())
    return [source] if source is not None else []


def _update(digest: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        flat = value.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{value.dtype}{tuple(value.shape)}".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    else:  # not a tensor: the export stage's check names it
        digest.update(repr(value).encode())


def loader_samples_sha256(
    specs: Sequence[InputSpec], cfg: InputsConfig, base_dir: Path
) -> str | None:
    """inputs=loader: the sha256 of the samples (and labels) the run takes from the loader,
    streamed one at a time; None for other sources. A loader that fails gives a fixed text, and
    the export stage then reports its error."""
    if effective_source(cfg) != InputsSource.loader or not cfg._target_:
        return None
    wanted = wanted_counts(cfg)
    digest = hashlib.sha256()
    try:
        stream = loader_stream(str(cfg._target_), cfg.kwargs, specs, base_dir)
        for sample in islice(stream, wanted.calibration + wanted.evaluation):
            for value in (*sample.tensors, sample.label):
                _update(digest, value)
    except InputsConfigError:
        return "the loader failed"
    return digest.hexdigest()
